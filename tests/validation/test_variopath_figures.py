"""Paper 000, Figures 1 and 2 — reproduced exactly by max-min fair sharing of directed resources.

Figure 1: six GPUs, G0-G2 under SW0 with NIC0, G3-G5 under SW1 with NIC1, PCIe 64 GB/s, NIC
50 GB/s. The "modelled aggregate bandwidth" of a stage is the sum of the max-min fair rates of
its six flows (flows sharing a directed link split it; a NIC path crosses the source switch's
NIC, the network and the destination switch's NIC).
Figure 2: flows A 114 MB, B 64 MB, C 50 MB between the switches, each on a 64 GB/s PXB or a
50 GB/s NIC path; whole-flow binding takes 2.28 ms, two chunked stages 2.00 ms.
"""

from pathlib import Path

import numpy as np
import pytest
import yaml

from collectives.alltoallv.activations import Activation, AlltoallvSchedule, Lane
from collectives.alltoallv.schedulers import make_scheduler
from collectives.alltoallv.validity import check_schedule
from fabrics.pcie.evaluator import evaluate, stage_rates
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster

CONF = Path(__file__).resolve().parents[2] / "conf" / "platform"
TOPO = channel_topology(pcie_cluster(yaml.safe_load((CONF / "fig1.yaml").read_text()), 1))
MB = 10**6


def path(i, j, code):
    """Figure 1's table codes: I = PIX, B = PXB, N0 / N1 = NIC path leaving through NIC0 / NIC1."""
    kind = {"I": "PIX", "B": "PXB"}.get(code, "NIC")
    for p in TOPO.options(i, j):
        if p.kind == kind and (kind != "NIC" or f"nic{code[1]}>leaf" in " ".join(p.shared)):
            return p
    raise AssertionError(f"no {code} path {i}->{j}")


def aggregate_GBps(table):
    lanes = [Lane(src=i, dst=j, path=path(i, j, c), bytes=1) for i, j, c in table]
    return stage_rates(lanes, TOPO.capacity_Bps).sum() / 1e9


def test_figure1a_fastest_path_cyclic_stage_is_128_GBps():
    table = [(i, (i + 3) % 6, "B") for i in range(6)]  # all six on the PXB link, three per direction
    assert aggregate_GBps(table) == pytest.approx(128.0, rel=1e-12)
    rates = stage_rates([Lane(src=i, dst=j, path=path(i, j, c), bytes=1) for i, j, c in table], TOPO.capacity_Bps)
    assert rates == pytest.approx([64e9 / 3] * 6)  # 21.3 GB/s each, as drawn


def test_figure1b_path_only_adaptation_is_228_GBps():
    table = [(0, 3, "B"), (1, 4, "B"), (2, 5, "N0"), (3, 0, "B"), (4, 1, "B"), (5, 2, "N1")]
    assert aggregate_GBps(table) == pytest.approx(228.0, rel=1e-12)


def test_figure1c_joint_peer_path_channel_is_356_GBps_and_contention_free():
    table = [(0, 1, "I"), (1, 4, "B"), (2, 5, "N0"), (3, 0, "N1"), (4, 3, "I"), (5, 2, "B")]
    assert aggregate_GBps(table) == pytest.approx(356.0, rel=1e-12)
    d = np.zeros((6, 6), dtype=np.int64)
    lanes = []
    for i, j, c in table:
        d[i, j] = MB
        lanes.append(Lane(src=i, dst=j, path=path(i, j, c), bytes=MB))
    s = AlltoallvSchedule(scheduler="fig1c", platform="fig1", n_ranks=6, demand=d,
                          activations=(Activation(lanes=tuple(lanes)),), channels=True)
    assert check_schedule(s, TOPO).valid  # a channel: no modelled resource shared


def test_figure1c_channel_is_in_the_catalog():
    planner = make_scheduler("variopath", TOPO)
    cat = planner.catalog
    # one lane each way across the switches on PXB and one each way on a NIC: shape k = 2
    shapes = {int(s[0, 1]) for s in cat.shapes}
    assert 2 in shapes


FIG2 = np.zeros((6, 6), dtype=np.int64)
FIG2[0, 3], FIG2[1, 4], FIG2[2, 5] = 114 * MB, 64 * MB, 50 * MB  # flows A, B, C


def schedule(stages, name):
    acts = tuple(Activation(lanes=tuple(Lane(src=i, dst=j, path=path(i, j, c), bytes=b) for i, j, c, b in st))
                 for st in stages)
    return AlltoallvSchedule(scheduler=name, platform="fig1", n_ranks=6, demand=FIG2, activations=acts, channels=False)


def test_figure2_whole_flow_binding_is_2_28_ms():
    # A on PXB; B and C bound to the NIC path, which they share (serialised in the figure)
    s = schedule([[(0, 3, "B", 114 * MB), (1, 4, "N0", 64 * MB), (2, 5, "N0", 50 * MB)]], "whole")
    assert check_schedule(s, TOPO).valid
    assert evaluate(s, TOPO.capacity_Bps).completion_s == pytest.approx(2.28e-3, rel=1e-12)


def test_figure2_chunked_two_stages_is_2_00_ms():
    s = schedule([[(0, 3, "B", 64 * MB), (2, 5, "N0", 50 * MB)],
                  [(1, 4, "B", 64 * MB), (0, 3, "N0", 50 * MB)]], "chunked")
    r = check_schedule(s, TOPO)
    assert r.valid and r.contention_free
    ev = evaluate(s, TOPO.capacity_Bps)
    assert ev.completion_s == pytest.approx(2.00e-3, rel=1e-12)
    assert ev.activation_s == pytest.approx((1e-3, 1e-3))


def test_figure2_optimum_is_2_00_ms_and_variopath_finds_it_closely():
    milp = make_scheduler("milp", TOPO).plan(FIG2)
    assert milp.meta["certificate"]["status"] == "optimal"
    assert milp.meta["certificate"]["objective_s"] == pytest.approx(2.00e-3, rel=1e-9)
    assert evaluate(milp, TOPO.capacity_Bps).completion_s == pytest.approx(2.00e-3, rel=1e-6)
    vp = make_scheduler("variopath", TOPO).plan(FIG2)
    t = evaluate(vp, TOPO.capacity_Bps).completion_s
    assert t < 2.28e-3 and t <= 2.00e-3 * 1.05
