"""The shared-host OCS planner (paper 003, Section 3.2-3.3, Appendices A.1-A.2, Figure 12).

All meshes share one host graph Cay((Z2)^n, S) over the rank labels of N = 2^n accelerators:

1. **Bit partitions.** Each mesh assigns a block of label bits to each axis; an axis group is a
   coset of its block. The first mesh takes contiguous blocks (last axis on the lowest bits,
   row-major); every later mesh tries every assignment of bits to its axes (or, when that
   would exceed ``MAX_PARTITIONS`` combinations, contiguous blocks in both orders).
2. **Fold ladders.** Each axis's candidate generator sets are the block folds on contiguous
   runs of its bits (K_{2^k1}□…, the coset layers the coset-factored, RS+AG and Bruck
   schedules exploit, A.3) and the folded cube; each is priced alone with the axis's schedule
   (``auto``: best valid) and only the non-dominated (degree, T) points are kept.
3. **Joint search.** Every combination of ladder options is tried (depth-first, pruned by the
   port budget); folds are a global resource: an axis is priced on *all* host generators
   supported inside its block (the support rule, A.1), so folds chosen for one mesh also serve
   the others. Leftover ports then raise multiplicities greedily; a generator shared by several
   axes takes the largest multiplicity any of them requires, and an axis runs at the pace of its
   least-multiplied generator. Objective Σ w·T, T = h·λ + v·σ/(p·R) (Eq. 1), subject to
   Σ_g p_g ≤ L with shared generators counted once (Eq. 2).
   The search is exact but fast (``_LeafSearch``): generator sets are integer bitsets, prices,
   ladders and per-axis contributions are memoised (per process, keyed by everything they depend
   on, λ and R included, so the requests of a search share them), the multiplicity greedy is
   memoised by the leaf's structure (which own / supported sets each generator is in), a leaf
   whose lower bound (every axis at the most multiplicity the spare ports allow it; the two axes
   of one mesh sharing them, as their generators are disjoint) exceeds an objective already
   reached is not raised, and coordinate descent tries each leaf once. Plans
   are bit-identical to the unmemoised search (``tests/unit/test_fabrics_planner_search.py``).
   Where the optional extension is built, the coordinate descent runs compiled
   (``fabrics.planner.descent``: the same leaves, bounds and greedy in C, same floats;
   ``tests/unit/test_fabrics_planner_kernel.py``).
4. **Edge colouring.** Every generator's edges form a perfect matching, so colouring edges by
   generator (p_g ports each) is proper; the colouring is checked port by port and, on failure,
   the plan is redone with one port fewer (Figure 12: "on failure: replan").

Deterministic: enumeration orders are fixed and ties go to the first candidate found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations, count, product

from collectives.errors import SpecError
from fabrics.planner.axis_cost import (AxisPrice, complete_blocks, compress, expand, expanded_masks, price_candidates,
                                       schedule_candidates)
from fabrics.planner.descent import KernelTables, bitset_bytes, fits_kernel, load_descent_kernel
from fabrics.planner.request import NO_COLLECTIVE, PlanRequest, request_hash

MAX_PARTITIONS = 400  # bit-partition combinations tried exhaustively
MAX_LEAVES = 400  # fold combinations per partition searched exhaustively; beyond: coordinate descent
VARIANTS = 2  # tied ladder variants (same degree and T) kept per axis, best aligned first


@dataclass(frozen=True, slots=True, kw_only=True)
class AxisPlan:
    mesh: int
    axis: int
    size: int
    bits: tuple[int, ...]
    collective: str
    payload_bytes: int
    weight: float
    topology: str
    degree: int
    phases: int
    multiplicity: int
    schedule: str
    time_s: float
    volume: str  # v as a fraction of σ
    generators: tuple[int, ...] = ()  # host masks the axis uses

    def as_result(self) -> dict:
        return {"mesh": self.mesh, "axis": self.axis, "size": self.size, "topology": self.topology,
                "degree": self.degree, "phases": self.phases, "multiplicity": self.multiplicity,
                "schedule": self.schedule, "time_s": self.time_s}


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    request_hash: str
    allocation: str
    world: int
    ports: int
    total_time_s: float  # Σ w·T
    host_degree: int  # distinct generators (shared-host) or circuits per node (stacked)
    ports_used: int
    axes: tuple[AxisPlan, ...]
    generators: tuple[tuple[int, int], ...] = ()  # (host mask, multiplicity), shared-host only
    port_masks: tuple[int | None, ...] = ()  # generator on each port
    partitions: tuple[tuple[tuple[int, ...], ...], ...] = ()
    colouring_attempts: int = 1
    meta: dict = field(default_factory=dict, compare=False)

    def port_permutations(self) -> tuple[tuple[int, ...] | None, ...]:
        """Rank permutation on every port (for ``fabrics.scaleup.ocs_configuration.configure_ocs``)."""
        return tuple(None if g is None else tuple(x ^ g for x in range(self.world)) for g in self.port_masks)

    def results(self) -> dict:
        return {"total_time_s": self.total_time_s, "host_degree": self.host_degree, "ports_used": self.ports_used,
                "ports": self.ports, "allocation": self.allocation, "request_hash": self.request_hash,
                "axes": [a.as_result() for a in self.axes]}

    def to_json(self) -> dict:
        d = self.results()
        d["axes"] = [{**a.as_result(), "bits": list(a.bits), "collective": a.collective,
                      "payload_bytes": a.payload_bytes, "weight": a.weight, "volume_sigma": a.volume,
                      "generators": [format(g, f"0{self.world.bit_length() - 1}b") for g in a.generators]}
                     for a in self.axes]
        nb = self.world.bit_length() - 1
        d["generators"] = [{"mask": format(g, f"0{nb}b"), "multiplicity": p} for g, p in self.generators]
        d["port_masks"] = [None if g is None else format(g, f"0{nb}b") for g in self.port_masks]
        d["partitions"] = [[list(b) for b in mesh] for mesh in self.partitions]
        d["colouring_attempts"] = self.colouring_attempts
        d.update(self.meta)
        return d


# --- axes and their ladders ----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Axis:
    mesh: int
    axis: int
    a: int  # bits
    collective: str
    sigma: int
    weight: float
    schedule: str

    @property
    def active(self) -> bool:
        return self.collective != NO_COLLECTIVE and self.sigma > 0 and self.weight > 0


def _axes(req: PlanRequest) -> list[_Axis]:
    out = []
    for m, mesh in enumerate(req.meshes):
        for i, size in enumerate(mesh.shape):
            out.append(_Axis(m, i, size.bit_length() - 1, mesh.collectives[i], mesh.payloads_bytes[i],
                             mesh.weights[i], mesh.schedules[i]))
    return out


def _compositions(a: int):
    for cuts in product((False, True), repeat=a - 1):
        sizes, k = [], 1
        for c in cuts:
            if c:
                sizes.append(k)
                k = 1
            else:
                k += 1
        sizes.append(k)
        yield tuple(sizes)


def _local_options(a: int, ports: int) -> list[frozenset[int]]:
    """Axis-local generator sets of the fold ladder: balanced block folds on contiguous runs of the
    axis's bits, and the folded cube."""
    opts: list[frozenset[int]] = []
    for sizes in _compositions(a):
        # Balanced sub-blocks only (sizes differ by ≤ 1, as Q7[4,3] in A.3): for a given number of
        # layers they need the fewest ports (2^k − 1 is convex), so unbalanced ones are dominated.
        if max(sizes) - min(sizes) > 1 or sum((1 << k) - 1 for k in sizes) > ports:
            continue
        gens, off = set(), 0
        for k in sizes:
            gens.update(m << off for m in range(1, 1 << k))
            off += k
        opts.append(frozenset(gens))
    if a >= 3 and a + 1 <= ports:
        opts.append(frozenset({1 << b for b in range(a)} | {(1 << a) - 1}))
    seen, unique = set(), []
    for o in opts:
        if o not in seen:
            seen.add(o)
            unique.append(o)
    return unique


