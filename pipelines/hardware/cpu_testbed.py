"""A small PCIe platform for trying the replay on any machine (tests, demos, CPU CI).

``TESTBED`` models a 4-GPU node: two switches with two GPUs and one NIC each under one CPU
(PCIe Gen4-like 32 GB/s, 25 GB/s NICs); ``nodes=2`` gives 8 ranks with inter-node (NIC) paths,
where relaying schedulers (FAST-/DeepEP-like) forward data. ``schedule_json`` plans a demand on
it with any registered scheduler, the same way ``pipelines.alltoallv`` does on a real platform.
"""

from __future__ import annotations

import numpy as np

TESTBED = {
    "name": "testbed4", "gpus_per_node": 4, "pcie_rate": "32GB/s", "nic_rate": "25GB/s",
    "vertices": {"sw0": "switch", "sw1": "switch", "cpu0": "cpu"},
    "gpus": {"sw0": [0, 1], "sw1": [2, 3]},
    "nics": {"nic0": "sw0", "nic1": "sw1"},
    "links": [["cpu0", "sw0"], ["cpu0", "sw1"]],
    "network": {"nodes_per_leaf": 4, "oversubscription": 1.0},
}


def schedule_json(scheduler: str, nodes: int, demand: np.ndarray, platform: dict | None = None) -> dict:
    """``schedule.json`` content of ``scheduler`` for ``demand`` on ``platform`` (default TESTBED)."""
    from collectives.alltoallv.schedulers import make_scheduler
    from fabrics.pcie.paths import channel_topology
    from pipelines.network import pcie_cluster

    topo = channel_topology(pcie_cluster(platform or TESTBED, nodes))
    return make_scheduler(scheduler, topo).plan(np.asarray(demand, dtype=np.int64)).to_json()
