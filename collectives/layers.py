"""Coset layers: tilings of (Z2)^n by generator layers (paper 003, Appendix A.3, Table 2).

A tiling is a tuple of layers S_1..S_l (disjoint sets of generators) whose sets T_j = {0} u S_j
form a direct sum T_1 (+) ... (+) T_l = (Z2)^n, i.e. prod_j |T_j| = N and every label has exactly
one decomposition. Coset-factored, RS+AG and radix Bruck schedules exchange over one layer per
phase, so a tiling of l layers costs l phases (2l for RS+AG). On a block fold the layers are the
complete layers K_{2^kj}; on folds such as Q4+1111 a layer may be a *transversal* of the
subspace spanned by the others (e.g. {0001, 0010, 1111} with {0100}, {1000}), which is how
Table 4 reaches 3 phases there.

Search (exact for the tilings it considers): layers are complete subspaces (every non-zero
element a generator) plus at most one transversal layer, by iterative deepening on l. All
tilings of the minimum length are returned (capped), and each schedule picks its own best by
its volume objective. Results are cached per topology.
"""

from __future__ import annotations

from fractions import Fraction
from functools import wraps
from itertools import product

from collectives.caches import register_cache, topology_key

Tiling = tuple[tuple[int, ...], ...]

MAX_SUBSPACES = 4000
MAX_TILINGS = 256

_TILINGS: dict[tuple, tuple[Tiling, ...]] = register_cache({})
_BEST: dict[tuple, Tiling] = register_cache({})
# Volumes depend on the ordered radices alone (few distinct tuples; the OCS planner prices
# thousands of sub-topologies with them): (function name, radices, kind) -> Fraction / int.
_BY_RADICES: dict[tuple, object] = register_cache({})


def _by_radices(fn):
    """``fn(order_radices, *args)`` kept per (radices, args): its values are immutable."""
    name = fn.__name__

    @wraps(fn)
    def cached(order_radices, *args):
        r = tuple(order_radices)
        key = (name, r, *args)
        hit = _BY_RADICES.get(key)
        if hit is None:
            hit = _BY_RADICES[key] = fn(r, *args)
        return hit

    return cached


def _reduce(v: int, basis: list[int]) -> int:
    for b in basis:
        v = min(v, v ^ b)
    return v


def _echelon(vectors) -> list[int]:
    basis: list[int] = []
    for v in vectors:
        v = _reduce(v, basis)
        if v:
            basis.append(v)
            basis.sort(reverse=True)
    return basis


def _span(basis: list[int]) -> list[int]:
    elems = [0]
    for b in basis:
        elems += [e ^ b for e in elems]
    return elems


def complete_subspaces(gens: frozenset[int]) -> list[tuple[int, ...]]:
    """Subspaces H with H \\ {0} contained in the generator set, as sorted tuples of non-zero
    elements, largest first (bounded by MAX_SUBSPACES)."""
    level = {frozenset((g,)) for g in gens}
    found: set[frozenset[int]] = set(level)
    while level and len(found) < MAX_SUBSPACES:
        nxt: set[frozenset[int]] = set()
        for h in level:
            for g in gens:
                if g in h:
                    continue
                grown = h | {g} | {e ^ g for e in h}
                if grown <= gens and grown not in found:
                    nxt.add(frozenset(grown))
        found |= nxt
        level = nxt
    return sorted((tuple(sorted(h)) for h in found), key=lambda t: (-len(t), t))


def _transversal(basis: list[int], gens, used: set[int], n_bits: int) -> tuple[int, ...] | None:
    """One generator per non-zero coset of span(basis), or None if some coset has none."""
    need = (1 << (n_bits - len(basis))) - 1
    reps: dict[int, int] = {}
    for g in sorted(gens):
        if g in used:
            continue
        r = _reduce(g, basis)
        if r and r not in reps:
            reps[r] = g
    if len(reps) < need:
        return None
    return tuple(sorted(reps.values()))


def _components(topo) -> list[int]:
    """Bit blocks that no generator straddles (union-find over the bits of each generator).
    The group is the direct sum of these blocks and every generator lies in one of them, so
    tilings of the blocks concatenate into a tiling of the whole (e.g. Q9 with a 111 fold in
    each 3-bit block tiles as three folded Q3s: 2 + 2 + 2 layers)."""
    parent = list(range(topo.n_bits))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for g in topo.generators:
        bits = [b for b in range(topo.n_bits) if g >> b & 1]
        for b in bits[1:]:
            parent[find(b)] = find(bits[0])
    blocks: dict[int, int] = {}
    for b in range(topo.n_bits):
        blocks[find(b)] = blocks.get(find(b), 0) | (1 << b)
    return sorted(blocks.values())