# Memo tables of the search, shared by every request planned in this process: each entry is a pure
# function of its key and of the deployment's λ and R (the σ-independent tables of neither), so
# the 72 splits and 5 batches of a search, which repeat most axes, ladders and greedy structures,
# compute each once. Explicit and keyed (DESIGN.md); ``clear_search_tables`` (called by
# ``fabrics.planner.clear_plan_cache``) is always safe; a table past ``_TABLE_KEEP`` entries is
# emptied and refilled (results never depend on what a table holds).
_STRUCTURE: dict[str, dict] = {name: {} for name in ("local_masks", "full_masks", "subgroups", "compress", "candidates",
                                                    "hosted")}
_STRUCTURE["kernel"] = KernelTables()  # the compiled descent's (``fabrics.planner.descent``)
_PRICED: dict[tuple[float, float], dict[str, dict]] = {}
_ROW_COUNTER = count()  # ids of greedy rows (``_LeafSearch.row_id``): never reused
_TABLE_KEEP = 250_000  # entries per table (≈ 0.2 GB for all of them after the 360 requests of figure 4)


def clear_search_tables() -> None:
    for table in _STRUCTURE.values():
        table.clear()
    _PRICED.clear()


def _priced_tables(hop_latency_s: float, link_rate_Bps: float) -> dict[str, dict]:
    key = (hop_latency_s, link_rate_Bps)
    tables = _PRICED.get(key)
    if tables is None:
        tables = _PRICED[key] = {name: {} for name in ("prices", "times", "ladders", "raised", "row_ids", "pair_bounds", "terms")}
    for table in (*tables.values(), *_STRUCTURE.values()):
        if len(table) > _TABLE_KEEP:
            table.clear()
    return tables


class _Pricer:
    """Prices an axis on an axis-local generator set; keyed cache in front of topology building."""

    def __init__(self, req: PlanRequest):
        self.req = req
        priced = _priced_tables(req.hop_latency_s, req.link_rate_Bps)
        self._cache: dict[tuple, AxisPrice | None] = priced["prices"]
        # memo tables of ``_LeafSearch`` (shared by all partitions, port budgets and requests)
        self.times: dict[tuple, tuple[float, int | None]] = priced["times"]
        self.ladders: dict[tuple, list] = priced["ladders"]
        self.raised: dict[tuple, tuple] = priced["raised"]
        self.row_ids: dict[tuple, int] = priced["row_ids"]
        self.pair_bounds: dict[tuple, float] = priced["pair_bounds"]
        self.terms: dict[tuple, float] = priced["terms"]
        self.local_masks: dict[tuple, tuple[int, ...]] = _STRUCTURE["local_masks"]
        self.full_masks: dict[tuple, tuple[int, ...] | None] = _STRUCTURE["full_masks"]
        self._subgroups: dict[tuple[int, ...], int] = _STRUCTURE["subgroups"]
        self._compress: dict[tuple[int, ...], dict[int, int]] = _STRUCTURE["compress"]
        self._candidates: dict[tuple, tuple] = _STRUCTURE["candidates"]
        self._hosted: dict[tuple, tuple[frozenset[int], int]] = _STRUCTURE["hosted"]
        self.rows: dict[tuple, dict] = {}  # ``_LeafSearch``'s rows, per (axis, bits): this request's
        self.kernel_tables: KernelTables = _STRUCTURE["kernel"]
        self.kernel_rows: dict[tuple, tuple] = {}  # the compiled descent's inputs per (axis, bits)
        self.leaf_static: dict[tuple, tuple] = {}  # ``_leaf_static`` per active axes: this request's

    def compress_table(self, bits: tuple[int, ...]) -> dict[int, int]:
        """Host mask → axis-local mask for every mask inside the block ``bits``."""
        hit = self._compress.get(bits)
        if hit is None:
            hit = self._compress[bits] = {h: x for x, h in enumerate(expanded_masks(bits))}
        return hit

    def is_block_fold(self, a: int, local: tuple[int, ...]) -> bool:
        return complete_blocks(a, local) is not None  # kept per generator set there

    def subgroup(self, bits: tuple[int, ...]) -> int:
        """Bitset of every mask inside the block ``bits`` (the support rule's test, A.1)."""
        hit = self._subgroups.get(bits)
        if hit is None:
            hit = self._subgroups[bits] = _bitset(expanded_masks(bits)[1:])
        return hit

    def subgroups(self, bits: list[tuple[int, ...]]) -> list[int]:
        """``subgroup`` of each axis's bits (one bit partition)."""
        return [self.subgroup(bs) for bs in bits]

    def hosted(self, local: frozenset[int], bits: tuple[int, ...]) -> tuple[frozenset[int], int]:
        """An axis-local generator set in host masks, and the bitset of its folds (masks of ≥ 2 bits)."""
        key = (local, bits)
        hit = self._hosted.get(key)
        if hit is None:
            host = frozenset(expand(g, bits) for g in local)
            hit = self._hosted[key] = (host, _bitset(g for g in host if g & (g - 1)))
        return hit

    def price(self, ax: _Axis, local_masks, p: int) -> AxisPrice | None:
        """``axis_cost.price_axis`` on the Cayley graph of ``local_masks``; the valid schedules'
        closed forms are kept per (graph, collective, schedule), whatever σ, p, λ and R."""
        gens = tuple(sorted(local_masks))
        key = (ax.a, gens, ax.collective, ax.sigma, ax.schedule, p)
        if key in self._cache:
            return self._cache[key]
        shape = (ax.a, gens, ax.collective, ax.schedule)
        candidates = self._candidates.get(shape)
        if candidates is None:
            from collectives.topology import CayleyTopology

            topo = CayleyTopology(n_bits=ax.a, generators=gens)
            candidates = self._candidates[shape] = schedule_candidates(topo, ax.collective, ax.schedule)
        price = price_candidates(candidates, ax.sigma, p=p, hop_latency_s=self.req.hop_latency_s,
                                 link_rate_Bps=self.req.link_rate_Bps)
        self._cache[key] = price
        return price


