"""Analytical phase cost: the slowest path's latency plus the most loaded shared capacity."""

import pytest

from collectives.errors import SpecError
from pipelines.network import fabric_from_dict
from fabrics.scaleup.allocation import linear_allocation
from fabrics.scaleup.ocs_configuration import configure_ocs, xor_port_permutations
from fabrics.scaleup.paths import route
from fabrics.scaleup.phase_cost import phase_cost

R = 5e10


def test_oversubscription_is_a_shared_capacity():
    # 16 down / 4 up = 4:1
    f = fabric_from_dict({"kind": "all_eps", "ports": 4, "link_rate": R, "down_ports": 16, "up_ports": 4}, world=64)
    r = route(f, linear_allocation(64))
    sigma = 1024.0
    cross = r.phase_cost([(x, (x + 16) % 64, sigma) for x in range(64)])  # everyone leaves its rack
    local = r.phase_cost([(x, x ^ 1, sigma) for x in range(64)])
    assert cross.bottleneck[0] in ("up", "down")
    assert cross.serialization_s == pytest.approx(16 * sigma / (4 * 4 * R))
    assert local.serialization_s == pytest.approx(sigma / (4 * R))
    assert cross.serialization_s / local.serialization_s == pytest.approx(f.spec.oversubscription)


def test_latency_is_the_slowest_path_and_self_transfers_cost_nothing():
    f = fabric_from_dict({"kind": "all_eps", "ports": 4, "link_rate": R, "down_ports": 16, "up_ports": 4}, world=64)
    r = route(f, linear_allocation(64))
    mixed = [(0, 1, 8.0), (2, 40, 8.0), (5, 5, 1e12)]  # one intra-rack, one inter-rack, one self
    cost = phase_cost(r, mixed)
    assert cost.latency_s == pytest.approx(max(r.latency_s(0, 1), r.latency_s(2, 40)))
    assert cost.latency_s == pytest.approx(r.latency_s(2, 40)) and r.latency_s(2, 40) > r.latency_s(0, 1)
    assert cost == r.phase_cost(mixed)
    assert cost.time_s == pytest.approx(cost.latency_s + cost.serialization_s)
    assert phase_cost(r, [(3, 3, 1e9)]).time_s == 0.0 and phase_cost(r, []).bottleneck is None


def test_a_transfer_without_a_circuit_is_refused():
    f = fabric_from_dict({"kind": "single_ocs", "ports": 2, "link_rate": R}, world=8)
    alloc = linear_allocation(8)
    r = route(f, alloc, configure_ocs(f, alloc, xor_port_permutations(8, {1: 1, 2: 1}, 2)))
    assert phase_cost(r, [(0, 1, 64.0)]).bottleneck == ("circuit", 0, 1)
    with pytest.raises(SpecError, match="no path from rank 0 to rank 4"):
        phase_cost(r, [(0, 4, 64.0)])
