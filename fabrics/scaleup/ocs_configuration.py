"""OCS configuration: the cross-connects of every OCS device (paper 003, Appendix C.1 layer 4, C.7).

* **OCS fabrics** (``single_ocs``, ``all_ocs``): workload-static circuits. Each accelerator port j
  carries one circuit of rail j, configured from a logical topology given as one rank permutation
  per port (``xor_port_permutations`` turns Cayley generators with multiplicities into them). In
  the two-level all-OCS fabric a circuit inside a rack crosses one level-1 OCS; across racks it
  crosses level-1, level-2, level-1, and the uplink each circuit takes is found by a bipartite
  edge colouring (``fabrics.scaleup.colouring``; ``up_ports`` ≥ rack size makes it always succeed,
  C.7 "non-blocking").
* **hybrid**: the level-2 OCS carries the same rack-to-rack circuits on every rail, sized to the
  deployment's rack-to-rack demand (``hybrid_for_demand``, ``fabrics.scaleup.circuit_sizing``).

OCS circuits are directed (an OCS port has an ingress and an egress fiber, Table 12: "two fibers
per port"), so any permutation can be configured, not only involutions.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from collectives.errors import SpecError
from fabrics.scaleup.physical import OCS, Deferred, LazyMapping, PhysicalFabric
from fabrics.scaleup.allocation import Allocation
from fabrics.scaleup.circuit_sizing import RackCircuits, rack_circuit_counts, rack_circuits
from fabrics.scaleup.colouring import colour_bipartite

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
    # the same table as arrays (src acc, dst acc, circuits, inside one rack), one entry per pair
    circuit_arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False,
                                                                                           compare=False)

    def circuits(self) -> int:
        return sum(len(v) for v in self.cross.values())


def configure_ocs(fabric: PhysicalFabric, allocation: Allocation,
                  port_permutations: Sequence[Sequence[int] | None]) -> OcsConfiguration:
    """Circuits of a ``single_ocs`` / ``all_ocs`` fabric: port j of rank x reaches rank π_j(x).

    Every port's permutation is checked here (a permutation of the ranks; across racks at most
    ``up_ports`` circuits leave and enter a rack per rail, which is when the uplink colouring
    succeeds, König); the cross-connects and the per-pair table are built when first read."""
    spec = fabric.spec
    if spec.level1_kind != OCS:
        raise SpecError(f"fabric {spec.kind} has no accelerator-facing OCS; use hybrid_configuration or EPS routing")
    allocation.check_fits(fabric)
    perms = [None if perm is None else tuple(perm) for perm in port_permutations]
    if len(perms) > spec.ports:
        raise SpecError(f"{len(perms)} port permutations exceed the {spec.ports} ports per accelerator")
    acc = allocation.accelerators
    _check_permutations(fabric, np.asarray(acc, dtype=np.int64), perms)
    arrays = _permutation_arrays(fabric, acc, perms)
    cross, table = Deferred(lambda: _cross_connects(fabric, acc, perms)), Deferred(lambda: _circuit_dict(arrays))
    return OcsConfiguration(cross=LazyMapping(cross), port_permutations=tuple(perms),
                            circuit_table=LazyMapping(table), circuit_arrays=arrays)


def _check_permutations(fabric: PhysicalFabric, acc: np.ndarray, perms) -> None:
    """Raise for the first port whose permutation is not one of the ranks or, on two levels, sends
    more circuits out of (or into) a rack than it has uplinks per rail."""
    spec, world = fabric.spec, len(acc)
    seen: set = set()
    for j, perm in enumerate(perms):
        if perm is None or perm in seen:
            continue
        y = np.asarray(perm, dtype=np.int64)
        if len(perm) != world or not np.array_equal(np.sort(y), np.arange(world)):
            raise SpecError(f"port {j}: the logical topology must give a permutation of the {world} ranks")
        seen.add(perm)
        if spec.levels == 1:
            continue
        rs, rd = acc // spec.rack_size, acc[y] // spec.rack_size
        inter = rs != rd
        if inter.any() and max(np.bincount(rs[inter]).max(), np.bincount(rd[inter]).max()) > spec.up_ports:
            raise SpecError(
                f"port {j}: more circuits leave a rack than its {spec.up_ports} uplinks per rail; "
                "raise fabric.up_ports (non-blocking: up_ports = down_ports)"
            )


def _cross_connects(fabric: PhysicalFabric, acc: Sequence[int], perms) -> dict[int, dict[int, int]]:
    """``cross[device][ingress port] = egress port`` of checked permutations; across racks the
    uplink of each circuit comes from a bipartite edge colouring (one per distinct permutation)."""
    spec = fabric.spec
    cross: dict[int, dict[int, int]] = defaultdict(dict)
    down = spec.rack_size
    colourings: dict[tuple[int, ...], list[int]] = {}  # ports carrying the same permutation share it
    for j, perm in enumerate(perms):
        if perm is None:
            continue
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
        colour = colourings.get(perm)
        if colour is None:
            colour = colourings[perm] = colour_bipartite([(rs, rd) for rs, rd, _, _ in inter], spec.up_ports)
        for (rs, rd, s, d), u in zip(inter, colour):
            cross[fabric.level1[rs][j]][s % down] = down + u
            cross[fabric.level2[j][u]][rs] = rd
            cross[fabric.level1[rd][j]][down + u] = d % down
    return {k: dict(v) for k, v in cross.items()}


def _permutation_arrays(fabric: PhysicalFabric, acc: Sequence[int], perms):
    """Circuits per accelerator pair of rank permutations on ports (src, dst, circuits, whether the
    pair shares a rack), pairs in ascending (src, dst) order."""
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
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, np.zeros(0, dtype=bool)
    pairs, counts = np.unique(np.concatenate(codes), return_counts=True)
    src, dst = pairs // n, pairs % n
    local = np.ones(len(pairs), dtype=bool) if spec.levels == 1 else (src // spec.rack_size == dst // spec.rack_size)
    return src, dst, counts, local


ONE_PASS, THREE_PASSES = (0, 1, 0), (0, 3, 2)  # (EPS hops, OCS passes, level-2 cables)


def _circuit_dict(arrays) -> dict:
    """The per-pair circuit table with hop counts: one OCS pass inside a rack (or on a single
    level), three (level 1, 2, 1) and two level-2 cables between racks (C.7), as ``route`` finds
    by following the cross-connects."""
    src, dst, counts, local = arrays
    return {(s, d): (c, ONE_PASS if lo else THREE_PASSES)
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
