"""Paper 000, Section 6.3: VarioPath against the MILP optimum, and the Table 3 ablation ordering.

MILP: the certified optimum of the channel model (collectives/alltoallv/milp.py); both it and
VarioPath are timed by the flow-level evaluator (λ = 0). Demands: dense Zipf (s = 0.6),
seeds 0-4, 32 MiB per rank. Instances: one 8-GPU R5080-BF3 node, and one and two nodes of a
4-GPU variant (two GPUs under each switch). Paper: 99.18 % on average; issue: >= 98 % with the
default preset (conf/scheduler/variopath.yaml, the one `scheduler=variopath` runs).
"""

from pathlib import Path

import numpy as np
import pytest
import yaml

from collectives.alltoallv.schedulers import make_scheduler
from collectives.alltoallv.workloads import zipf
from fabrics.pcie.evaluator import evaluate
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster

ROOT = Path(__file__).resolve().parents[2]
BF3 = yaml.safe_load((ROOT / "conf" / "platform" / "r5080_bf3.yaml").read_text())
DEFAULT = {k: v for k, v in yaml.safe_load((ROOT / "conf" / "scheduler" / "variopath.yaml").read_text()).items()
           if k != "name"}


def four_gpu_nodes():
    cfg = dict(BF3, gpus_per_node=4, gpus={"sw0": [0, 1], "sw1": [2, 3]})
    return cfg


INSTANCES = {"8gpu_x1": (BF3, 1), "4gpu_x1": (four_gpu_nodes(), 1), "4gpu_x2": (four_gpu_nodes(), 2)}


def ratios(cfg, nodes, seeds):
    t = channel_topology(pcie_cluster(cfg, nodes))
    milp, vp = make_scheduler("milp", t), make_scheduler("variopath", t, DEFAULT)
    out = []
    for seed in seeds:
        d = zipf(t.n_ranks, 32 * 2**20, 0.6, seed)
        m = milp.plan(d)
        assert m.meta["certificate"]["status"] == "optimal"
        out.append(evaluate(m, t.capacity_Bps).completion_s / evaluate(vp.plan(d), t.capacity_Bps).completion_s)
    return np.array(out)


def test_default_variopath_reaches_98_percent_of_the_milp_optimum_on_average():
    per = {name: ratios(cfg, nodes, range(5)) for name, (cfg, nodes) in INSTANCES.items()}
    every = np.concatenate(list(per.values()))
    assert (every <= 1 + 1e-6).all()  # the MILP is an optimum of the same model
    assert every.mean() >= 0.98, {k: v.round(4).tolist() for k, v in per.items()}


def test_ablation_ordering_of_table3_on_two_node_r5080_bf3():
    t = channel_topology(pcie_cluster(BF3, 2))
    demands = [zipf(16, 64 * 2**20, 0.6, seed) for seed in range(5)]
    mean = {}
    for name in ("variopath", "fixed_peers", "fixed_paths", "fixed_both"):
        planner = make_scheduler(name, t)
        mean[name] = np.mean([evaluate(planner.plan(d), t.capacity_Bps).completion_s for d in demands])
    joint = mean["variopath"]
    assert joint < mean["fixed_peers"] < mean["fixed_both"]
    assert joint < mean["fixed_paths"] < mean["fixed_both"]
