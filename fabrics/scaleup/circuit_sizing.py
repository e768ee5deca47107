"""Level-2 circuits of the hybrid fabric, sized to the deployment's demand (paper 003, Appendix C.7).

The hybrid fabric's level-2 OCS is configured once at deployment as rack-to-rack circuits sized to
the rack-to-rack demand (``rack_circuit_counts``, a D'Hondt water-fill) and identical on every
rail; ``rack_circuit_load`` gives the bytes per circuit when traffic follows the shortest
rack-level circuit paths (as ``fabrics.scaleup.paths.RoutedFabric`` routes it), and
``rack_circuits`` assigns the circuits to uplinks (one partial rack permutation per uplink index).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from collectives.errors import SpecError
from fabrics.scaleup.colouring import colour_bipartite


def rack_circuit_counts(demand: np.ndarray, up_ports: int) -> np.ndarray:
    """Integer circuits between racks, ≤ ``up_ports`` per rack in and out, balancing demand.

    Water-filling (D'Hondt): repeatedly give one more circuit to the rack pair with the most bytes
    per circuit after adding it, while both racks have a free uplink (light pairs may get none
    and are relayed by level-1 EPS switches of other racks); then spread
    the leftover uplinks over the pairs with the fewest circuits so that unplanned traffic still
    finds a path. Ties go in circulant order (offset s − r mod racks, then r), so uniform demand
    yields the circulant r → r+1, r+2, … which is connected. If the result is still not strongly
    connected, a ring r → r+1 is reserved first and the filling repeated. Deterministic.
    """
    demand = np.asarray(demand)
    key = _sizing_key(_scale_free(demand)[0], up_ports)
    hit = _COUNTS.get(key)
    if hit is None:
        racks = demand.shape[0]
        hit = _water_fill(demand, up_ports, reserve_ring=False)
        if racks > 1 and not _strongly_connected(hit):
            hit = _water_fill(demand, up_ports, reserve_ring=True)
        hit.flags.writeable = False
        _COUNTS[key] = hit
        while len(_COUNTS) > _COUNTS_KEEP:
            _COUNTS.pop(next(iter(_COUNTS)))
    return hit.copy()


def busiest_circuit_bytes(demand: np.ndarray, up_ports: int) -> float:
    """Bytes on the busiest rack circuit once circuits are sized to ``demand`` (inf: no route)."""
    norm, exp = _scale_free(np.asarray(demand))
    key = _sizing_key(norm, up_ports)
    worst = _BUSIEST.get(key)
    if worst is None:
        worst = float(rack_circuit_load(norm, rack_circuit_counts(norm, up_ports)).max(initial=0.0))
        _BUSIEST[key] = worst
        while len(_BUSIEST) > _COUNTS_KEEP:
            _BUSIEST.pop(next(iter(_BUSIEST)))
    return math.ldexp(worst, exp)


def _scale_free(demand: np.ndarray) -> tuple[np.ndarray, int]:
    """``(demand / 2**e, e)``, the largest entry in [0.5, 1), when that is exact (float64, no
    subnormal on the way back); else ``(demand, 0)``. The sizing only compares bytes per circuit
    (D'Hondt quotients d / (c + 1)) and the load only adds, multiplies and divides bytes by
    circuit and path counts, so a power-of-two scale changes no count and scales every load
    exactly: a search's batches 1, 2, 4, 8, 16 send the same placement problem at 2**k scale."""
    if demand.dtype != np.float64 or demand.size == 0:
        return demand, 0
    top = float(np.abs(demand).max())
    if top == 0.0 or not math.isfinite(top):
        return demand, 0
    exp = math.frexp(top)[1]
    norm = np.ldexp(demand, -exp)
    if not np.array_equal(np.ldexp(norm, exp), demand):
        return demand, 0
    return norm, exp


def _sizing_key(demand: np.ndarray, up_ports: int) -> tuple:
    return (demand.dtype.str, demand.shape, demand.tobytes(), int(up_ports))


# (dtype, shape, demand bytes at unit scale, up_ports) -> circuit counts / busiest circuit's bytes:
# the hybrid placement sizes circuits for its candidates, the deployment again for the one it
# keeps, and the next batch the same demands at twice the bytes. Explicit, keyed, bounded (oldest
# out); clear() is always safe.
_COUNTS: dict = {}
_BUSIEST: dict = {}
_COUNTS_KEEP = 4096


def _water_fill(demand: np.ndarray, up_ports: int, *, reserve_ring: bool) -> np.ndarray:
    """One circuit at a time to the free pair with the highest priority (demand: bytes per circuit
    after adding it, D'Hondt; fill: fewest circuits), ties in circulant order. A pair that loses its
    free uplink never regains it, so each phase is a heap with lazy deletion (one live entry per
    pair) instead of a scan of all pairs per circuit; the fill phase starts from the pairs that
    still have a free uplink at both ends (the others would be popped only to be dropped)."""
    racks = demand.shape[0]
    counts = [[0] * racks for _ in range(racks)]
    out_free = [up_ports] * racks
    in_free = [up_ports] * racks
    if reserve_ring and racks > 1:
        for r in range(racks):
            counts[r][(r + 1) % racks] += 1
        out_free = [f - 1 for f in out_free]
        in_free = [f - 1 for f in in_free]
    d = demand.tolist()
    pairs = _circulant_pairs(racks)
    # demand phase: largest demand / (circuits + 1) first (Jefferson/D'Hondt)
    heap = [(-(d[r][s] / (counts[r][s] + 1)), o, r, s) for o, r, s in pairs if d[r][s] > 0]
    _fill(heap, counts, out_free, in_free, lambda r, s, c: -(d[r][s] / (c + 1)))
    # fill phase: fewest circuits first
    heap = [(float(counts[r][s]), o, r, s) for o, r, s in pairs if out_free[r] > 0 and in_free[s] > 0]
    _fill(heap, counts, out_free, in_free, lambda r, s, c: float(c))
    return np.asarray(counts, dtype=np.int64)


@lru_cache(maxsize=64)  # explicit keyed cache: racks -> pairs; safe to clear
def _circulant_pairs(racks: int) -> tuple[tuple[int, int, int], ...]:
    """(circulant tie-break order, r, s) of every ordered pair of different racks."""
    return tuple((((s - r) % racks) * racks + r, r, s) for r in range(racks) for s in range(racks) if r != s)


def _fill(heap: list, counts: list, out_free: list, in_free: list, key) -> None:
    """Pop (key, order, r, s) entries, smallest first: a pair with a free uplink at both ends gets
    one more circuit and goes back with ``key(r, s, its circuits)``; a full one is dropped."""
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        _, o, r, s = pop(heap)
        if out_free[r] <= 0 or in_free[s] <= 0:
            continue  # permanently full: drop
        row = counts[r]
        row[s] += 1
        out_free[r] -= 1
        in_free[s] -= 1
        push(heap, (key(r, s, row[s]), o, r, s))


def _strongly_connected(counts: np.ndarray) -> bool:
    racks = counts.shape[0]
    for adj in (counts > 0, (counts > 0).T):
        seen, stack = {0}, [0]
        while stack:
            r = stack.pop()
            for s in np.flatnonzero(adj[r]):
                if int(s) not in seen:
                    seen.add(int(s))
                    stack.append(int(s))
        if len(seen) < racks:
            return False
    return True


def rack_circuit_load(demand: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Bytes per circuit on every rack pair when each demand is split evenly over its shortest
    circuit routes (as ``RoutedFabric`` routes hybrid traffic); inf where demand has no route.
    (Plain lists: the rack graph is small and numpy's per-call cost dominated.)"""
    racks = demand.shape[0]
    flow = [[0.0] * racks for _ in range(racks)]
    dem = demand.tolist()
    for s, (unreachable, back) in enumerate(_shortest_routes(counts)):
        row = dem[s]
        if not any(row):
            continue
        if any(row[t] > 0 for t in unreachable):
            return np.full((racks, racks), np.inf)
        through = [float(x) for x in row]
        for t, st, preds in back:  # farthest racks first: what reaches t came through its predecessors
            tt = through[t]
            for v, sv, cvt in preds:
                share = tt * sv * cvt / st
                flow[v][t] += share
                through[v] += share
    flow_a = np.asarray(flow)
    return np.divide(flow_a, counts, out=np.zeros_like(flow_a), where=counts > 0)


# circuit counts -> per source rack the shortest-route structure ``rack_circuit_load`` walks: the
# placement sizes circuits for many demands that land on a few count matrices (17 distinct in one
# cell's 323 loads). Explicit, keyed, bounded (oldest out); clear() is always safe.
_ROUTES: dict = {}
_ROUTES_KEEP = 256


def _shortest_routes(counts: np.ndarray) -> list[tuple[tuple[int, ...], tuple]]:
    """Per source rack s: the racks it cannot reach, and in reverse breadth-first order each
    reached rack t with its path count σ_t and its predecessors (v, σ_v, circuits v→t) on
    shortest circuit routes (counted with multiplicity), ascending v."""
    key = (counts.shape, counts.dtype.str, counts.tobytes())
    hit = _ROUTES.get(key)
    if hit is not None:
        return hit
    racks = counts.shape[0]
    c = counts.tolist()
    adj = [[(s, c[r][s]) for s in range(racks) if c[r][s]] for r in range(racks)]
    into = [[(v, c[v][t]) for v in range(racks) if c[v][t]] for t in range(racks)]
    hit = []
    for s in range(racks):
        dist = [-1] * racks
        sigma = [0.0] * racks
        dist[s], sigma[s] = 0, 1.0
        order = [s]
        for v in order:  # breadth-first: ``order`` grows while it is walked
            dv, sv = dist[v] + 1, sigma[v]
            for w, cvw in adj[v]:
                if dist[w] < 0:
                    dist[w] = dv
                    order.append(w)
                if dist[w] == dv:
                    sigma[w] += sv * cvw
        back = tuple((t, sigma[t], tuple((v, sigma[v], cvt) for v, cvt in into[t] if dist[v] == dist[t] - 1))
                     for t in reversed(order[1:]))
        hit.append((tuple(t for t in range(racks) if dist[t] < 0), back))
    if len(_ROUTES) >= _ROUTES_KEEP:
        _ROUTES.pop(next(iter(_ROUTES)))
    _ROUTES[key] = hit
    return hit


@dataclass(frozen=True, slots=True, kw_only=True)
class RackCircuits:
    """Hybrid level-2 configuration: ``targets[u][r]`` = rack reached from rack r's uplink u (-1: none)."""

    targets: tuple[tuple[int, ...], ...]

    def counts(self, racks: int) -> np.ndarray:
        c = np.zeros((racks, racks), dtype=np.int64)
        for row in self.targets:
            for r, s in enumerate(row):
                if s >= 0:
                    c[r, s] += 1
        return c


def rack_circuits(counts: np.ndarray, up_ports: int) -> RackCircuits:
    """Turn a rack-pair circuit-count matrix into one partial permutation per uplink index."""
    edges = [(r, s) for r in range(counts.shape[0]) for s in range(counts.shape[1]) for _ in range(int(counts[r, s]))]
    try:
        colour = colour_bipartite(edges, up_ports)
    except ValueError:
        raise SpecError(f"rack circuits need more than up_ports={up_ports} uplinks per rack; lower the counts") from None
    targets = [[-1] * counts.shape[0] for _ in range(up_ports)]
    for (r, s), u in zip(edges, colour):
        targets[u][r] = s
    return RackCircuits(targets=tuple(map(tuple, targets)))
