"""Routing over the physical fabrics: EPS spraying paths, OCS circuit paths, hybrid rack-circuit routes."""

import pytest

from collectives.errors import SpecError
from fabrics.scaleup.physical import ACCELERATOR, OCS
from pipelines.network import fabric_from_dict
from fabrics.scaleup.allocation import TrafficGroups, linear_allocation, rack_demand_bytes
from fabrics.scaleup.ocs_configuration import configure_ocs, hybrid_for_demand, xor_port_permutations
from fabrics.scaleup.paths import route

R = 5e10
CUBE64 = {1 << i: 1 for i in range(6)}


def fab(kind, world=64, ports=8, **kw):
    kw.setdefault("down_ports", 16)
    kw.setdefault("up_ports", 16 if kind == "all_ocs" else 2)
    return fabric_from_dict({"kind": kind, "ports": ports, "link_rate": R, **kw}, world=world)


def check_path(f, p, src_acc, dst_acc):
    assert p.devices[0] == src_acc and p.devices[-1] == dst_acc
    assert len(p.links) == len(p.devices) - 1
    for link_id, a, b in zip(p.links, p.devices, p.devices[1:]):
        link = f.links[link_id]
        assert (link.src, link.dst) == (a, b)
    assert all(f.devices[d].kind != ACCELERATOR for d in p.devices[1:-1])


def test_single_eps_sprays_over_every_rail():
    f = fab("single_eps", world=16, ports=4)
    r = route(f, linear_allocation(16))
    ps = r.paths(3, 12)
    assert len(ps) == 4 and {p.devices[1] for p in ps} == set(f.level1[0])
    for p in ps:
        check_path(f, p, 3, 12)
        assert (p.eps_hops, p.ocs_passes) == (1, 0)
    assert r.latency_s(3, 12) == pytest.approx(810e-9)


def test_all_eps_intra_and_inter_rack_paths():
    f = fab("all_eps", world=64, ports=4, up_ports=2)
    r = route(f, linear_allocation(64))
    assert len(r.paths(0, 5)) == 4 and r.paths(0, 5)[0].eps_hops == 1
    inter = r.paths(0, 40)
    assert len(inter) == 4 * 2  # rails × uplinks
    for p in inter:
        check_path(f, p, 0, 40)
        assert (p.eps_hops, p.level2_cables) == (3, 2)
    assert len({p.devices[2] for p in inter}) == 8  # every level-2 switch of every rail
    assert r.latency_s(0, 40) == pytest.approx(810e-9 + 2 * (300e-9 + 10e-9))


@pytest.mark.parametrize("kind", ["single_ocs", "all_ocs"])
def test_ocs_circuits_realise_the_cayley_graph(kind):
    f = fab(kind, world=64, ports=8)
    gens = {**CUBE64, 63: 2}
    alloc = linear_allocation(64)
    ocs = configure_ocs(f, alloc, xor_port_permutations(64, gens, 8))
    r = route(f, alloc, ocs)
    for x in range(64):
        for g, mult in gens.items():
            ps = r.paths(x, x ^ g)
            assert len(ps) == mult
            for p in ps:
                check_path(f, p, x, x ^ g)
                assert p.eps_hops == 0 and p.ocs_passes in (1, 3)
        assert r.paths(x, x ^ 3) == ()  # no generator 3: no circuit
    assert r.latency_s(0, 63) >= 0.52e-6 - 1e-12
    # a phase on the doubled generator has twice the bandwidth
    single = r.phase_cost([(x, x ^ 1, 4096.0) for x in range(64)])
    double = r.phase_cost([(x, x ^ 63, 4096.0) for x in range(64)])
    assert single.serialization_s == pytest.approx(2 * double.serialization_s)


def test_all_ocs_inter_rack_circuits_cross_three_ocs():
    f = fab("all_ocs", world=64, ports=6)
    alloc = linear_allocation(64)
    r = route(f, alloc, configure_ocs(f, alloc, xor_port_permutations(64, CUBE64, 6)))
    assert r.paths(0, 1)[0].ocs_passes == 1  # same rack of 16
    p = r.paths(0, 32)[0]
    assert p.ocs_passes == 3 and p.level2_cables == 2
    assert r.latency_s(0, 32) > r.latency_s(0, 1)


def test_hybrid_routes_over_circuits_and_relays():
    f = fab("hybrid", world=64, ports=4, up_ports=1)  # 4 racks, one uplink: a ring of racks
    alloc = linear_allocation(64)
    demand = rack_demand_bytes(alloc.rack_of_rank(f), [TrafficGroups(groups=(tuple(range(64)),), pair_bytes=1.0)], 4)
    r = route(f, alloc, hybrid_for_demand(f, demand))
    hops = []
    for dst in (16, 32, 48):
        ps = r.paths(0, dst)
        assert ps, "every rack must be reachable"
        for p in ps:
            check_path(f, p, 0, dst)
            assert p.ocs_passes == p.eps_hops - 1
        hops.append(ps[0].ocs_passes)
    assert sorted(hops) == [1, 2, 3]
    assert f.devices[r.paths(0, 16)[0].devices[2]].kind == OCS


def test_hybrid_needs_its_configuration():
    f = fab("hybrid", world=64)
    with pytest.raises(SpecError, match="hybrid_for_demand"):
        route(f, linear_allocation(64))


def test_576_all_eps_and_all_ocs_paths():
    f = fabric_from_dict({"kind": "all_eps", "ports": 36, "link_rate": R, "accelerators": 576}, world=512)
    r = route(f, linear_allocation(512))
    assert len(r.paths(0, 511)) == 36 * 8
    assert r.latency_s(0, 511) == pytest.approx(1.43e-6)
    g = fabric_from_dict({"kind": "all_ocs", "ports": 36, "link_rate": R, "accelerators": 576}, world=512)
    alloc = linear_allocation(512)
    gens = {1 << i: 1 for i in range(9)}
    gens.update({0b111: 3, 0b111000: 3, 0b111000000: 3, 511: 18})  # 36 ports
    r2 = route(g, alloc, configure_ocs(g, alloc, xor_port_permutations(512, gens, 36)))
    assert len(r2.paths(5, 5 ^ 511)) == 18
    assert r2.phase_cost([(x, x ^ 511, 1.8e6) for x in range(512)]).serialization_s == pytest.approx(1.8e6 / (18 * R))


def test_circuits_follow_a_non_linear_allocation():
    from fabrics.scaleup.allocation import bit_allocation

    f = fab("all_ocs", world=64, ports=6)
    alloc = bit_allocation(64, 16, (2, 3, 4, 5))  # low bits spread over racks
    r = route(f, alloc, configure_ocs(f, alloc, xor_port_permutations(64, CUBE64, 6)))
    for x in (0, 7, 42):
        for g in CUBE64:
            (p,) = r.paths(x, x ^ g)
            assert p.devices[0] == alloc.accelerators[x] and p.devices[-1] == alloc.accelerators[x ^ g]
    # rank bit 0 now crosses racks (three OCS), bit 2 stays inside one
    assert r.paths(0, 1)[0].ocs_passes == 3 and r.paths(0, 4)[0].ocs_passes == 1