def _expand(layer, mask: int) -> tuple[int, ...]:
    bits = [b for b in range(mask.bit_length()) if mask >> b & 1]
    return tuple(sorted(sum(((g >> i) & 1) << b for i, b in enumerate(bits)) for g in layer))


def tilings(topo) -> tuple[Tiling, ...]:
    """All tilings of minimum length found by the search (empty on circulants)."""
    if topo.kind != "xor":
        return ()
    key = topology_key(topo)
    hit = _TILINGS.get(key)
    if hit is not None:
        return hit
    comps = _components(topo)
    if len(comps) > 1:
        per_block = []
        for mask in comps:
            reps: dict[tuple, Tiling] = {}
            for t in tilings(topo.sub_topology(mask)):
                reps.setdefault(tuple(sorted(radices(t))), tuple(_expand(layer, mask) for layer in t))
            per_block.append(list(reps.values()))
        found = []
        for combo in product(*per_block):
            layers = [layer for t in combo for layer in t]
            found.append(tuple(sorted(layers, key=lambda s: (-len(s), s))))
            if len(found) >= MAX_TILINGS:
                break
        result = tuple(found)
        _TILINGS[key] = result
        return result
    n = topo.n_bits
    gens = frozenset(topo.generators)
    found: list[Tiling] = []
    # l = 1: one complete layer (the group is K_N)
    if len(gens) == (1 << n) - 1:
        found.append((tuple(sorted(gens)),))
    else:
        subspaces = complete_subspaces(gens)
        dims = [len(s).bit_length() for s in subspaces]  # |H|-1 = 2^dim - 1
        bases = [_echelon(s) for s in subspaces]
        max_dim = max(dims)
        for length in range(1, n + 1):
            seen: set[frozenset] = set()
            for m in (length - 1, length):
                if m < 0:
                    continue
                _search(subspaces, dims, bases, m, length, n, max_dim, gens, found, seen)
            if found:
                break
    result = tuple(found[:MAX_TILINGS])
    _TILINGS[key] = result
    return result


def _search(subspaces, dims, bases, m, length, n, max_dim, gens, found, seen) -> None:
    """m subspace layers, plus one transversal layer if m == length - 1."""
    with_transversal = m == length - 1
    # a transversal of H has N/|H| elements, all generators: bound on the dimension of H
    min_dim_total = n if not with_transversal else max(0, n - (len(gens) + 1).bit_length() + 1)

    def rec(start: int, chosen: list[int], basis: list[int], dim_total: int) -> None:
        if len(found) >= MAX_TILINGS:
            return
        if len(chosen) == m:
            if not with_transversal:
                if dim_total == n:
                    _add(tuple(subspaces[i] for i in chosen))
                return
            if dim_total >= n or dim_total < min_dim_total:
                return
            used = {g for i in chosen for g in subspaces[i]}
            t = _transversal(basis, gens, used, n)
            if t is not None:
                _add(tuple(subspaces[i] for i in chosen) + (t,))
            return
        remaining = m - len(chosen)
        if dim_total + remaining * max_dim < min_dim_total:
            return
        for i in range(start, len(subspaces)):
            d = dims[i]
            if dim_total + d > n or (dim_total + d == n and len(chosen) + 1 < m):
                continue
            merged = _echelon(basis + bases[i])
            if len(merged) != dim_total + d:
                continue  # not a direct sum
            rec(i + 1, chosen + [i], merged, dim_total + d)

    def _add(tiling: Tiling) -> None:
        canon = tuple(sorted(tiling, key=lambda s: (-len(s), s)))
        k = frozenset(canon)
        if k not in seen:
            seen.add(k)
            found.append(canon)

    rec(0, [], [], 0)


# ---------------------------------------------------------------------------------------
# Per-schedule choice among the minimum tilings (volume objectives of Eq. 4 and A.3)
# ---------------------------------------------------------------------------------------

def radices(tiling: Tiling) -> tuple[int, ...]:
    return tuple(len(s) + 1 for s in tiling)


@_by_radices
def rs_volume(order_radices) -> Fraction:
    """Reduce-scatter over layers in this order: sum_j prod_{k<=j} 1/r_k (half of Eq. 4)."""
    total, prod = Fraction(0), 1
    for r in order_radices:
        prod *= r
        total += Fraction(1, prod)
    return total


def rotated_max_volume(order_radices, per_phase) -> Fraction:
    """Parallel variants: piece i (of l) runs the layers in the order rotated by i; each phase
    every layer carries exactly one piece; the phase costs its most loaded layer (Eq. 10)."""
    rs = list(order_radices)
    ell = len(rs)
    total = Fraction(0)
    for j in range(ell):
        total += max(per_phase([rs[(i + m) % ell] for m in range(j + 1)]) for i in range(ell)) / ell
    return total


