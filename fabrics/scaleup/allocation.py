"""Worker allocation: logical rank → accelerator (paper 003, Appendix C.1 layer 2, C.7).

* ``linear_allocation`` — rank r on accelerator r: racks hold consecutive ranks, so the
  lowest bits of the rank label are rack-local (what the all-EPS baseline and the all-OCS
  planner assume; the OCS planner picks rank-label bit partitions itself, Appendix A.1).
* ``bit_allocation`` — for power-of-two worlds and racks: a chosen set of rank-label bits
  indexes the position inside a rack, the other bits the rack.
* ``balanced_hybrid_allocation`` — the hybrid fabric's placement (C.7): the planner places
  workers "such that bandwidth demand is balanced across the level-2 OCS devices". We search
  the rack-local bit sets and keep the one whose rack-to-rack demand, after the level-2
  circuits are sized to it (``fabrics.scaleup.circuit_sizing.rack_circuit_counts``) and
  traffic follows the shortest circuit routes, gives the lowest bytes on the busiest circuit;
  ties go to less inter-rack traffic, then to the lexicographically first bit set.

Traffic is described by groups of ranks exchanging ``pair_bytes`` between every ordered pair
inside a group (the uniform any-to-any pattern of one-shot all-reduce and all-to-all, which is
what the hybrid fabric's native schedules send across level 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Sequence

import numpy as np

from collectives.errors import SpecError
from fabrics.scaleup.physical import PhysicalFabric
from fabrics.scaleup.circuit_sizing import busiest_circuit_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Allocation:
    """``accelerators[r]`` is the accelerator of logical rank r."""

    accelerators: tuple[int, ...]
    name: str = "custom"

    def __post_init__(self) -> None:
        accs = tuple(int(a) for a in self.accelerators)
        object.__setattr__(self, "accelerators", accs)
        if not accs:
            raise SpecError("allocation is empty; give one accelerator per rank")
        if min(accs) < 0:
            raise SpecError(f"allocation uses accelerator {min(accs)}; accelerator ids are non-negative")
        if len(set(accs)) != len(accs):
            raise SpecError("allocation places two ranks on one accelerator; give each rank its own accelerator")

    @property
    def world(self) -> int:
        return len(self.accelerators)

    def check_fits(self, fabric: PhysicalFabric) -> None:
        if max(self.accelerators) >= fabric.accelerators:
            raise SpecError(
                f"allocation uses accelerator {max(self.accelerators)} but the fabric has "
                f"{fabric.accelerators}; raise fabric.accelerators or lower world"
            )

    def rack_of_rank(self, fabric: PhysicalFabric) -> np.ndarray:
        return np.asarray(self.accelerators, dtype=np.int64) // fabric.spec.rack_size


@dataclass(frozen=True, slots=True, kw_only=True)
class TrafficGroups:
    """Disjoint (or not) groups of ranks; every ordered pair inside a group exchanges pair_bytes."""

    groups: tuple[tuple[int, ...], ...]
    pair_bytes: float

    def __post_init__(self) -> None:
        if self.pair_bytes < 0:
            raise SpecError(f"pair_bytes={self.pair_bytes} must be non-negative")


def linear_allocation(world: int) -> Allocation:
    if world < 1:
        raise SpecError(f"world={world} must be positive")
    return Allocation(accelerators=tuple(range(world)), name="linear")


def _log2(x: int, what: str) -> int:
    if x < 1 or x & (x - 1):
        raise SpecError(f"{what}={x} must be a power of two for a bit allocation")
    return x.bit_length() - 1


def bit_allocation(world: int, rack_size: int, rack_bits: Sequence[int]) -> Allocation:
    """Rank-label bits ``rack_bits`` (in order) give the position in the rack, the rest the rack."""
    n = _log2(world, "world")
    b = _log2(min(rack_size, world), "rack size")
    bits = tuple(rack_bits)
    if len(bits) != b or len(set(bits)) != b or any(not 0 <= x < n for x in bits):
        raise SpecError(f"rack_bits={bits} must be {b} distinct bit positions in 0..{n - 1}")
    others = [x for x in range(n) if x not in bits]
    ranks = np.arange(world, dtype=np.int64)
    pos = np.zeros(world, dtype=np.int64)
    rack = np.zeros(world, dtype=np.int64)
    for k, x in enumerate(bits):
        pos |= ((ranks >> x) & 1) << k
    for k, x in enumerate(others):
        rack |= ((ranks >> x) & 1) << k
    accs = rack * rack_size + pos
    return Allocation(accelerators=tuple(int(a) for a in accs), name=f"bits{list(bits)}")


def rack_demand_bytes(racks_of_rank: np.ndarray, traffic: Sequence[TrafficGroups], racks: int) -> np.ndarray:
    """racks × racks matrix of bytes sent between different racks (diagonal zero)."""
    return _rack_demand(racks_of_rank, _prepared(traffic), racks)


def _prepared(traffic: Sequence[TrafficGroups]) -> list[tuple[float, np.ndarray | None, tuple]]:
    """(pair bytes, groups as an array when all have one size, groups) of the non-empty traffic."""
    out = []
    for t in traffic:
        if not t.groups or t.pair_bytes == 0:
            continue
        same = len({len(g) for g in t.groups}) == 1
        out.append((t.pair_bytes, np.asarray(t.groups, dtype=np.int64) if same else None, t.groups))
    return out


def _rack_demand(racks_of_rank: np.ndarray, prepared, racks: int) -> np.ndarray:
    demand = np.zeros((racks, racks), dtype=float)
    for pair_bytes, array, groups in prepared:
        if array is not None:  # vectorised: one bincount row per group
            members = racks_of_rank[array]
            rows = np.repeat(np.arange(len(groups)) * racks, members.shape[1])
            counts = np.bincount(rows + members.ravel(), minlength=len(groups) * racks)
            counts = counts.reshape(len(groups), racks).astype(float)
            demand += pair_bytes * counts.T @ counts
        else:
            for g in groups:
                c = np.bincount(racks_of_rank[list(g)], minlength=racks).astype(float)
                demand += pair_bytes * np.outer(c, c)
    np.fill_diagonal(demand, 0.0)
    return demand


# (world, label bits, rack bits) -> (rack-local bit sets, rack of every rank under each (sets × world)):
# the candidates of every hybrid placement of that shape. Explicit, keyed; clear() is always safe.
_BIT_RACKS: dict = {}
_BOUND_SLACK = 1e-9  # relative: float rounding in the load sums never reaches it


def _racks_by_bit_set(world: int, n: int, b: int) -> tuple[tuple[tuple[int, ...], ...], np.ndarray]:
    key = (world, n, b)
    hit = _BIT_RACKS.get(key)
    if hit is None:
        bit_sets = tuple(combinations(range(n), b))
        ranks = np.arange(world, dtype=np.int64)
        racks_of = np.zeros((len(bit_sets), world), dtype=np.int64)
        for i, bits in enumerate(bit_sets):  # the rack of each rank under bit_allocation(world, ·, bits)
            for k, x in enumerate(x for x in range(n) if x not in bits):
                racks_of[i] |= ((ranks >> x) & 1) << k
        racks_of.flags.writeable = False
        hit = _BIT_RACKS[key] = (bit_sets, racks_of)
    return hit


# (candidates' racks, groups, racks) -> members of each group in each rack, per candidate: the
# splits of a search share a few dozen group structures (mesh axes). Explicit, keyed, bounded.
_GROUP_COUNTS: dict = {}
_GROUP_COUNTS_KEEP = 256


def _group_rack_counts(racks_of: np.ndarray, array: np.ndarray, racks: int) -> np.ndarray:
    key = (id(racks_of), array.shape, array.tobytes(), racks)
    hit = _GROUP_COUNTS.get(key)
    if hit is not None and hit[0] is racks_of:
        return hit[1]
    n_cand, n_groups = racks_of.shape[0], array.shape[0]
    members = racks_of[:, array]  # (candidates, groups, members)
    rows = (np.arange(n_cand * n_groups, dtype=np.int64) * racks).reshape(n_cand, n_groups, 1)
    counts = np.bincount((rows + members).ravel(), minlength=n_cand * n_groups * racks)
    counts = counts.reshape(n_cand, n_groups, racks).astype(float)
    counts.flags.writeable = False
    if len(_GROUP_COUNTS) >= _GROUP_COUNTS_KEEP:
        _GROUP_COUNTS.pop(next(iter(_GROUP_COUNTS)))
    _GROUP_COUNTS[key] = (racks_of, counts)
    return counts


def _rack_demands(racks_of: np.ndarray, prepared, racks: int) -> np.ndarray:
    """``_rack_demand`` for every row of ``racks_of`` (candidates × ranks) at once: one bincount
    for all candidates' group-by-rack counts, then a stacked matrix product: per candidate the
    same product and sums as ``_rack_demand`` (each matrix is the one it gives, to the last bit;
    tests/unit/test_hybrid_placement_speed.py compares them)."""
    n_cand = racks_of.shape[0]
    demand = np.zeros((n_cand, racks, racks), dtype=float)
    for pair_bytes, array, groups in prepared:
        if array is None:
            for i in range(n_cand):
                for g in groups:
                    c = np.bincount(racks_of[i][list(g)], minlength=racks).astype(float)
                    demand[i] += pair_bytes * np.outer(c, c)
            continue
        counts = _group_rack_counts(racks_of, array, racks)
        demand += (pair_bytes * counts.transpose(0, 2, 1)) @ counts  # per candidate: pair_bytes * c.T @ c
    diag = np.arange(racks)
    demand[:, diag, diag] = 0.0
    return demand


def balanced_hybrid_allocation(fabric: PhysicalFabric, world: int, traffic: Sequence[TrafficGroups]) -> Allocation:
    """Placement balancing level-2 demand over the hybrid fabric's OCS circuits (C.7).

    Every rack-local bit set is a candidate; their rack demands are built in one pass over shared
    arrays (``_rack_demands``). Sizing circuits to a demand (a water-fill) is the costly step, so a
    candidate is sized only when it can still win: a rack's own inter-rack bytes leave (and enter)
    it over at most ``up_ports`` circuits, so max(row sum, column sum) / up_ports bounds its
    busiest circuit from below, and a candidate whose bound is above the best busiest circuit
    found so far cannot be chosen. Candidates go in order of that bound; the choice is the same
    as sizing every candidate (the minimum of the same keys)."""
    spec = fabric.spec
    if spec.levels == 1 or world <= spec.rack_size:
        return linear_allocation(world)
    if world & (world - 1) or spec.rack_size & (spec.rack_size - 1):
        return linear_allocation(world)  # bit search needs power-of-two labels; keep racks contiguous
    n, b = _log2(world, "world"), _log2(spec.rack_size, "rack size")
    bit_sets, racks_of = _racks_by_bit_set(world, n, b)
    demands = _rack_demands(racks_of, _prepared(traffic), spec.racks)
    bound = np.maximum(demands.sum(axis=2).max(axis=1), demands.sum(axis=1).max(axis=1)) / spec.up_ports
    best: tuple | None = None
    worst_of: dict[bytes, float] = {}  # many bit sets give the same rack demand: size circuits once
    for i in np.lexsort((np.arange(len(bit_sets)), bound)).tolist():
        if best is not None and bound[i] * (1.0 - _BOUND_SLACK) > best[0][0]:
            continue  # its busiest circuit carries more than the best's: it cannot be chosen
        demand = demands[i]
        memo = demand.tobytes()
        worst = worst_of.get(memo)
        if worst is None:
            worst = worst_of[memo] = busiest_circuit_bytes(demand, spec.up_ports)
        key = (worst, float(demand.sum()), bit_sets[i])
        if best is None or key < best[0]:
            best = (key, bit_sets[i])
    assert best is not None
    alloc = bit_allocation(world, spec.rack_size, best[1])
    return Allocation(accelerators=alloc.accelerators, name=f"hybrid_balanced{alloc.name[4:]}")
