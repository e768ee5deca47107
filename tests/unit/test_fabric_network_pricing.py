"""fabrics.scaleup.phase_pricing: the vectorised phase cost equals RoutedFabric.phase_cost on every fabric."""

import numpy as np
import pytest

from collectives.topology import hypercube
from fabrics.scaleup.native import native_phases
from fabrics.scaleup.phase_pricing import PhasePricer
from pipelines.network import fabric_from_dict
from fabrics.scaleup.allocation import TrafficGroups, balanced_hybrid_allocation, linear_allocation, rack_demand_bytes
from fabrics.scaleup.ocs_configuration import configure_ocs, hybrid_for_demand, xor_port_permutations
from fabrics.scaleup.paths import route

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


@pytest.mark.parametrize("kind, world", [("single_ocs", 32), ("all_ocs", 32)])
def test_ocs_tables_hold_the_connected_pairs_only(kind, world):
    """One entry per connected (src, dst) pair, sorted by pair id -- no n²-long tables; a pair the
    configuration does not connect has no slot."""
    routed = routed_fabric(kind, world)
    pricer = PhasePricer(routed)
    table = routed._circuits
    n = pricer.n_acc
    assert pricer.ocs_pairs.tolist() == sorted(a * n + b for a, b in table)
    assert pricer.ocs_pairs.size < n * n / 4 and pricer.circuit_cap.size == pricer.ocs_pairs.size
    for (a, b), (circuits, _) in list(table.items())[:20]:
        slot, connected = pricer.ocs_slots(np.array([a * n + b]))
        assert connected[0] and pricer.circuits[slot[0]] == circuits
    acc = routed.allocation.accelerators
    _, connected = pricer.ocs_slots(np.array([acc[0] * n + acc[3], -1, n * n]))  # not a cube edge; out of range
    assert not connected.any()


# --- the fast paths equal the straightforward ones ----------------------------------------------

@pytest.mark.parametrize("kind, world", [("single_eps", 32), ("all_eps", 32), ("hybrid", 32), ("all_eps", 64),
                                         ("hybrid", 64)])
def test_group_aggregated_phase_equals_per_transfer_phase(kind, world):
    """Large EPS phases are priced from local byte matrices and group rack counts; the result must
    be the per-transfer ``phase_cost`` (uniform one-shot phases and non-uniform ones)."""
    from fabrics.scaleup.native import native_schedules

    routed = routed_fabric(kind, world)
    pricer = PhasePricer(routed)
    rng = np.random.default_rng(3)
    checked = 0
    for size in (2, 4, 8, 16, world):
        groups = rng.permutation(world).reshape(-1, size)  # scattered over racks
        for coll in ("allreduce", "alltoall", "allgather"):
            for name in native_schedules(coll):
                for ph in native_phases(coll, name, size):
                    if ph.src.size == 0:
                        continue
                    fast = pricer._group_phase_cost(ph, groups)
                    ref = pricer.phase_cost(groups[:, ph.src].reshape(-1), groups[:, ph.dst].reshape(-1),
                                            np.tile(ph.fraction, groups.shape[0]).astype(float))
                    assert fast == pytest.approx(ref, rel=1e-12, abs=0.0)
                    checked += 1
    assert checked > 20


def test_schedule_line_is_memoised_per_phases_and_groups():
    routed = routed_fabric("all_eps", 32)
    pricer = PhasePricer(routed)
    phases = native_phases("allreduce", "one_shot", 16)
    groups = np.arange(32).reshape(2, 16)
    first = pricer.schedule_line(phases, groups)
    assert pricer.schedule_line(phases, groups.copy()) is first
    other = pricer.schedule_line(phases, groups[:, ::-1])  # same ranks, another order: priced again
    assert other is not first and other.time_s(4096) == pytest.approx(first.time_s(4096))  # symmetric schedule


@pytest.mark.parametrize("kind", ["single_ocs", "all_ocs"])
def test_circuit_table_equals_following_every_circuit(kind):
    """``configure_ocs`` derives circuits per accelerator pair from the permutations; ``route``
    without that table follows every circuit through the cross-connects: both must agree."""
    from dataclasses import replace

    from fabrics.scaleup.allocation import bit_allocation
    from fabrics.scaleup.paths import _circuit_table

    world = 64
    d = {"kind": kind, "ports": 8, "link_rate": R}
    if kind == "all_ocs":
        d.update(accelerators=world, down_ports=8, switch_radix=16, up_ports=8)
    f = fabric_from_dict(d, world=world)
    alloc = bit_allocation(world, 8, (5, 0, 3)) if kind == "all_ocs" else linear_allocation(world)
    perms = xor_port_permutations(world, {1: 2, 2: 1, 4: 1, 8: 1, 16: 1, 32: 1, 63: 1}, 8)
    config = configure_ocs(f, alloc, perms)
    fast = route(f, alloc, config)
    walked = route(f, alloc, replace(config, circuit_table=None))
    assert dict(fast._circuits) == _circuit_table(fast) == dict(walked._circuits)
    assert len(fast._circuits) == world * 7
    for x in (0, 5, 63):
        assert len(fast.paths(x, x ^ 1)) == 2 and fast.latency_s(x, x ^ 1) == walked.latency_s(x, x ^ 1)
        assert fast.paths(x, x ^ 3) == ()