def _ladder(ax: _Axis, pricer: _Pricer, ports: int) -> list[tuple[frozenset[int], int, float]]:
    """Non-dominated (local masks, degree, T) points of the axis's fold ladder, cheapest first
    (memoised per request: the ladder does not depend on the axis's bits)."""
    key = ("ladder", ax.a, ax.collective, ax.sigma, ax.schedule, ports)
    hit = pricer.ladders.get(key)
    if hit is not None:
        return hit
    pts = []
    for local in _local_options(ax.a, ports):
        pr = pricer.price(ax, local, 1)
        if pr is not None:
            pts.append((local, len(local), pr.time_s))
    if not pts:
        raise SpecError(f"no valid {ax.collective} schedule {ax.schedule!r} for an axis of {1 << ax.a} ranks on any "
                        "cube fold; choose schedule=auto or another schedule")
    keep = [p for p in pts if not any((q[1] <= p[1] and q[2] < p[2] - 1e-15) or (q[1] < p[1] and q[2] <= p[2] + 1e-15)
                                      for q in pts)]
    keep.sort(key=lambda p: (p[1], p[2]))
    pricer.ladders[key] = keep
    return keep


# --- partitions ----------------------------------------------------------------------------

def _contiguous_partitions(shape: tuple[int, ...], n: int, *, both_orders: bool) -> list[tuple[tuple[int, ...], ...]]:
    """Axes on contiguous bit blocks; the default order puts the last axis on the lowest bits."""
    sizes = [s.bit_length() - 1 for s in shape]
    orders = [tuple(range(len(sizes)))]
    if both_orders and len(sizes) > 1:
        orders.append(tuple(reversed(orders[0])))
    out = []
    for order in orders:
        bits: list[tuple[int, ...]] = [()] * len(sizes)
        top = n
        for i in order:  # axes in ``order`` take bits from the top down
            bits[i] = tuple(range(top - sizes[i], top))
            top -= sizes[i]
        out.append(tuple(bits))
    return out


def _all_partitions(shape: tuple[int, ...], n: int) -> list[tuple[tuple[int, ...], ...]]:
    sizes = [s.bit_length() - 1 for s in shape]
    if len(sizes) == 1:
        return [(tuple(range(n)),)]
    default = _contiguous_partitions(shape, n, both_orders=False)[0]  # row-major first: ties keep it
    rest = [(b0, tuple(b for b in range(n) if b not in b0)) for b0 in combinations(range(n), sizes[0])]
    return [default] + [q for q in rest if q != default]


def _partition_sets(req: PlanRequest) -> tuple[tuple[tuple[tuple[int, ...], ...], ...], ...]:
    """Bit partitions of all meshes; the first mesh is fixed (the labels are symmetric under bit
    permutations, so only the alignment of the others to it matters)."""
    return _partition_sets_of(tuple(tuple(m.shape) for m in req.meshes), req.n_bits)


@lru_cache(maxsize=512)  # explicit keyed cache: (mesh shapes, bits) -> partitions; one per split of a search
def _partition_sets_of(shapes: tuple[tuple[int, ...], ...], n: int) -> tuple:
    per_mesh = [_contiguous_partitions(shapes[0], n, both_orders=False)]
    per_mesh += [_all_partitions(shape, n) for shape in shapes[1:]]
    total = 1
    for p in per_mesh:
        total *= len(p)
    if total > MAX_PARTITIONS:  # heuristic (A.7): contiguous blocks in both orders only
        per_mesh = per_mesh[:1] + [_contiguous_partitions(shape, n, both_orders=True) for shape in shapes[1:]]
    return tuple(tuple(c) for c in product(*per_mesh))


# --- evaluation ----------------------------------------------------------------------------

