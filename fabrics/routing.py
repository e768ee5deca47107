"""Routing on physical fabrics (paper 003, Appendix C.1 layer 4, C.7).

* **EPS** (``single_eps``, ``all_eps``, and the level-1 of ``hybrid``): dynamic routing with
  packet spraying. A transfer is sprayed evenly over every rail (its L ports) and, across level 2,
  over every uplink of its rail: all these paths are equal-cost alternatives.
* **OCS** (``single_ocs``, ``all_ocs``): workload-static circuits. Each accelerator port j carries
  one circuit of rail j, configured from a logical topology given as one rank permutation per
  port (``xor_port_permutations`` turns Cayley generators with multiplicities into them). In
  the two-level all-OCS fabric a circuit inside a rack crosses one level-1 OCS; across racks it
  crosses level-1, level-2, level-1, and the uplink each circuit takes is found by a bipartite
  edge colouring (König: ``up_ports`` ≥ rack size makes it always succeed, C.7 "non-blocking").
  A pair of accelerators without a circuit has no path: relaying through accelerators is the
  schedule's business.
* **hybrid**: the level-2 OCS is configured once at deployment as rack-to-rack circuits sized to
  the deployment's rack-to-rack demand (``rack_circuit_counts``) and identical on every rail;
  traffic between racks follows the shortest rack-level circuit paths (relayed by level-1 EPS
  switches when no direct circuit exists), sprayed over rails, uplinks and equal-length paths.

OCS circuits are directed (an OCS port has an ingress and an egress fiber, Table 12: "two fibers
per port"), so any permutation can be configured, not only involutions.

``RoutedFabric.paths(src_rank, dst_rank)`` gives explicit device/link paths (for a flit-level
simulator); ``crossings`` and ``phase_cost`` give the analytical view: latency of the slowest
path and bytes over the shared capacities each transfer crosses (rack uplinks at 4:1, circuits).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from collectives.errors import SpecError
from fabrics.allocation import Allocation
from fabrics.physical import ACCELERATOR, EPS, OCS, PhysicalFabric

# --- bipartite edge colouring (König) ------------------------------------------------------


def colour_bipartite(edges: Sequence[tuple[int, int]], colours: int) -> list[int]:
    """Colour the edges of a bipartite multigraph (left, right) with ``colours`` colours so that
    no two edges sharing an endpoint get the same colour; raises ``ValueError`` when a vertex has
    more edges than colours. Kempe-chain algorithm, deterministic."""
    at_left: dict[int, dict[int, int]] = defaultdict(dict)
    at_right: dict[int, dict[int, int]] = defaultdict(dict)
    col = [-1] * len(edges)

    def free(table: dict[int, int]) -> int:
        for c in range(colours):
            if c not in table:
                return c
        raise ValueError("vertex degree exceeds the number of colours")

    for e, (a, b) in enumerate(edges):
        alpha = free(at_left[a])
        if alpha in at_right[b]:
            beta = free(at_right[b])
            # Alternate alpha/beta from b; in a bipartite graph the chain never reaches a.
            chain, node, right, c = [], b, True, alpha
            while True:
                table = at_right[node] if right else at_left[node]
                if c not in table:
                    break
                e2 = table[c]
                chain.append(e2)
                node = edges[e2][0] if right else edges[e2][1]
                right = not right
                c = beta if c == alpha else alpha
            for e2 in chain:
                del at_left[edges[e2][0]][col[e2]]
                del at_right[edges[e2][1]][col[e2]]
            for e2 in chain:
                col[e2] = beta if col[e2] == alpha else alpha
                at_left[edges[e2][0]][col[e2]] = e2
                at_right[edges[e2][1]][col[e2]] = e2
        col[e] = alpha
        at_left[a][alpha] = e
        at_right[b][alpha] = e
    return col


# --- logical topology -> per-port permutations ---------------------------------------------


def xor_port_permutations(world: int, generators: Mapping[int, int] | Sequence[tuple[int, int]],
                          ports: int) -> tuple[tuple[int, ...] | None, ...]:
    """Cayley generators ``{mask: multiplicity}`` → one rank permutation x ↦ x⊕mask per port.

    Ports are filled in ascending mask order, ``multiplicity`` consecutive ports per generator
    (parallel circuits, Section 3.2); the rest stay unused. Σ multiplicity ≤ ports.
    """
    items = sorted(dict(generators).items())
    used = sum(p for _, p in items)
    if used > ports:
        raise SpecError(f"generators need {used} ports (Σ multiplicity) but accelerators have {ports}; "
                        "drop a generator or lower a multiplicity")
    perms: list[tuple[int, ...] | None] = []
    for mask, mult in items:
        if not 0 < mask < world or mult < 1:
            raise SpecError(f"generator {mask} with multiplicity {mult} is invalid for world={world}; "
                            "masks are non-zero labels below world, multiplicities ≥ 1")
        perm = tuple(x ^ mask for x in range(world))
        if max(perm) >= world:
            raise SpecError(f"generator mask {mask} leaves the label space of world={world} (needs a power of two)")
        perms.extend([perm] * mult)
    return tuple(perms) + (None,) * (ports - len(perms))


# --- level-2 circuits of the hybrid fabric ------------------------------------------------


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
    racks = demand.shape[0]
    counts = _water_fill(demand, up_ports, reserve_ring=False)
    if racks > 1 and not _strongly_connected(counts):
        counts = _water_fill(demand, up_ports, reserve_ring=True)
    return counts


def _water_fill(demand: np.ndarray, up_ports: int, *, reserve_ring: bool) -> np.ndarray:
    """One circuit at a time to the free pair with the highest priority (demand: bytes per circuit
    after adding it, D'Hondt; fill: fewest circuits), ties in circulant order. A pair that loses its
    free uplink never regains it, so each phase is a heap with lazy deletion (one live entry per
    pair) instead of a scan of all pairs per circuit."""
    import heapq

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

    def order(r: int, s: int) -> int:
        return ((s - r) % racks) * racks + r  # circulant tie-break

    for phase in ("demand", "fill"):
        heap = []
        for r in range(racks):
            for s in range(racks):
                if r != s and (phase == "fill" or d[r][s] > 0):
                    heap.append(_fill_key(phase, d[r][s], counts[r][s], order(r, s), r, s))
        heapq.heapify(heap)
        while heap:
            *_, r, s = heapq.heappop(heap)
            if out_free[r] <= 0 or in_free[s] <= 0:
                continue  # permanently full: drop
            counts[r][s] += 1
            out_free[r] -= 1
            in_free[s] -= 1
            heapq.heappush(heap, _fill_key(phase, d[r][s], counts[r][s], order(r, s), r, s))
    return np.asarray(counts, dtype=np.int64)


def _fill_key(phase: str, demand: float, count: int, order: int, r: int, s: int) -> tuple:
    # demand phase: largest demand / (circuits + 1) first (Jefferson/D'Hondt); fill: fewest circuits
    prio = demand / (count + 1) if phase == "demand" else -float(count)
    return (-prio, order, r, s)


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
    c = counts.tolist()
    dem = demand.tolist()
    adj = [[s for s in range(racks) if c[r][s]] for r in range(racks)]
    into = [[v for v in range(racks) if c[v][t]] for t in range(racks)]
    for s in range(racks):
        row = dem[s]
        if not any(row):
            continue
        dist = [-1] * racks
        sigma = [0.0] * racks
        dist[s], sigma[s] = 0, 1.0
        order, head = [s], 0
        while head < len(order):
            v = order[head]
            head += 1
            for w in adj[v]:
                if dist[w] < 0:
                    dist[w] = dist[v] + 1
                    order.append(w)
                if dist[w] == dist[v] + 1:
                    sigma[w] += sigma[v] * c[v][w]
        if any(row[t] > 0 and dist[t] < 0 for t in range(racks)):
            return np.full((racks, racks), np.inf)
        through = [float(x) for x in row]
        for t in reversed(order[1:]):
            for v in into[t]:
                if dist[v] == dist[t] - 1:
                    share = through[t] * sigma[v] * c[v][t] / sigma[t]
                    flow[v][t] += share
                    through[v] += share
    flow_a = np.asarray(flow)
    return np.divide(flow_a, counts, out=np.zeros_like(flow_a), where=counts > 0)


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


# --- OCS configuration ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OcsConfiguration:
    """Cross-connects of every OCS device: ``cross[device][ingress_port] = egress_port``."""

    cross: Mapping[int, Mapping[int, int]]
    rack: RackCircuits | None = None  # hybrid only
    port_permutations: tuple[tuple[int, ...] | None, ...] = ()  # OCS fabrics: rank level
    # OCS fabrics built by configure_ocs: (src acc, dst acc) -> (circuits, hop counts), what
    # ``route`` would find by following every circuit through ``cross`` (it does so when absent)
    circuit_table: Mapping[tuple[int, int], tuple[int, tuple[int, int, int]]] | None = field(default=None, repr=False,
                                                                                               compare=False)

    def circuits(self) -> int:
        return sum(len(v) for v in self.cross.values())


def configure_ocs(fabric: PhysicalFabric, allocation: Allocation,
                  port_permutations: Sequence[Sequence[int] | None]) -> OcsConfiguration:
    """Circuits of a ``single_ocs`` / ``all_ocs`` fabric: port j of rank x reaches rank π_j(x)."""
    spec = fabric.spec
    if spec.level1_kind != OCS:
        raise SpecError(f"fabric {spec.kind} has no accelerator-facing OCS; use hybrid_configuration or EPS routing")
    allocation.check_fits(fabric)
    perms = list(port_permutations)
    if len(perms) > spec.ports:
        raise SpecError(f"{len(perms)} port permutations exceed the {spec.ports} ports per accelerator")
    world = allocation.world
    acc = allocation.accelerators
    cross: dict[int, dict[int, int]] = defaultdict(dict)
    down = spec.rack_size
    colourings: dict[tuple[int, ...], list[int]] = {}  # ports carrying the same permutation share it
    for j, perm in enumerate(perms):
        if perm is None:
            continue
        perm = tuple(perm)
        if perm not in colourings and sorted(perm) != list(range(world)):
            raise SpecError(f"port {j}: the logical topology must give a permutation of the {world} ranks")
        if spec.levels == 1:
            dev = fabric.level1[0][j]
            for x, y in enumerate(perm):
                if x != y:
                    cross[dev][acc[x]] = acc[y]
            continue
        inter: list[tuple[int, int, int, int]] = []  # (src rack, dst rack, src acc, dst acc)
        for x, y in enumerate(perm):
            if x == y:
                continue
            s, d = acc[x], acc[y]
            rs, rd = s // down, d // down
            if rs == rd:
                cross[fabric.level1[rs][j]][s % down] = d % down
            else:
                inter.append((rs, rd, s, d))
        try:
            colour = colourings.get(perm)
            if colour is None:
                colour = colourings[perm] = colour_bipartite([(rs, rd) for rs, rd, _, _ in inter], spec.up_ports)
        except ValueError:
            raise SpecError(
                f"port {j}: more circuits leave a rack than its {spec.up_ports} uplinks per rail; "
                "raise fabric.up_ports (non-blocking: up_ports = down_ports)"
            ) from None
        for (rs, rd, s, d), u in zip(inter, colour):
            cross[fabric.level1[rs][j]][s % down] = down + u
            cross[fabric.level2[j][u]][rs] = rd
            cross[fabric.level1[rd][j]][down + u] = d % down
    return OcsConfiguration(cross={k: dict(v) for k, v in cross.items()},
                            port_permutations=tuple(None if p is None else tuple(p) for p in perms),
                            circuit_table=_permutation_circuits(fabric, acc, perms))


def _permutation_circuits(fabric: PhysicalFabric, acc: Sequence[int], perms) -> dict:
    """Circuits per accelerator pair of rank permutations on ports, with their hop counts: one OCS
    pass inside a rack (or on a single level), three (level 1, 2, 1) and two level-2 cables
    between racks (C.7), as ``route`` finds by following the cross-connects."""
    spec = fabric.spec
    accs = np.asarray(acc, dtype=np.int64)
    n = fabric.accelerators
    codes = []
    for perm in perms:
        if perm is None:
            continue
        y = np.asarray(perm, dtype=np.int64)
        x = np.arange(len(y))
        moved = x != y
        codes.append(accs[x[moved]] * n + accs[y[moved]])
    if not codes:
        return {}
    pairs, counts = np.unique(np.concatenate(codes), return_counts=True)
    src, dst = pairs // n, pairs % n
    local = np.ones(len(pairs), dtype=bool) if spec.levels == 1 else (src // spec.rack_size == dst // spec.rack_size)
    one, three = (0, 1, 0), (0, 3, 2)
    return {(s, d): (c, one if lo else three)
            for s, d, c, lo in zip(src.tolist(), dst.tolist(), counts.tolist(), local.tolist())}


def hybrid_configuration(fabric: PhysicalFabric, rack: RackCircuits) -> OcsConfiguration:
    """Level-2 OCS of the hybrid fabric: the same rack circuits on every rail."""
    spec = fabric.spec
    if spec.kind != "hybrid":
        raise SpecError(f"hybrid_configuration needs fabric kind hybrid, not {spec.kind}")
    if len(rack.targets) > spec.up_ports:
        raise SpecError(f"{len(rack.targets)} uplink permutations exceed up_ports={spec.up_ports}")
    cross: dict[int, dict[int, int]] = {}
    for j in range(spec.ports):
        for u, row in enumerate(rack.targets):
            cross[fabric.level2[j][u]] = {r: s for r, s in enumerate(row) if s >= 0}
    return OcsConfiguration(cross=cross, rack=rack)


def hybrid_for_demand(fabric: PhysicalFabric, rack_demand: np.ndarray) -> OcsConfiguration:
    counts = rack_circuit_counts(rack_demand, fabric.spec.up_ports)
    return hybrid_configuration(fabric, rack_circuits(counts, fabric.spec.up_ports))


# --- paths ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Path:
    """Devices from source to destination accelerator and the directed links between them."""

    devices: tuple[int, ...]
    links: tuple[int, ...]
    eps_hops: int
    ocs_passes: int
    level2_cables: int


@dataclass(frozen=True, slots=True, eq=False)
class RoutedFabric:
    """A physical fabric with its allocation and (for OCS) configuration: what traffic can use."""

    fabric: PhysicalFabric
    allocation: Allocation
    ocs: OcsConfiguration | None = None
    _ocs_paths: dict = field(default_factory=dict, repr=False)  # (src acc, dst acc) -> paths, per traced source
    _rack_routes: dict = field(default_factory=dict, repr=False)
    # OCS: (src acc, dst acc) -> (circuits, (eps hops, ocs passes, level-2 cables) of the fewest-pass one)
    _circuits: dict = field(default_factory=dict, repr=False)
    _traced: set = field(default_factory=set, repr=False)  # sources whose full paths are in _ocs_paths
    _rack_dist: dict = field(default_factory=dict, repr=False)  # hybrid: source rack -> {rack: circuit hops}

    # -- construction helpers
    @property
    def spec(self):
        return self.fabric.spec

    def accelerator(self, rank: int) -> int:
        return self.allocation.accelerators[rank]

    # -- explicit paths (for a simulator)
    def paths(self, src_rank: int, dst_rank: int) -> tuple[Path, ...]:
        """Equal-cost alternatives from ``src_rank`` to ``dst_rank`` (empty: no path)."""
        s, d = self.accelerator(src_rank), self.accelerator(dst_rank)
        if s == d:
            return ()
        spec, f = self.spec, self.fabric
        if spec.level1_kind == OCS:
            if s not in self._traced:
                self._ocs_paths.update(_trace_circuits(self, (s,)))
                self._traced.add(s)
            return self._ocs_paths.get((s, d), ())
        down = spec.rack_size
        rs, rd = s // down, d // down
        out = f.out_link
        result = []
        if rs == rd:
            for j in range(spec.ports):
                sw = f.level1[rs][j]
                result.append(self._path((s, sw, d), (out[(s, j)], out[(sw, d % down if spec.levels == 2 else d)])))
            return tuple(result)
        if spec.level2_kind == EPS:
            for j in range(spec.ports):
                a, b = f.level1[rs][j], f.level1[rd][j]
                for u in range(spec.up_ports):
                    l2 = f.level2[j][u]
                    result.append(self._path(
                        (s, a, l2, b, d),
                        (out[(s, j)], out[(a, down + u)], out[(l2, rd)], out[(b, d % down)])))
            return tuple(result)
        # hybrid: shortest rack-level circuit routes, on every rail
        for route in self._rack_route(rs, rd):
            for j in range(spec.ports):
                devs, links = [s], [out[(s, j)]]
                rack = rs
                for u, nxt in route:
                    a, l2 = f.level1[rack][j], f.level2[j][u]
                    devs += [a, l2]
                    links += [out[(a, down + u)], out[(l2, nxt)]]
                    rack = nxt
                b = f.level1[rd][j]
                devs += [b, d]
                links.append(out[(b, d % down)])
                result.append(self._path(tuple(devs), tuple(links)))
        return tuple(result)

    def _path(self, devices: tuple[int, ...], links: tuple[int, ...]) -> Path:
        kinds = [self.fabric.devices[x].kind for x in devices[1:-1]]
        levels = [self.fabric.devices[x].level for x in devices]
        l2 = sum(1 for a, b in zip(levels, levels[1:]) if {a, b} == {1, 2})
        return Path(devices=devices, links=links, eps_hops=kinds.count(EPS), ocs_passes=kinds.count(OCS), level2_cables=l2)

    def _rack_route(self, rs: int, rd: int) -> list[tuple[tuple[int, int], ...]]:
        """All shortest sequences of (uplink, next rack) from rack rs to rack rd (hybrid)."""
        key = (rs, rd)
        if key in self._rack_routes:
            return self._rack_routes[key]
        assert self.ocs is not None and self.ocs.rack is not None
        targets = self.ocs.rack.targets
        dist = self._rack_dist.get(rs)  # one breadth-first search per source rack
        if dist is None:
            dist = {rs: 0}
            queue = deque([rs])
            while queue:
                r = queue.popleft()
                for row in targets:
                    s = row[r]
                    if s >= 0 and s not in dist:
                        dist[s] = dist[r] + 1
                        queue.append(s)
            self._rack_dist[rs] = dist
        routes: list[tuple[tuple[int, int], ...]] = []
        if rd in dist:
            def extend(r: int, acc: tuple) -> None:
                if r == rd:
                    routes.append(acc)
                    return
                for u, row in enumerate(targets):
                    s = row[r]
                    if s >= 0 and dist.get(s) == dist[r] + 1 and (s == rd or dist[s] < dist[rd]):
                        extend(s, acc + ((u, s),))
            extend(rs, ())
        self._rack_routes[key] = routes
        return routes

    # -- latency
    def path_latency_s(self, path: Path) -> float:
        return self.spec.latency.path_latency_s(eps_hops=path.eps_hops, ocs_passes=path.ocs_passes,
                                                level2_cables=path.level2_cables)

    def latency_s(self, src_rank: int, dst_rank: int) -> float:
        """Latency of one access from src to dst (all equal-cost paths have the same hop counts)."""
        hops = self._hops(src_rank, dst_rank)
        if hops is None:
            raise SpecError(f"no path from rank {src_rank} to rank {dst_rank} on {self.spec.kind}; "
                            "configure a circuit between them or relay through a neighbour")
        eps, ocs, l2 = hops
        return self.spec.latency.path_latency_s(eps_hops=eps, ocs_passes=ocs, level2_cables=l2)

    def _hops(self, src_rank: int, dst_rank: int) -> tuple[int, int, int] | None:
        s, d = self.accelerator(src_rank), self.accelerator(dst_rank)
        spec = self.spec
        if spec.level1_kind == OCS:
            hit = self._circuits.get((s, d))
            return None if hit is None else hit[1]
        rs, rd = s // spec.rack_size, d // spec.rack_size
        if rs == rd:
            return (1, 0, 0)
        if spec.level2_kind == EPS:
            return (3, 0, 2)
        routes = self._rack_route(rs, rd)
        if not routes:
            return None
        k = len(routes[0])
        return (k + 1, k, 2 * k)

    # -- analytical view: shared capacities
    def crossings(self, src_rank: int, dst_rank: int) -> tuple[tuple[tuple, float], ...]:
        """Shared capacities a transfer crosses, with the share of its bytes on each.

        Keys: ("tx", acc) / ("rx", acc) accelerator injection/ejection over all L ports (EPS);
        ("up", rack) / ("down", rack) a rack's level-2 uplinks over all rails (all-EPS, 4:1);
        ("rack_circuit", r, s) hybrid circuits from rack r to rack s on all rails;
        ("circuit", a, b) the OCS circuits from accelerator a to b.
        """
        s, d = self.accelerator(src_rank), self.accelerator(dst_rank)
        spec = self.spec
        if spec.level1_kind == OCS:
            return ((("circuit", s, d), 1.0),)
        out: list[tuple[tuple, float]] = [(("tx", s), 1.0), (("rx", d), 1.0)]
        rs, rd = s // spec.rack_size, d // spec.rack_size
        if rs != rd:
            if spec.level2_kind == EPS:
                out += [(("up", rs), 1.0), (("down", rd), 1.0)]
            else:
                routes = self._rack_route(rs, rd)
                share = 1.0 / len(routes) if routes else 0.0
                acc: dict[tuple, float] = defaultdict(float)
                for route in routes:
                    rack = rs
                    for _, nxt in route:
                        acc[("rack_circuit", rack, nxt)] += share
                        rack = nxt
                out += list(acc.items())
        return tuple(out)

    def capacity_Bps(self, key: tuple) -> float:
        spec, R = self.spec, self.spec.link_rate_Bps
        kind = key[0]
        if kind in ("tx", "rx"):
            return spec.ports * R
        if kind in ("up", "down"):
            return spec.ports * spec.up_ports * R
        if kind == "rack_circuit":
            assert self.ocs is not None and self.ocs.rack is not None
            n = sum(1 for row in self.ocs.rack.targets if row[key[1]] == key[2])
            return spec.ports * n * R
        if kind == "circuit":
            hit = self._circuits.get((key[1], key[2]))
            return (0 if hit is None else hit[0]) * R
        raise KeyError(key)

    def phase_cost(self, transfers: Iterable[tuple[int, int, float]]) -> "PhaseCost":
        """Analytical cost of one schedule phase (Eq. 10 generalised to shared capacities):
        latency of its slowest path plus the most loaded capacity's bytes over its bandwidth."""
        load: dict[tuple, float] = defaultdict(float)
        latency = 0.0
        lat_cache: dict[tuple[int, int], float] = {}
        for src, dst, nbytes in transfers:
            if src == dst:
                continue
            hops = self._hops(src, dst)
            if hops is None:
                raise SpecError(f"no path from rank {src} to rank {dst} on {self.spec.kind}")
            if hops not in lat_cache:
                lat_cache[hops] = self.spec.latency.path_latency_s(eps_hops=hops[0], ocs_passes=hops[1],
                                                                   level2_cables=hops[2])
            latency = max(latency, lat_cache[hops])
            for key, share in self.crossings(src, dst):
                load[key] += share * nbytes
        worst_key, worst_s = None, 0.0
        for key, nbytes in load.items():
            t = nbytes / self.capacity_Bps(key)
            if t > worst_s:
                worst_key, worst_s = key, t
        return PhaseCost(latency_s=latency, serialization_s=worst_s, bottleneck=worst_key)


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseCost:
    latency_s: float
    serialization_s: float
    bottleneck: tuple | None

    @property
    def time_s(self) -> float:
        return self.latency_s + self.serialization_s


def route(fabric: PhysicalFabric, allocation: Allocation, ocs: OcsConfiguration | None = None) -> RoutedFabric:
    """Bind allocation and configuration to a fabric; OCS circuits are traced once here."""
    allocation.check_fits(fabric)
    spec = fabric.spec
    if spec.level2_kind == OCS and spec.level1_kind == EPS and (ocs is None or ocs.rack is None):
        raise SpecError("the hybrid fabric needs its level-2 circuits; build them with hybrid_for_demand")
    if spec.level1_kind == OCS and ocs is None:
        raise SpecError(f"fabric {spec.kind} needs an OCS configuration; build it with configure_ocs")
    routed = RoutedFabric(fabric=fabric, allocation=allocation, ocs=ocs)
    if spec.level1_kind == OCS:
        table = ocs.circuit_table
        routed._circuits.update(_circuit_table(routed) if table is None else table)
    return routed


def _circuit_table(routed: RoutedFabric) -> dict[tuple[int, int], tuple[int, tuple[int, int, int]]]:
    """Every configured circuit followed from its source port to its destination accelerator,
    kept as (circuits per accelerator pair, hop counts of the fewest-pass one): what latency,
    crossings and capacities need. Explicit ``Path`` objects are traced per source only when
    ``paths`` is asked (a simulator), since a 512-rank all-OCS fabric has 18 432 circuits."""
    f, cross = routed.fabric, routed.ocs.cross
    links, out_link, devices = f.links, f.out_link, f.devices
    table: dict[tuple[int, int], tuple[int, tuple[int, int, int]]] = {}
    for a in routed.allocation.accelerators:
        for j in range(f.spec.ports):
            node, port, level = a, j, devices[a].level
            eps = ocs = l2 = 0
            while True:
                link = links[out_link[(node, port)]]
                dev = devices[link.dst]
                if {level, dev.level} == {1, 2}:
                    l2 += 1
                level = dev.level
                if dev.kind == ACCELERATOR:
                    break
                if dev.kind == OCS:
                    ocs += 1
                elif dev.kind == EPS:
                    eps += 1
                egress = cross.get(link.dst, {}).get(link.dst_port)
                if egress is None:
                    dev = None
                    break
                node, port = link.dst, egress
            if dev is None:
                continue
            key, hops = (a, dev.id), (eps, ocs, l2)
            hit = table.get(key)
            if hit is None:
                table[key] = (1, hops)
            else:
                table[key] = (hit[0] + 1, hit[1] if hit[1][1] <= ocs else hops)
    return table


def _trace_circuits(routed: RoutedFabric, sources=None) -> dict[tuple[int, int], tuple[Path, ...]]:
    """Explicit paths of every circuit leaving ``sources`` (default: every accelerator)."""
    f, cross = routed.fabric, routed.ocs.cross
    paths: dict[tuple[int, int], list[Path]] = defaultdict(list)
    for a in (routed.allocation.accelerators if sources is None else sources):
        for j in range(f.spec.ports):
            devs, links = [a], []
            node, port = a, j
            while True:
                link = f.links[f.out_link[(node, port)]]
                links.append(link.id)
                devs.append(link.dst)
                if f.devices[link.dst].kind == ACCELERATOR:
                    break
                egress = cross.get(link.dst, {}).get(link.dst_port)
                if egress is None:
                    devs = []
                    break
                node, port = link.dst, egress
            if devs:
                paths[(a, devs[-1])].append(routed._path(tuple(devs), tuple(links)))
    return {k: tuple(v) for k, v in paths.items()}