@_by_radices
def parallel_pieces(order_radices, kind: str) -> int:
    """How many rotated pieces the parallel RS+AG / coset all-gather use: l (one per layer), or 1
    when rotation would not pay. On uniform folds rotation divides the volume by l (Eq. 4 / l);
    on strongly mixed radices a piece that starts on a narrow layer can cost more than it saves
    (e.g. radices 8, 4, 2: rotated 41/96 sigma against 11/32 sigma for RS+AG), and then the plain
    order is kept. Closed form and builder both follow this choice."""
    r = tuple(order_radices)
    if kind == "rs":
        rotated, plain = rotated_max_volume(r, _rs_piece), rs_volume(r)
    else:
        rotated, plain = rotated_max_volume(r, _ag_piece), ag_volume_blocks(r)
    return len(r) if rotated <= plain else 1


@_by_radices
def parallel_volume(order_radices, kind: str) -> Fraction:
    """Volume of the parallel variant (RS half for kind='rs', in sigma; blocks for kind='ag')."""
    r = tuple(order_radices)
    if parallel_pieces(r, kind) == 1:
        return rs_volume(r) if kind == "rs" else ag_volume_blocks(r)
    return rotated_max_volume(r, _rs_piece if kind == "rs" else _ag_piece)


def best_tiling(topo, objective: str) -> Tiling:
    """The tiling a schedule uses, ordered for that schedule; () if none exists.

    objectives: ``min_ports`` (coset-factored: fewest generators driven), ``rs`` (RS+AG,
    Eq. 4, largest radix first), ``rs_parallel``, ``ag`` (coset-layer all-gather, smallest radix
    first), ``ag_parallel``, ``bruck`` (sum 1/r_j), ``bruck_parallel`` (narrowest layer).
    """
    key = (topology_key(topo), objective)
    hit = _BEST.get(key)
    if hit is not None:
        return hit
    cands = tilings(topo)
    if not cands:
        _BEST[key] = ()
        return ()

    def ordered(t: Tiling) -> Tiling:
        if objective in ("ag", "ag_parallel"):
            return tuple(sorted(t, key=lambda s: (len(s), s)))
        return tuple(sorted(t, key=lambda s: (-len(s), s)))

    def score(t: Tiling):
        r = radices(t)
        if objective == "min_ports":
            return (sum(r),)
        if objective == "rs":
            return (rs_volume(r), sum(r))
        if objective == "rs_parallel":
            return (parallel_volume(r, "rs"), sum(r))
        if objective == "ag":
            return (ag_volume_blocks(r), sum(r))
        if objective == "ag_parallel":
            return (parallel_volume(r, "ag"), sum(r))
        if objective == "bruck":
            return (sum(Fraction(1, x) for x in r), sum(r))
        if objective == "bruck_parallel":
            return (Fraction(1, min(r)), sum(r))
        raise ValueError(objective)

    # the objectives depend on the (ordered) radices only: score one tiling per radix tuple
    groups: dict[tuple, Tiling] = {}
    for t in cands:
        o = ordered(t)
        r = radices(o)
        if r not in groups or o < groups[r]:
            groups[r] = o
    best = min(groups.values(), key=lambda t: (score(t), t))
    _BEST[key] = best
    return best


def _rs_piece(prefix_radices) -> Fraction:
    p = 1
    for r in prefix_radices:
        p *= r
    return Fraction(1, p)


def _ag_piece(prefix_radices) -> Fraction:
    # all-gather phase j sends prod_{k<j} r_k blocks (in units of sigma/N, scaled by caller)
    p = 1
    for r in prefix_radices[:-1]:
        p *= r
    return Fraction(p)


@_by_radices
def ag_volume_blocks(order_radices) -> Fraction:
    """Coset-layer all-gather: sum_j prod_{k<j} r_k blocks of sigma/N each."""
    total, prod = Fraction(0), 1
    for r in order_radices:
        total += prod
        prod *= r
    return Fraction(total)


def basis_tiling(topo) -> Tiling:
    """Single-generator layers over a basis (unit masks first): recursive doubling, Bruck,
    halving-doubling. Unit masks are preferred so these schedules run on the base cube."""
    basis: list[int] = []
    chosen: list[int] = []
    for g in sorted(topo.generators, key=lambda g: (bin(g).count("1"), g)):
        r = _reduce(g, basis)
        if r:
            basis = _echelon(basis + [g])
            chosen.append(g)
    return tuple((g,) for g in chosen)
