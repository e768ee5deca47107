"""Figure 15 (Appendix A.6): 8 × 64 mesh, 8 kB all-reduce on both axes, 512 accelerators:
shared-host ≤ stacked-link for L = 16 … 64, equal once L ≥ 70 = (8 − 1) + (64 − 1)."""

import pytest

from fabrics.planner import plan, request_from_dict


def total(allocation, ports):
    req = request_from_dict(world=512, ports=ports, link_rate_Bps=5e10, hop_latency_s=0.52e-6, allocation=allocation,
                            meshes=[{"shape": [8, 64], "collective": "allreduce", "payloads": [8192, 8192]}])
    return plan(req)


@pytest.mark.parametrize("ports", [16, 20, 24, 32, 40, 48, 64])
def test_shared_host_wins_at_intermediate_radix(ports):
    shared, stacked = total("shared_host", ports), total("stacked_link", ports)
    assert shared.ports_used <= ports and stacked.ports_used <= ports
    assert shared.total_time_s < stacked.total_time_s


@pytest.mark.parametrize("ports", [70, 72])
def test_equal_once_both_axes_fully_connected(ports):
    shared, stacked = total("shared_host", ports), total("stacked_link", ports)
    assert shared.total_time_s == pytest.approx(stacked.total_time_s, rel=1e-9)
    assert {a.phases for a in shared.axes} == {1} == {a.phases for a in stacked.axes}


def test_curves_fall_with_radix():
    for alloc in ("shared_host", "stacked_link"):
        times = [total(alloc, L).total_time_s for L in (16, 32, 64, 70)]
        assert times == sorted(times, reverse=True)