class _Evaluator:
    """The objective of one leaf written plainly (host and own sets as frozensets); the search uses
    ``_LeafSearch``, which computes the same numbers, and the final axis plans are read from here."""

    def __init__(self, req: PlanRequest, axes: list[_Axis], bits: list[tuple[int, ...]], pricer: _Pricer):
        self.req, self.axes, self.bits, self.pricer = req, axes, bits, pricer
        self.blocks = [sum(1 << b for b in bs) for bs in bits]
        self._cache: dict[tuple, tuple[float, AxisPrice | None, bool]] = {}

    def axis_time(self, k: int, host: frozenset[int], own: frozenset[int], pg: dict[int, int], p_own: int):
        """Best of: the axis on its own generator set, or on every host generator supported in
        its block when those form block folds (folds chosen for other meshes, A.1); schedules may
        ignore generators, so the own set is always available."""
        ax, block = self.axes[k], self.blocks[k]
        full = tuple(sorted(g for g in host if g & ~block == 0))
        p_full = min((pg.get(g, 1) for g in full), default=1)
        key = (k, full, own, p_full, p_own)
        hit = self._cache.get(key)
        if hit is None:
            bits = self.bits[k]
            po = self.pricer.price(ax, [compress(g, bits) for g in own], p_own)
            pf = None
            if len(full) > len(own):
                local_full = [compress(g, bits) for g in full]
                if complete_blocks(ax.a, local_full) is not None:
                    pf = self.pricer.price(ax, local_full, p_full)
            if pf is not None and (po is None or pf.time_s <= po.time_s):
                hit = (pf.time_s, pf, True)
            elif po is not None:
                hit = (po.time_s, po, False)
            else:
                hit = (float("inf"), None, False)
            self._cache[key] = hit
        return hit

    def objective(self, host: frozenset[int], owns: list[frozenset[int]], ps: list[int]) -> float:
        return self.objective_and_floor(host, owns, ps)[0]

    def objective_and_floor(self, host: frozenset[int], owns: list[frozenset[int]], ps: list[int]) -> tuple[float, float]:
        """Σ w·T and Σ w·h·λ (the part no multiplicity can remove, Eq. 1)."""
        pg = _generator_multiplicities(owns, ps) if any(p > 1 for p in ps) else {}
        total = floor = 0.0
        lam = self.req.hop_latency_s
        for k, ax in enumerate(self.axes):
            if ax.active:
                t, price, _ = self.axis_time(k, host, owns[k], pg, ps[k])
                total += ax.weight * t
                floor += ax.weight * (price.h * lam if price is not None else float("inf"))
        return total, floor


def _generator_multiplicities(owns: list[frozenset[int]], ps: list[int]) -> dict[int, int]:
    pg: dict[int, int] = {}
    for own, p in zip(owns, ps):
        for g in own:
            if pg.get(g, 1) < p:
                pg[g] = p
    return pg


def _ports(host: frozenset[int], owns: list[frozenset[int]], ps: list[int]) -> int:
    pg = _generator_multiplicities(owns, ps)
    return sum(pg.get(g, 1) for g in host)


def _aligned_key(ax: _Axis, k: int, bits: list[tuple[int, ...]], pricer: _Pricer, budget: int,
                 subgroups: list[int] | None = None) -> tuple:
    """Everything ``_aligned_ladder`` reads: the axis's ladder in its bits, and every mask inside
    some other axis's block (bitset: where a fold can be shared). ``subgroups``: the pricer's
    subgroup of each axis's bits, when the caller has them."""
    subgroups = pricer.subgroups(bits) if subgroups is None else subgroups
    inside_others = 0
    for j, sub in enumerate(subgroups):
        if j != k:
            inside_others |= sub
    return ("aligned", ("hosted", ax.a, ax.collective, ax.sigma, ax.schedule, budget, bits[k]), inside_others)


def _aligned_ladder(ax: _Axis, k: int, bits: list[tuple[int, ...]], pricer: _Pricer, budget: int,
                    memo: tuple | None = None) -> list[frozenset[int]]:
    """The axis's ladder in host masks; of the variants that tie in (degree, T) keep the
    ``VARIANTS`` whose sub-blocks best fit inside other axes' blocks (where a fold can be shared).
    ``memo``: ``_aligned_key`` of the same arguments, when the caller has it."""
    memo = _aligned_key(ax, k, bits, pricer, budget) if memo is None else memo
    hit = pricer.ladders.get(memo)
    if hit is not None:
        return hit
    _, hosted, inside_others = memo
    points = pricer.ladders.get(hosted)
    if points is None:
        points = []
        for local, deg, t in _ladder(ax, pricer, budget):
            points.append((deg, t, *pricer.hosted(local, bits[k])))
        pricer.ladders[hosted] = points
    groups: dict[tuple[int, float], list[tuple[int, int, frozenset[int]]]] = {}
    for idx, (deg, t, host, folds) in enumerate(points):
        score = (folds & inside_others).bit_count()  # folds that fit inside another axis's block
        groups.setdefault((deg, round(t, 15)), []).append((-score, idx, host))
    out = []
    for key in sorted(groups):
        out.extend(h for _, _, h in sorted(groups[key], key=lambda x: x[:2])[:VARIANTS])
    pricer.ladders[memo] = out
    return out


def _bitset(masks) -> int:
    """A set of generator masks as one integer (bit g set for mask g): unions and the support
    rule's "inside the block" test become single integer operations."""
    out = 0
    for g in masks:
        out |= 1 << g
    return out


def _members(bitset: int) -> list[int]:
    """The masks of a bitset, ascending."""
    out = []
    while bitset:
        low = bitset & -bitset
        out.append(low.bit_length() - 1)
        bitset ^= low
    return out


def _atoms(host: int, rows: list[tuple]) -> tuple:
    """The leaf's generators grouped by membership: sorted (rows owning, rows supporting, count).

    Bitset refinement of ``host`` by every row's own set and (when the axis may run on it) its
    supported set, in row order; a set holding every remaining generator, or none, only tags."""
    atoms = [(host, (), ())]
    for r, row in enumerate(rows):
        for side, bits in ((1, row[3]), (2, row[5] if row[4] is not None else 0)):
            if bits & host == host:  # every atom inside: tag them all (same list, same order)
                atoms = [(a, own + (r,), full) if side == 1 else (a, own, full + (r,)) for a, own, full in atoms]
                continue
            if not bits:
                continue
            split = []
            for a, own_rows, full_rows in atoms:
                inside = a & bits
                if inside:
                    split.append((inside, own_rows + (r,), full_rows) if side == 1 else
                                 (inside, own_rows, full_rows + (r,)))
                    if inside != a:
                        split.append((a ^ inside, own_rows, full_rows))
                else:
                    split.append((a, own_rows, full_rows))
            atoms = split
    return tuple(sorted((own_rows, full_rows, a.bit_count()) for a, own_rows, full_rows in atoms))