def _reference_water_fill(demand, up_ports, *, reserve_ring):
    """The water-filling as first written: a full scan of all rack pairs per circuit."""
    racks = demand.shape[0]
    counts = np.zeros((racks, racks), dtype=np.int64)
    out_free = np.full(racks, up_ports, dtype=np.int64)
    in_free = np.full(racks, up_ports, dtype=np.int64)
    off_diag = ~np.eye(racks, dtype=bool)
    r_idx, s_idx = np.indices((racks, racks))
    order = ((s_idx - r_idx) % racks) * racks + r_idx
    if reserve_ring and racks > 1:
        for r in range(racks):
            counts[r, (r + 1) % racks] += 1
        out_free -= 1
        in_free -= 1
    for phase in ("demand", "fill"):
        while True:
            ok = off_diag & (out_free[:, None] > 0) & (in_free[None, :] > 0)
            if phase == "demand":
                ok &= demand > 0
                prio = demand / (counts + 1)
            else:
                prio = -counts.astype(float)
            if not ok.any():
                break
            best = prio[ok].max()
            flat = int(np.argmin(np.where(ok & (prio == best), order, np.iinfo(np.int64).max)))
            r, s = divmod(flat, racks)
            counts[r, s] += 1
            out_free[r] -= 1
            in_free[s] -= 1
    return counts


def test_heap_water_fill_equals_scan():
    from fabrics.scaleup.circuit_sizing import _water_fill

    rng = np.random.default_rng(0)
    for trial in range(120):
        racks = int(rng.choice([2, 3, 4, 8, 16]))
        up = int(rng.choice([1, 2, 4, 8]))
        kind = trial % 3
        if kind == 0:
            demand = rng.integers(0, 5, (racks, racks)).astype(float) * 1024  # many ties
        elif kind == 1:
            demand = (rng.random((racks, racks)) < 0.2) * rng.random((racks, racks)) * 1e6  # sparse
        else:
            demand = np.full((racks, racks), 4096.0)  # uniform: the circulant
        np.fill_diagonal(demand, 0.0)
        for ring in (False, True):
            assert np.array_equal(_water_fill(demand, up, reserve_ring=ring),
                                  _reference_water_fill(demand, up, reserve_ring=ring))


def _reference_rack_circuit_load(demand, counts):
    """Bytes per circuit as first written (numpy per rack)."""
    racks = demand.shape[0]
    flow = np.zeros((racks, racks))
    adj = [np.flatnonzero(counts[r]) for r in range(racks)]
    for s in range(racks):
        if not demand[s].any():
            continue
        dist = np.full(racks, -1)
        sigma = np.zeros(racks)
        dist[s], sigma[s] = 0, 1.0
        order, head = [s], 0
        while head < len(order):
            v = order[head]
            head += 1
            for w in adj[v]:
                if dist[w] < 0:
                    dist[w] = dist[v] + 1
                    order.append(int(w))
                if dist[w] == dist[v] + 1:
                    sigma[w] += sigma[v] * counts[v, w]
        if np.any((demand[s] > 0) & (dist < 0)):
            return np.full((racks, racks), np.inf)
        through = demand[s].astype(float).copy()
        for t in reversed(order[1:]):
            for v in np.flatnonzero(counts[:, t]):
                if dist[v] == dist[t] - 1:
                    share = through[t] * sigma[v] * counts[v, t] / sigma[t]
                    flow[v, t] += share
                    through[v] += share
    return np.divide(flow, counts, out=np.zeros_like(flow), where=counts > 0)


def test_rack_circuit_load_equals_reference():
    from fabrics.scaleup.circuit_sizing import rack_circuit_counts, rack_circuit_load

    rng = np.random.default_rng(5)
    for _ in range(60):
        racks = int(rng.choice([2, 4, 8, 16]))
        demand = (rng.random((racks, racks)) < 0.4) * rng.integers(1, 9, (racks, racks)) * 512.0
        np.fill_diagonal(demand, 0.0)
        counts = rack_circuit_counts(demand, int(rng.choice([1, 2, 8])))
        assert np.array_equal(rack_circuit_load(demand, counts), _reference_rack_circuit_load(demand, counts))


def test_balanced_placement_equals_trying_every_bit_allocation():
    """The placement search skips building an ``Allocation`` per candidate and sizes circuits once per
    distinct rack demand; it must pick what evaluating every bit allocation in full picks."""
    from itertools import combinations

    from fabrics.scaleup.allocation import bit_allocation
    from fabrics.scaleup.circuit_sizing import rack_circuit_counts, rack_circuit_load

    world = 64
    f = fabric_from_dict({"kind": "hybrid", "ports": 4, "link_rate": R, "accelerators": world, "down_ports": 8,
                          "switch_radix": 16, "up_ports": 2}, world=world)
    traffic = [TrafficGroups(groups=tuple(tuple(range(o, world, 8)) for o in range(8)), pair_bytes=4096.0),
               TrafficGroups(groups=tuple(tuple(range(8 * o, 8 * o + 8)) for o in range(8)), pair_bytes=512.0),
               TrafficGroups(groups=((0, 9, 18), (27, 36, 45, 54, 63)), pair_bytes=100.0)]  # unequal sizes
    best = None
    for bits in combinations(range(6), 3):
        alloc = bit_allocation(world, 8, bits)
        demand = rack_demand_bytes(alloc.rack_of_rank(f), traffic, f.spec.racks)
        worst = float(rack_circuit_load(demand, rack_circuit_counts(demand, 2)).max(initial=0.0))
        key = (worst, float(demand.sum()), bits)
        best = min(best, (key, alloc)) if best is not None else (key, alloc)
    chosen = balanced_hybrid_allocation(f, world, traffic)
    assert chosen.accelerators == best[1].accelerators and chosen.name.endswith(best[1].name[4:])
