"""fabrics.phase_pricing: the vectorised phase cost equals RoutedFabric.phase_cost on every fabric."""

import numpy as np
import pytest

from collectives.topology import hypercube
from fabrics.allocation import TrafficGroups, balanced_hybrid_allocation, linear_allocation, rack_demand_bytes
from fabrics.native import native_phases
from fabrics.phase_pricing import PhasePricer
from fabrics.physical import fabric_from_dict
from fabrics.routing import configure_ocs, hybrid_for_demand, route, xor_port_permutations

R = 5e10


def routed_fabric(kind, world, ports=6):
    small = {"down_ports": 8, "switch_radix": 16}
    d = {"kind": kind, "ports": ports, "link_rate": R}
    if kind in ("all_eps", "hybrid", "all_ocs"):
        d.update(small, accelerators=world + 8, up_ports=8 if kind == "all_ocs" else 2)
    f = fabric_from_dict(d, world=world)
    if kind == "hybrid":
        traffic = [TrafficGroups(groups=(tuple(range(world)),), pair_bytes=1.0)]
        alloc = balanced_hybrid_allocation(f, world, traffic)
        return route(f, alloc, hybrid_for_demand(f, rack_demand_bytes(alloc.rack_of_rank(f), traffic, f.spec.racks)))
    alloc = linear_allocation(world)
    if f.spec.level1_kind == "ocs":
        gens = {g: 1 for g in hypercube(world.bit_length() - 1).generators}
        return route(f, alloc, configure_ocs(f, alloc, xor_port_permutations(world, gens, ports)))
    return route(f, alloc)


def random_phase(routed, rng, n):
    world = routed.allocation.world
    if routed.spec.level1_kind == "ocs":  # only circuit edges (hypercube neighbours)
        src = rng.integers(0, world, n)
        dst = src ^ (1 << rng.integers(0, world.bit_length() - 1, n))
    else:
        src, dst = rng.integers(0, world, n), rng.integers(0, world, n)
    return src, dst, rng.uniform(1, 5000, n)


@pytest.mark.parametrize("kind, world", [("single_eps", 16), ("single_ocs", 32), ("all_eps", 32),
                                         ("hybrid", 32), ("all_ocs", 16), ("all_ocs", 32)])
def test_vectorised_cost_equals_phase_cost(kind, world):
    routed = routed_fabric(kind, world)
    pricer = PhasePricer(routed)
    rng = np.random.default_rng(7)
    for _ in range(5):
        src, dst, b = random_phase(routed, rng, 60)
        ref = routed.phase_cost(zip(src.tolist(), dst.tolist(), b.tolist()))
        lat, ser = pricer.phase_cost(src, dst, b)
        assert lat == pytest.approx(ref.latency_s, rel=1e-12)
        assert ser == pytest.approx(ref.serialization_s, rel=1e-12)


@pytest.mark.parametrize("kind", ["all_eps", "hybrid"])
def test_schedule_line_is_linear_in_sigma_and_matches_phase_by_phase(kind):
    routed = routed_fabric(kind, 32)
    pricer = PhasePricer(routed)
    groups = np.arange(32).reshape(2, 16)  # two concurrent groups share the level-2 capacity
    phases = native_phases("allreduce", "two_shot", 16)
    line = pricer.schedule_line(phases, groups)
    for sigma in (1024, 1 << 20):
        ref = 0.0
        for ph in phases:
            transfers = [(int(g[s]), int(g[d]), float(f) * sigma) for g in groups
                         for s, d, f in zip(ph.src, ph.dst, ph.fraction)]
            ref += routed.phase_cost(transfers).time_s
        assert line.time_s(sigma) == pytest.approx(ref, rel=1e-9)
    assert line.phases == 2


def test_missing_circuit_is_a_spec_error():
    from collectives.errors import SpecError

    routed = routed_fabric("single_ocs", 16)
    with pytest.raises(SpecError, match="no circuit"):
        PhasePricer(routed).phase_cost(np.array([0]), np.array([3]), np.array([1.0]))  # 0→3 is not a cube edge