def _leaf_static(axes: list[_Axis], active: list[int]) -> tuple:
    """What a ``_LeafSearch`` reads of the request alone: each axis's pricing key, the cheapest
    multiplicity step (a plain-cube axis), and the row positions (in ``active`` order, as
    ``chosen`` lists them) of the meshes with two active axes and of every other active axis."""
    keys = [(ax.a, ax.collective, ax.sigma, ax.schedule) for ax in axes]
    min_step = min(axes[k].a for k in active)
    by_mesh: dict[int, list[int]] = {}
    for r, k in enumerate(active):
        by_mesh.setdefault(axes[k].mesh, []).append(r)
    pairs = [tuple(rs) for rs in by_mesh.values() if len(rs) == 2]
    singles = [r for rs in by_mesh.values() if len(rs) != 2 for r in rs]
    return keys, min_step, pairs, singles


class _LeafSearch:
    """Fast evaluation of the leaves of one bit partition (same arithmetic as ``_Evaluator``).

    A leaf fixes every axis's own generator set; what varies during the multiplicity greedy is
    only ``ps``. Generator sets are integer bitsets (host = OR of the own sets; the generators
    supported inside axis k's block = host AND the bitset of k's subgroup), axis-local masks and
    prices are memoised per request, and the greedy's outcome is memoised by the leaf's
    structure (which own / supported sets each generator belongs to, not its mask). Σ w·T is
    summed in axis order with the same float operations as ``_Evaluator.objective``, so plans
    are bit-identical to the unmemoised search.
    """

    def __init__(self, req: PlanRequest, axes: list[_Axis], bits: list[tuple[int, ...]], pricer: _Pricer,
                 budget: int, active: list[int], subgroups: list[int] | None = None):
        self.req, self.axes, self.bits, self.pricer, self.budget = req, axes, bits, pricer, budget
        self.active = active
        self.lam = req.hop_latency_s
        # shared by every partition of the request (keyed by the axis's bits, not its index)
        self._local, self._full, self._time = pricer.local_masks, pricer.full_masks, pricer.times
        self.raised = pricer.raised
        self._row_ids = pricer.row_ids
        self._terms = pricer.terms
        subgroups = pricer.subgroups(bits) if subgroups is None else subgroups
        self.subgroups = {k: subgroups[k] for k in active}
        static = pricer.leaf_static.get(tuple(active))  # the same for every partition of the request
        if static is None:
            static = pricer.leaf_static[tuple(active)] = _leaf_static(axes, active)
        self._keys, self.min_step, self.pairs, self.singles = static
        # per axis: {(own bitset, supported bitset): row}; a row reads only the axis, its bits and
        # those two sets, so the table is the request's (``_Pricer.rows``), shared by its partitions
        self._contrib = {k: pricer.rows.setdefault((k, bits[k]), {}) for k in active}
        self._pair_bounds: dict[tuple, float] = pricer.pair_bounds

    def option(self, k: int, own: frozenset[int]) -> tuple:
        """(own set, its bitset, its axis-local masks) of one ladder option of axis k."""
        key = (self.bits[k], own)
        hit = self._local.get(key)
        if hit is None:
            hit = self._local[key] = (own, _bitset(own), tuple(sorted(compress(g, self.bits[k]) for g in own)))
        return hit

    def joint_bound(self, hits: list[tuple], spare: int) -> float:
        """A lower bound on the leaf's Σ w·T (Eq. 1 is monotone in p): every axis alone at the
        most multiplicity ``spare`` ports allow, except that the two axes of one mesh share them.
        Axis k runs on its own set or its supported set S at multiplicity q, and every generator of
        S then carries ≥ q ports; the two sets of one mesh are disjoint, so (q_a − 1)·|S_a| +
        (q_b − 1)·|S_b| ≤ spare."""
        lb = 0.0
        for r in self.singles:
            lb += hits[r][3][spare]  # filled by the separate bound just computed
        for i, j in self.pairs:
            key = (hits[i][4], hits[j][4], spare)
            wt = self._pair_bounds.get(key)
            if wt is None:
                wt = self._pair_bounds[key] = self._pair_bound(hits[i][0], hits[j][0], spare)
            lb += wt
        return lb

    def _pair_bound(self, row_a: tuple, row_b: tuple, spare: int) -> float:
        time = self.time
        ka, wa, ola, _, fla, _ = row_a
        kb, wb, olb, _, flb, _ = row_b
        sets_b = [s for s in (olb, flb) if s is not None]
        best = float("inf")
        for sa in (ola, fla):
            if sa is None:
                continue
            for q in range(1, 2 + spare // len(sa)):
                left = spare - (q - 1) * len(sa)
                tb = min(time(kb, sb, 1 + left // len(sb))[0] for sb in sets_b)
                best = min(best, wa * time(ka, sa, q)[0] + wb * tb)
        return best

    def row_id(self, row: tuple) -> int:
        """A small integer naming ``row`` = (axis key, weight, own local, full local or None): the
        greedy memo is keyed by these ids, not by the rows' long mask tuples (hashed once per row,
        not once per leaf). Ids come from one process-wide counter and are never reused, so an id
        table emptied apart from the memo can only cause misses, never a wrong hit."""
        hit = self._row_ids.get(row)
        if hit is None:
            hit = self._row_ids[row] = next(_ROW_COUNTER)
        return hit

    def full_local(self, k: int, full: int) -> tuple[int, ...] | None:
        """Axis-local masks of the supported host generators (bitset ``full``), or None when they
        do not form block folds (then the axis is priced on its own set only, as
        ``_Evaluator.axis_time``)."""
        key = (self.bits[k], full)
        if key in self._full:
            return self._full[key]
        table = self.pricer.compress_table(self.bits[k])
        local = tuple(sorted(table[g] for g in _members(full)))
        out = local if self.pricer.is_block_fold(self.axes[k].a, local) else None
        self._full[key] = out
        return out

    def time(self, k: int, local: tuple[int, ...], p: int) -> tuple[float, int | None]:
        """(T, h) of axis k on ``local`` at multiplicity p; (inf, None) when no schedule is valid."""
        key = (self._keys[k], local, p)
        hit = self._time.get(key)
        if hit is None:
            price = self.pricer.price(self.axes[k], local, p)
            hit = self._time[key] = (float("inf"), None) if price is None else (price.time_s, price.h)
        return hit

    def new_row(self, k: int, own_bits: int, ol: tuple[int, ...], fb: int):
        """(supported local masks or None, w·T at p = 1, w·h·λ) of axis k on its own set (bitset
        ``own_bits``, local masks ``ol``) with the supported set ``fb``: the axis runs on the
        supported set when it forms block folds and is not slower (``_Evaluator.axis_time``)."""
        fl = self.full_local(k, fb) if fb != own_bits else None  # own ⊆ full: larger iff different
        w = self.axes[k].weight
        to, ho = self.time(k, ol, 1)
        if fl is not None:
            tf, hf = self.time(k, fl, 1)
            if hf is not None and (ho is None or tf <= to):
                to, ho = tf, hf
        return fl, w * to, w * (ho * self.lam if ho is not None else float("inf"))

    def leaf(self, key: tuple, chosen: list[tuple], host: int, best, bound: float | None):
        """The leaf's (obj, ports, ps), or None when its lower bound shows it cannot beat ``bound``
        (an objective already reached; Eq. 1 is monotone in p). ``chosen``: (k, option) per
        active axis; ``host``: the bitset union of their own sets; ``key`` names the leaf."""
        axes, budget, time = self.axes, self.budget, self.time
        # every leaf is visited once (the depth-first walk and the descent never repeat a key), so
        # nothing per leaf is kept; per-axis rows are memoised by (own set, supported set)
        # per row: ((k, weight, own local, own bitset, full local or None, full bitset), w·T at p = 1,
        # w·h·λ, {spare ports: w·T at the most multiplicity they allow}, row id)
        hits = []
        total = floor = 0.0
        contrib, subgroups = self._contrib, self.subgroups
        for k, (own, own_bits, ol) in chosen:
            fb = host & subgroups[k]
            # axis k's row and its w·T and w·h·λ at p = 1 depend only on (own set, supported set)
            hit = contrib[k].get((own_bits, fb))
            if hit is None:
                w = axes[k].weight
                fl, wt, wh = self.new_row(k, own_bits, ol, fb)
                hit = contrib[k][(own_bits, fb)] = ((k, w, ol, own_bits, fl, fb), wt, wh, {},
                                                    self.row_id((self._keys[k], w, ol, fl)))
            hits.append(hit)
            total += hit[1]
            floor += hit[2]
        n = host.bit_count()
        if not (n + self.min_step <= budget and (best is None or floor < best[0])):
            return (total, n, [1] * len(axes))
        spare = budget - n
        if bound is not None:
            lb = 0.0
            for (k, w, ol, ob, fl, fb), _, _, memo, _ in hits:
                wt = memo.get(spare)
                if wt is None:
                    t = time(k, ol, 1 + spare // ob.bit_count())[0]
                    if fl is not None:
                        t = min(t, time(k, fl, 1 + spare // fb.bit_count())[0])
                    wt = memo[spare] = w * t
                lb += wt
            if lb > bound:
                return None
            # The two axes of one mesh own disjoint generators (their blocks are disjoint), so the
            # spare ports pay for both their multiplicities at once: a tighter bound. Pruned only
            # against this partition's best (a leaf above it cannot change the search's state).
            if self.pairs and best is not None and self.joint_bound(hits, spare) > best[0] * (1 + 1e-12):
                return None
        rows = [h[0] for h in hits]
        # The greedy's outcome depends only on which own / supported sets each generator is in
        # (not on its mask): generators are grouped into atoms of equal membership (bitset
        # refinement) and leaves with the same atoms share the greedy's result (memo per request).
        member = _atoms(host, rows)
        ids = tuple([h[4] for h in hits])
        memo = (budget, ids, member)
        hit = self.raised.get(memo)
        if hit is None:
            hit = self.raised[memo] = self._raise(rows, ids, member, n, total)
        obj, raised, used = hit
        ps = [1] * len(axes)
        for (k, *_), p in zip(rows, raised):
            ps[k] = p
        return (obj, used, ps)

    def _raise(self, rows, ids, atoms, n: int, obj: float):
        """Greedy (Σ w·T, Eq. 1): spend leftover ports on the multiplicity step that lowers Σ w·T
        most; a generator shared by several axes takes the largest multiplicity any of them
        needs, an axis on its supported set runs at its least-multiplied generator. ``atoms``:
        (rows owning, rows supporting, generators) — generators of one atom move together;
        ``ids``: the rows' ids (``row_id``), which key the rows' terms for every greedy."""
        budget, time = self.budget, self.time
        nrows = len(rows)
        own_idx = [[i for i, m in enumerate(atoms) if r in m[0]] for r in range(nrows)]
        full_idx = [[i for i, m in enumerate(atoms) if r in m[1]] if rows[r][4] is not None else None
                    for r in range(nrows)]
        size = [m[2] for m in atoms]
        # raising row r's own generators changes its own term and those of the rows whose supported
        # set shares an atom with them; every other row keeps its term
        touched = [[q for q in range(nrows) if q == r or (full_idx[q] is not None and set(full_idx[q]) & set(own_idx[r]))]
                   for r in range(nrows)]
        terms = self._terms  # (row id, p own, p supported) -> w·T of the row

        def term(r: int, p_own: int, pg: list[int]) -> float:
            idx = full_idx[r]
            p_full = 0 if idx is None else min([pg[i] for i in idx])
            key = (ids[r], p_own, p_full)
            hit = terms.get(key)
            if hit is None:
                k, w, ol, _, fl, _ = rows[r]
                to, ho = time(k, ol, p_own)
                if fl is not None:
                    tf, hf = time(k, fl, p_full)
                    if hf is not None and (ho is None or tf <= to):
                        to = tf
                hit = terms[key] = w * to
            return hit

        ps = [1] * nrows
        pg = [1] * len(atoms)
        current = [term(r, 1, pg) for r in range(nrows)]
        used = n
        # a row whose next step does not fit never fits later: the ports that step would use only
        # grow as other rows raise shared generators, and its own step stays the same
        live = list(range(nrows))
        while True:
            best = None
            dead = []
            for r in live:
                p = ps[r] + 1
                extra = 0
                for i in own_idx[r]:
                    if pg[i] < p:
                        extra += (p - pg[i]) * size[i]
                if used + extra > budget:
                    dead.append(r)
                    continue
                trial_pg = pg[:]
                for i in own_idx[r]:
                    if trial_pg[i] < p:
                        trial_pg[i] = p
                trial_terms = current[:]
                for q in touched[r]:
                    trial_terms[q] = term(q, p if q == r else ps[q], trial_pg)
                o = 0.0  # Σ w·T summed in row order, as ``_Evaluator.objective`` does
                for t in trial_terms:
                    o += t
                if o < obj - 1e-15 and (best is None or (o, used + extra) < best[:2]):
                    best = (o, used + extra, r, trial_pg, trial_terms)
            if dead:
                live = [r for r in live if r not in dead]
            if best is None:
                return obj, tuple(ps), used
            obj, used, r, pg, current = best
            ps = ps[:]
            ps[r] += 1


def _search_partition(req, axes, bits, pricer, budget, bound: float | None = None):
    """Best (objective, ports, host as a bitset, owns, ps) for one bit partition, or None.

    Exhaustive over the product of the axes' ladders when it has at most ``MAX_LEAVES``
    combinations; otherwise coordinate descent (each axis in turn takes its best option with
    the others fixed, until nothing changes), which is deterministic but heuristic (A.7).

    Branch and bound: ``bound`` is the best objective of the partitions already searched; a leaf
    whose lower bound (every axis at the largest multiplicity the spare ports allow it alone)
    exceeds it, or exceeds this partition's best, is not raised — it cannot win. Coordinate
    descent bounds by its own best only, so its path is the unpruned one."""
    active = [k for k, ax in enumerate(axes) if ax.active]
    subgroups = pricer.subgroups(bits)
    search = _LeafSearch(req, axes, bits, pricer, budget, active, subgroups)
    memos = {k: _aligned_key(axes[k], k, bits, pricer, budget, subgroups) for k in active}
    ladders = {k: _ladder_options(search, k, budget, memos[k]) for k in active}
    state = {"best": None}

    def leaf(key: tuple, chosen: list[tuple], host: int, outer: float | None):
        if host.bit_count() > budget:
            return None
        best = state["best"]
        limit = best[0] if best is not None else None
        if outer is not None and (limit is None or outer < limit):
            limit = outer
        cand = search.leaf(key, chosen, host, best, limit)
        if cand is None:
            return None
        if best is None or cand[:2] < best[:2]:  # only a new best needs its sets kept
            cand = state["best"] = (cand[0], cand[1], host, [o for _, (o, _, _) in chosen], cand[2])
        return cand  # (obj, ports, ...): the descent compares only its first two

    def result():
        best = state["best"]
        if best is None:
            return None
        obj, used, host, chosen_owns, ps = best
        owns = [frozenset()] * len(axes)
        for k, own in zip(active, chosen_owns):
            owns[k] = own
        return (obj, used, host, owns, ps)  # host as a bitset: the caller spells out the winner's only

    size = 1
    for k in active:
        size *= len(ladders[k])
    if size <= MAX_LEAVES:
        chosen: list[tuple] = []
        index: list[int] = []

        def dfs(i: int, host: int) -> None:
            if i == len(active):
                leaf(tuple(index), chosen, host, bound)
                return
            k = active[i]
            for j, opt in ladders[k]:
                h = host | opt[1]
                if h.bit_count() <= budget:
                    chosen.append((k, opt))
                    index.append(j)
                    dfs(i + 1, h)
                    chosen.pop()
                    index.pop()

        dfs(0, 0)
        return result()
    kernel, words = load_descent_kernel(), (req.world + 63) // 64
    if kernel is not None and fits_kernel(active, ladders, words):
        state["best"] = _compiled_descent(kernel, search, ladders, memos, budget, words)
        return result()
    # Coordinate descent from the plain cube (every ladder starts with its cheapest option). A leaf
    # already tried in this descent is not tried again: it did not improve on the best of its time,
    # the best only falls, and a leaf's candidate can only rise as the best falls (a lower best
    # skips the greedy or prunes it), so it cannot improve now; skipping it changes nothing.
    picks = [0] * len(active)  # option index per active axis
    tried: set[tuple[int, ...]] = set()

    def at(index: list[int]) -> tuple[tuple, list[tuple], int]:
        host = 0
        chosen = []
        for k, j in zip(active, index):
            opt = ladders[k][j][1]
            host |= opt[1]
            chosen.append((k, opt))
        return tuple(index), chosen, host

    tried.add(tuple(picks))
    current = leaf(*at(picks), None)
    if current is None:
        return None
    for _ in range(2 * len(active) + 2):
        changed = False
        for i, k in enumerate(active):
            base = None  # the current picks' (chosen, host of the other axes), while picks hold
            for j in range(len(ladders[k])):
                trial = list(picks)
                trial[i] = j
                key = tuple(trial)
                if key in tried:
                    continue
                tried.add(key)
                if base is None:
                    _, chosen_now, _ = at(picks)
                    rest = 0
                    for x, (_, opt) in enumerate(chosen_now):
                        if x != i:
                            rest |= opt[1]
                    base = (chosen_now, rest)
                opt = ladders[k][j][1]
                chosen = list(base[0])
                chosen[i] = (k, opt)
                cand = leaf(key, chosen, base[1] | opt[1], None)
                if cand is not None and cand[:2] < current[:2]:
                    current, picks, changed, base = cand, trial, True, None
        if not changed:
            break
    return result()


def _ladder_options(search: _LeafSearch, k: int, budget: int, memo: tuple) -> list[tuple[int, tuple]]:
    """(index, ``_LeafSearch.option``) of every option of axis k's aligned ladder (memo: its key)."""
    key = ("options", memo)
    hit = search.pricer.ladders.get(key)
    if hit is None:
        aligned = _aligned_ladder(search.axes[k], k, search.bits, search.pricer, budget, memo)
        hit = search.pricer.ladders[key] = [(i, search.option(k, o)) for i, o in enumerate(aligned)]
    return hit


def _compiled_descent(kernel, search: _LeafSearch, ladders: dict, memos: dict, budget: int, words: int):
    """The coordinate descent below, in C (``fabrics.planner.descent``): the same leaves in the same
    order with the same floats; its best leaf as (obj, ports, host, own sets, ps), or None.
    ``memos``: the ladders' ``_aligned_key`` per active axis."""
    pricer, axes, bits, req, active = search.pricer, search.axes, search.bits, search.req, search.active
    tables = pricer.kernel_tables

    def options(k: int) -> tuple[list[bytes], list[int]]:  # the ladder's bitsets and set ids
        return ([bitset_bytes(opt[1], words) for _, opt in ladders[k]],
                [tables.set_id(axes[k].a, opt[2]) for _, opt in ladders[k]])

    def full(r: int, fb: int) -> int:  # ``new_row``'s supported local masks, as a set id (-1: None)
        k = active[r]
        local = search.full_local(k, fb)
        return -1 if local is None else tables.set_id(axes[k].a, local)

    def time(r: int, set_id: int, p: int) -> tuple[float, int]:
        t, h = search.time(active[r], tables.sets[set_id], p)
        return t, -1 if h is None else h

    per_axis = []  # (weight, rows, supported-set ids, times, subgroup bitset) of each axis on its bits
    for k in active:
        hit = pricer.kernel_rows.get((k, bits[k]))
        if hit is None:
            hit = pricer.kernel_rows[(k, bits[k])] = (
                axes[k].weight, kernel.RowTable(words, req.ports), tables.full_table(kernel, bits[k], words),
                tables.time_table(kernel, (req.hop_latency_s, req.link_rate_Bps, search._keys[k])),
                bitset_bytes(search.subgroups[k], words))
        per_axis.append(hit)
    kernel_options = [tables.options((memos[k], words), lambda k=k: options(k)) for k in active]
    weights, rows, fulls, times, subgroups = (list(column) for column in zip(*per_axis))
    found = kernel.descend(words, budget, search.min_step, req.hop_latency_s, weights, rows, fulls, times,
                           [o[0] for o in kernel_options], [o[1] for o in kernel_options], subgroups,
                           list(search.singles), list(search.pairs), full, time)
    if found is None:
        return None
    picks, obj, used, row_ps = found
    host, owns, ps = 0, [], [1] * len(axes)
    for k, j, p in zip(active, picks, row_ps):
        own, own_bits, _ = ladders[k][j][1]
        host |= own_bits
        owns.append(own)
        ps[k] = p
    return (obj, used, host, owns, ps)


def _colour(host_pg: list[tuple[int, int]], ports: int, world: int) -> tuple[int | None, ...] | None:
    """Ports ← generators (p_g copies each); None if the colouring is not proper."""
    assignment: list[int | None] = []
    for g, p in host_pg:
        assignment.extend([g] * p)
    if len(assignment) > ports:
        return None
    for g in assignment:  # each port must carry a perfect matching x <-> x^g
        if g is None or g == 0 or g >= world:
            return None
    return tuple(assignment) + (None,) * (ports - len(assignment))


def shared_host_plan(req: PlanRequest) -> Plan:
    axes = _axes(req)
    if not any(ax.active for ax in axes):
        raise SpecError("no mesh axis carries a collective with a positive payload; nothing to plan")
    pricer = _Pricer(req)
    partition_sets = _partition_sets(req)
    attempts = 0
    for budget in range(req.ports, req.n_bits - 1, -1):
        attempts += 1
        best = None
        for parts in partition_sets:
            bits = [b for mesh in parts for b in mesh]
            found = _search_partition(req, axes, bits, pricer, budget, None if best is None else best[0][0])
            if found is not None and (best is None or found[:2] < best[0][:2]):
                best = (found, parts, bits)
        if best is None:
            continue
        (obj, used, host_bits, owns, ps), parts, bits = best
        host = frozenset(_members(host_bits))
        pg = _generator_multiplicities(owns, ps)
        gens = tuple((g, pg.get(g, 1)) for g in sorted(host))
        port_masks = _colour(list(gens), req.ports, req.world)
        if port_masks is None:
            continue  # replan with one port fewer
        ev = _Evaluator(req, axes, bits, pricer)
        plans = []
        for k, ax in enumerate(axes):
            plans.append(_axis_plan(ev, k, ax, bits[k], host, owns, ps, pg))
        return Plan(request_hash=request_hash(req), allocation="shared_host", world=req.world, ports=req.ports,
                    total_time_s=sum(a.weight * a.time_s for a in plans), host_degree=len(host), ports_used=used,
                    axes=tuple(plans), generators=gens, port_masks=port_masks, partitions=parts,
                    colouring_attempts=attempts)
    raise SpecError(f"no shared-host plan fits ports={req.ports}; raise ports (≥ log2(world) plus folds)")


def _axis_plan(ev: _Evaluator, k: int, ax: _Axis, bits, host, owns, ps, pg) -> AxisPlan:
    if not ax.active:
        return AxisPlan(mesh=ax.mesh, axis=ax.axis, size=1 << ax.a, bits=bits, collective=ax.collective,
                        payload_bytes=ax.sigma, weight=ax.weight, topology="none", degree=0, phases=0,
                        multiplicity=0, schedule="none", time_s=0.0, volume="0")
    t, price, uses_full = ev.axis_time(k, host, owns[k], pg, ps[k])
    block = ev.blocks[k]
    gens = tuple(sorted(g for g in host if g & ~block == 0)) if uses_full else tuple(sorted(owns[k]))
    p = min((pg.get(g, 1) for g in gens), default=1) if uses_full else ps[k]
    return AxisPlan(mesh=ax.mesh, axis=ax.axis, size=1 << ax.a, bits=bits, collective=ax.collective,
                    payload_bytes=ax.sigma, weight=ax.weight, topology=price.topology, degree=len(gens),
                    phases=price.h, multiplicity=p, schedule=price.schedule, time_s=t, volume=str(price.v),
                    generators=gens)
