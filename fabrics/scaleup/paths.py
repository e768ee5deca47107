"""Routing over the physical scale-up fabrics (paper 003, Appendix C.1 layer 4, C.7).

* **EPS** (``single_eps``, ``all_eps``, and the level-1 of ``hybrid``): dynamic routing with
  packet spraying. A transfer is sprayed evenly over every rail (its L ports) and, across level 2,
  over every uplink of its rail: all these paths are equal-cost alternatives.
* **OCS** (``single_ocs``, ``all_ocs``): a transfer follows the circuits configured from its
  source ports (``fabrics.scaleup.ocs_configuration``). A pair of accelerators without a circuit
  has no path: relaying through accelerators is the schedule's business.
* **hybrid**: traffic between racks follows the shortest rack-level circuit paths of the level-2
  OCS (relayed by level-1 EPS switches when no direct circuit exists), sprayed over rails,
  uplinks and equal-length paths.

``RoutedFabric.paths(src_rank, dst_rank)`` gives explicit device/link paths (for a flit-level
simulator); ``crossings`` and ``phase_cost`` give the analytical view
(``fabrics.scaleup.phase_cost``): latency of the slowest path and bytes over the shared capacities
each transfer crosses (rack uplinks at 4:1, circuits).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from collectives.errors import SpecError
from fabrics.scaleup.physical import ACCELERATOR, EPS, OCS, PhysicalFabric
from fabrics.scaleup.allocation import Allocation
from fabrics.scaleup.ocs_configuration import OcsConfiguration
from fabrics.scaleup.phase_cost import PhaseCost, phase_cost as _phase_cost


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
    _circuits: Mapping = field(default_factory=dict, repr=False)
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
        hops = self.hops(src_rank, dst_rank)
        if hops is None:
            raise SpecError(f"no path from rank {src_rank} to rank {dst_rank} on {self.spec.kind}; "
                            "configure a circuit between them or relay through a neighbour")
        eps, ocs, l2 = hops
        return self.spec.latency.path_latency_s(eps_hops=eps, ocs_passes=ocs, level2_cables=l2)

    def hops(self, src_rank: int, dst_rank: int) -> tuple[int, int, int] | None:
        """(EPS hops, OCS passes, level-2 cables) of a path from src to dst; None: no path."""
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

    def phase_cost(self, transfers: Iterable[tuple[int, int, float]]) -> PhaseCost:
        """Analytical cost of one schedule phase (``fabrics.scaleup.phase_cost.phase_cost``)."""
        return _phase_cost(self, transfers)


def route(fabric: PhysicalFabric, allocation: Allocation, ocs: OcsConfiguration | None = None) -> RoutedFabric:
    """Bind allocation and configuration to a fabric; OCS circuits are traced once here."""
    allocation.check_fits(fabric)
    spec = fabric.spec
    if spec.level2_kind == OCS and spec.level1_kind == EPS and (ocs is None or ocs.rack is None):
        raise SpecError("the hybrid fabric needs its level-2 circuits; build them with hybrid_for_demand")
    if spec.level1_kind == OCS and ocs is None:
        raise SpecError(f"fabric {spec.kind} needs an OCS configuration; build it with configure_ocs")
    if spec.level1_kind == OCS and ocs.circuit_table is not None:  # read-only, shared with the configuration
        return RoutedFabric(fabric=fabric, allocation=allocation, ocs=ocs, _circuits=ocs.circuit_table)
    routed = RoutedFabric(fabric=fabric, allocation=allocation, ocs=ocs)
    if spec.level1_kind == OCS:
        routed._circuits.update(_circuit_table(routed))
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
