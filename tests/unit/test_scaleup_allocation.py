"""Worker allocation: linear, bit partitions, hybrid placement balancing level-2 demand (C.7)."""

import numpy as np
import pytest

from collectives.errors import SpecError
from fabrics.scaleup.allocation import (
    Allocation, TrafficGroups, balanced_hybrid_allocation, bit_allocation, linear_allocation, rack_demand_bytes,
)
from pipelines.network import fabric_from_dict
from fabrics.scaleup.circuit_sizing import rack_circuit_counts, rack_circuit_load

R = 5e10


def strided_groups(world, size, stride):
    """Groups of ``size`` ranks at distance ``stride`` (a mesh axis whose bits are not the lowest)."""
    groups = []
    for base in range(world):
        if (base // stride) % size == 0:
            groups.append(tuple(base + k * stride for k in range(size)))
    return tuple(groups)


def test_allocation_validation():
    with pytest.raises(SpecError, match="two ranks"):
        Allocation(accelerators=(0, 1, 1))
    f = fabric_from_dict({"kind": "single_eps", "ports": 4, "link_rate": R}, world=8)
    with pytest.raises(SpecError, match="fabric has"):
        Allocation(accelerators=(0, 9)).check_fits(f)


def test_bit_allocation_is_a_bijection_with_chosen_rack_bits():
    a = bit_allocation(64, 8, (3, 4, 5))
    assert sorted(a.accelerators) == list(range(64))
    # ranks differing only in bits 3..5 share a rack; ranks differing in bit 0 do not
    assert a.accelerators[0] // 8 == a.accelerators[8 + 16 + 32] // 8
    assert a.accelerators[0] // 8 != a.accelerators[1] // 8
    with pytest.raises(SpecError):
        bit_allocation(64, 8, (0, 0, 1))


def test_rack_demand_counts_pairs_between_racks():
    racks_of = np.array([0, 0, 1, 1])
    d = rack_demand_bytes(racks_of, [TrafficGroups(groups=((0, 1, 2, 3),), pair_bytes=2.0)], 2)
    assert d[0, 1] == d[1, 0] == 2.0 * 2 * 2 and d[0, 0] == 0


def test_hybrid_placement_keeps_a_strided_axis_inside_racks():
    f = fabric_from_dict({"kind": "hybrid", "ports": 4, "link_rate": R, "down_ports": 8, "up_ports": 2}, world=64)
    traffic = [TrafficGroups(groups=strided_groups(64, 8, 8), pair_bytes=1e4),  # heavy axis on bits 3..5
               TrafficGroups(groups=strided_groups(64, 8, 1), pair_bytes=1.0)]
    linear = linear_allocation(64)
    best = balanced_hybrid_allocation(f, 64, traffic)
    d_lin = rack_demand_bytes(linear.rack_of_rank(f), traffic, f.spec.racks)
    d_best = rack_demand_bytes(best.rack_of_rank(f), traffic, f.spec.racks)
    assert d_best.sum() < d_lin.sum() / 100
    load = lambda d: rack_circuit_load(d, rack_circuit_counts(d, 2)).max()
    assert load(d_best) < load(d_lin)
    assert balanced_hybrid_allocation(f, 64, traffic) == best  # deterministic


def test_hybrid_placement_512_of_576_table1_like_demand():
    f = fabric_from_dict({"kind": "hybrid", "ports": 36, "link_rate": R, "accelerators": 576}, world=512)
    world = 512
    ranks = np.arange(world)
    ep = tuple(map(tuple, ranks.reshape(8, 64).tolist()))  # EP: 8 groups of 64 consecutive ranks
    tpe = tuple(map(tuple, ranks.reshape(8, 64).T.tolist()))  # TPE: 64 groups of 8 at stride 64
    traffic = [TrafficGroups(groups=ep, pair_bytes=256 * 1024 * 128 / 64),
               TrafficGroups(groups=tpe, pair_bytes=4096 * 128 / 8)]
    alloc = balanced_hybrid_allocation(f, world, traffic)
    assert sorted(alloc.accelerators) == list(range(world))
    d = rack_demand_bytes(alloc.rack_of_rank(f), traffic, f.spec.racks)
    d_lin = rack_demand_bytes(linear_allocation(world).rack_of_rank(f), traffic, f.spec.racks)
    load = lambda m: rack_circuit_load(m, rack_circuit_counts(m, 8)).max()
    assert load(d) <= load(d_lin)
    assert d[16:].sum() == 0 and d[:, 16:].sum() == 0  # spare racks carry nothing


def test_non_power_of_two_world_falls_back_to_linear():
    f = fabric_from_dict({"kind": "hybrid", "ports": 4, "link_rate": R, "down_ports": 8, "up_ports": 2,
                          "accelerators": 64}, world=48)
    assert balanced_hybrid_allocation(f, 48, []).name == "linear"
