"""One collective on a whole fabric through the fabric network model (FabricAnalytical), against
Figure 3 and Figure 13 (paper-numbers.md): 512 accelerators, 36 ports at 400 Gb/s.

* Figure 3 (single level, parallel RS+AG forced on the planned topology): OCS 3.18 / 3.26 / 5.10 µs
  at 1 KiB / 64 KiB / 1 MiB, EPS 5.21 / 5.26 / 6.41 µs — within 10 %.
* Figure 13 (512 of 576, two levels, schedule auto): all-OCS 1 KiB all-reduce 1.78 µs, all-to-all
  1.70 µs — within 15 %; all-EPS (native, chosen by size) 3.77 / 3.02 µs are Simlette points the
  analytical model stays below (README.md, README.md).
"""

import pytest

from fabrics.network.analytical import FabricAnalytical
from fabrics.network.protocol import CollectiveCall, DemandEntry
from pipelines.network import fabric_from_dict

W, KIB = 512, 1024
GROUP = (tuple(range(W)),)


def completion(kind, collective, size, schedule="auto", accelerators=None):
    d = {"kind": kind, "ports": 36, "link_rate": 5e10}
    if accelerators:
        d["accelerators"] = accelerators
    net = FabricAnalytical(fabric_from_dict(d, world=W), schedule=schedule)
    demand = (DemandEntry(region="c", axis="world", collective=collective, groups=1, ranks=W, calls_per_step=1,
                          payload_bytes=size),)
    net.prepare(demand, W)
    return net.price(CollectiveCall(call_id=0, region="c", axis="world", collective=collective, groups=GROUP,
                                    payload_bytes=size)), net


@pytest.mark.parametrize("kib, ocs_us, eps_us", [(1, 3.18, 5.21), (64, 3.26, 5.26), (1024, 5.10, 6.41)])
def test_figure3_parallel_rs_ag(kib, ocs_us, eps_us):
    (t_ocs, name), net = completion("single_ocs", "allreduce", kib * KIB, schedule="rs_ag_parallel")
    assert name == "rs_ag_parallel"
    assert net.deployment.axes[("c", "world", "allreduce")].topology == "K8□K8□K8"
    assert t_ocs == pytest.approx(ocs_us * 1e-6, rel=0.10)
    # EPS: the same schedule on the complete graph is not Figure 3's; Figure 3's EPS bar runs the
    # K8□K8□K8 phases through one switch — the native auto choice must not be slower than that
    (t_eps, _), _ = completion("single_eps", "allreduce", kib * KIB)
    assert t_eps <= eps_us * 1e-6 * 1.10


@pytest.mark.parametrize("collective, ocs_us, eps_us", [("allreduce", 1.78, 3.77), ("alltoall", 1.70, 3.02)])
def test_figure13_small_buffers(collective, ocs_us, eps_us):
    (t_ocs, _), net = completion("all_ocs", collective, KIB, accelerators=576)
    assert t_ocs == pytest.approx(ocs_us * 1e-6, rel=0.15)
    (t_eps, name), _ = completion("all_eps", collective, KIB, accelerators=576)
    assert t_eps <= eps_us * 1e-6  # analytical ≤ simulated (see module docstring)
    assert t_ocs < t_eps or collective == "alltoall"  # one-phase 2-byte all-to-all is latency only
    assert name in {"one_shot", "direct"}  # small buffers: the one-shot native schedules
