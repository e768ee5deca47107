"""Phase builders shared by the schedule families (paper 003, Appendix A.3, C.3).

Every builder returns a list of phases, each a list of ``Transfer``. Block-moving builders
(all-gather style) name blocks by id: block ``piece * N + origin`` for gathers, and
``(piece * N + src) * N + dst`` for all-to-all. Reduce-scatters are the time reversal of a
gather in which every rank receives every block exactly once (the classic duality): reversing
the phases and the direction of every transfer, with ``reduce=True``, sums each block towards
its origin. RS+AG all-reduces are the reversal followed by the gather itself.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import product

import numpy as np

from collectives.schedule import Phase, Schedule, Transfer
from collectives.topology import invariants, register_cache, topology_key
from collectives.trees import balanced_tree

Phases = list[list[Transfer]]


# chunk_fraction * (number of chunks), by (numerator, denominator, count): a schedule has
# hundreds of thousands of transfers but a handful of distinct sizes, and Fraction products
# (gcd + a new object each) were a third of the building time; equal values share one object.
_SIZES: dict[tuple[int, int, int], Fraction] = register_cache({})


def _sized(chunk_fraction: Fraction, count: int) -> Fraction:
    key = (chunk_fraction.numerator, chunk_fraction.denominator, count)
    fraction = _SIZES.get(key)
    if fraction is None:
        fraction = _SIZES[key] = chunk_fraction * count
    return fraction


def _t(src, dst, edge, chunks, chunk_fraction, reduce=False) -> Transfer:
    chunks = tuple(chunks)
    return Transfer(src=int(src), dst=int(dst), edge=int(edge), fraction=_sized(chunk_fraction, len(chunks)),
                    chunks=chunks, reduce=reduce)


def merge(*phase_lists: Phases) -> Phases:
    """Run several independent phase lists side by side (pieces of a parallel schedule)."""
    length = max(len(p) for p in phase_lists)
    return [[t for p in phase_lists if k < len(p) for t in p[k]] for k in range(length)]


def reverse_to_reduce(topo, phases: Phases) -> Phases:
    """Time-reverse a gather: each transfer flows back along the same link and reduces."""
    out = []
    for phase in reversed(phases):
        out.append([Transfer(src=t.dst, dst=t.src, edge=int(topo.sub(t.src, t.dst)), fraction=t.fraction,
                             chunks=t.chunks, reduce=True) for t in phase])
    return out


def as_store(phases: Phases) -> Phases:
    return [[Transfer(src=t.src, dst=t.dst, edge=t.edge, fraction=t.fraction, chunks=t.chunks, reduce=False)
             for t in ph] for ph in phases]


def to_schedule(name, collective, topo, phases: Phases, n_chunks, form, chunk_fraction, pieces=1, **meta) -> Schedule:
    return Schedule(
        name=name, collective=collective, n_ranks=topo.n_ranks, n_chunks=n_chunks,
        phases=tuple(Phase(transfers=tuple(p)) for p in phases if p),
        meta={"form": form, "chunk_fraction": chunk_fraction, "pieces": pieces,
              "topology": topo.describe(), **meta},
    )


# ---------------------------------------------------------------------------------------
# gathers (blocks move, receivers store)
# ---------------------------------------------------------------------------------------

def ag_tiling(topo, order, piece: int, chunk_fraction: Fraction) -> Phases:
    """Coset-layer gather: in phase j every rank sends all blocks it holds (origins x + A_{j-1},
    A_j = T_1 + ... + T_j) to each neighbour across layer S_j."""
    n = topo.n_ranks
    held = [0]
    phases = []
    for layer in order:
        phase = []
        for x in range(n):
            blocks = sorted(piece * n + (x ^ a) for a in held)
            for s in layer:
                phase.append(_t(x, x ^ s, s, blocks, chunk_fraction))
        phases.append(phase)
        held = [a ^ t for t in (0,) + tuple(layer) for a in held]
    return phases


def ag_tiling_parallel(topo, order, chunk_fraction: Fraction) -> Phases:
    """l pieces; piece i runs the layers in the order rotated by i (every layer busy every phase)."""
    ell = len(order)
    return merge(*(ag_tiling(topo, [order[(i + m) % ell] for m in range(ell)], i, chunk_fraction / ell)
                   for i in range(ell)))


def ag_flood(topo, chunk_fraction: Fraction) -> Phases:
    """One-shot: in phase k every rank forwards every block it holds (its ball of radius k-1) to
    every neighbour, so contributions cross the same links many times (Appendix C.3.1)."""
    inv = invariants(topo)
    n = topo.n_ranks
    ball: list[int] = []
    phases = []
    for k in range(1, inv.diameter + 1):
        ball = ball + list(inv.spheres[k - 1])
        phase = []
        for x in range(n):
            blocks = sorted(int(topo.sub(x, e)) for e in ball)  # origins o with x - o in the ball
            for g in topo.generators:
                phase.append(_t(x, topo.add(x, g), g, blocks, chunk_fraction))
        phases.append(phase)
    return phases


def ag_tree(topo, chunk_fraction: Fraction) -> Phases:
    """One-shot DVO: each block follows the balanced shortest-path tree, arriving once per rank."""
    inv = invariants(topo)
    tree = balanced_tree(topo)
    n = topo.n_ranks
    xor = topo.kind == "xor"
    phases = []
    for k in range(1, inv.diameter + 1):
        by_gen: dict[int, list[int]] = {}
        for d in inv.spheres[k]:
            by_gen.setdefault(tree.last_hop[d], []).append(d)
        gens = [(int(g), deltas, _sized(chunk_fraction, len(deltas))) for g, deltas in sorted(by_gen.items())]
        phase = []
        for x in range(n):
            for g, deltas, size in gens:
                y = topo.add(x, g)
                # origins y - d of the blocks y receives now (on (Z2)^n: y ^ d); hot loop of the
                # planned-topology pricing, so the xor case skips the generic method call
                origins = sorted([y ^ d for d in deltas] if xor else [int(topo.sub(y, d)) for d in deltas])
                phase.append(Transfer(src=x, dst=int(y), edge=g, fraction=size, chunks=tuple(origins)))
        phases.append(phase)
    return phases


def ag_direct(topo, chunk_fraction: Fraction) -> Phases:
    """Complete graph: every rank sends its block to every other rank in one phase."""
    n = topo.n_ranks
    return [[_t(x, topo.add(x, g), g, (x,), chunk_fraction) for x in range(n) for g in topo.generators]]


_CYCLES: dict = register_cache({})


def hamiltonian_cycle(topo) -> tuple[int, ...] | None:
    key = topology_key(topo)
    if key not in _CYCLES:
        _CYCLES[key] = _hamiltonian_cycle(topo)
    return _CYCLES[key]


def _hamiltonian_cycle(topo) -> tuple[int, ...] | None:
    """Ring order: x -> x + o for an offset o coprime to n (circulant), or the reflected Gray
    code over a basis of generators (Cayley (Z2)^n; Table 7's 'Gray-code Hamiltonian cycle')."""
    import math

    if topo.kind == "cyclic":
        for o in sorted(topo.offsets, key=lambda o: (abs(o), o)):
            if math.gcd(o, topo.n) == 1:
                return tuple((i * o) % topo.n for i in range(topo.n))
        return None
    from collectives.layers import basis_tiling

    basis = [layer[0] for layer in basis_tiling(topo)]
    gray = np.arange(topo.n_ranks, dtype=np.int64)
    gray ^= gray >> 1
    labels = np.zeros(topo.n_ranks, dtype=np.int64)
    for j, b in enumerate(basis):  # label = XOR of the basis vectors on the Gray code's set bits
        labels ^= ((gray >> j) & 1) * b
    return tuple(labels.tolist())


def ag_ring(topo, cycle, chunk_fraction: Fraction) -> Phases:
    n = len(cycle)
    phases = []
    for t in range(n - 1):
        phase = []
        for p in range(n):
            src, dst = cycle[p], cycle[(p + 1) % n]
            phase.append(_t(src, dst, topo.sub(dst, src), (cycle[(p - t) % n],), chunk_fraction))
        phases.append(phase)
    return phases


# ---------------------------------------------------------------------------------------
# all-reduce by partial sums exchanged over layers (receivers reduce)
# ---------------------------------------------------------------------------------------

def ar_layers(topo, order, pieces_rotated: bool) -> Phases:
    """Coset-factored (A.3): in phase j every rank sends its partial sum to each neighbour across
    S_j and adds what it receives; with ``pieces_rotated`` the buffer is cut into l pieces and
    piece i runs the layers rotated by i (coset-factored parallel: v drops from l*sigma to sigma)."""
    n = topo.n_ranks
    ell = len(order)
    pieces = ell if pieces_rotated else 1
    frac = _sized(Fraction(1, pieces), 1)
    phases = []
    for j in range(ell):
        phase = []
        for i in range(pieces):
            layer = [int(s) for s in order[(i + j) % ell]]
            chunk = (i,)
            for x in range(n):
                for s in layer:
                    phase.append(Transfer(src=x, dst=x ^ s, edge=s, fraction=frac, chunks=chunk, reduce=True))
        phases.append(phase)
    return phases


# ---------------------------------------------------------------------------------------
# all-to-all
# ---------------------------------------------------------------------------------------

def digits(order) -> dict[int, tuple[int, ...]]:
    """Unique decomposition delta = t_1 ^ ... ^ t_l with t_j in {0} u S_j (direct sum)."""
    out: dict[int, tuple[int, ...]] = {}
    for combo in product(*[(0,) + tuple(layer) for layer in order]):
        v = 0
        for c in combo:
            v ^= c
        out[v] = combo
    return out


def a2a_tiling(topo, order, piece: int, pieces: int, base_digits=None) -> Phases:
    """Radix Bruck on coset layers: the block from s to d = s ^ delta moves by the j-th digit of
    delta in phase j (Appendix A.3, C.3.2); each edge carries N/r_j blocks of sigma/N."""
    n = topo.n_ranks
    dig = base_digits or digits(order)
    layer_pos = {}
    for j, layer in enumerate(order):
        for s in layer:
            layer_pos[s] = j
    frac = Fraction(1, n * pieces)
    ell = len(order)
    phases = []
    for j in range(ell):
        by_gen: dict[int, list[tuple[int, int]]] = {}
        for delta, dg in dig.items():
            # digits are indexed by the *base* layer order; this piece visits order[j] now
            t = dg[j]
            if t == 0:
                continue
            prefix = 0
            for m in range(j):
                prefix ^= dg[m]
            by_gen.setdefault(t, []).append((delta, prefix))
        gens = [(int(g), items, _sized(frac, len(items))) for g, items in sorted(by_gen.items())]
        base = piece * n
        phase = []
        for x in range(n):
            for g, items, size in gens:
                blocks = sorted([(base + (x ^ pre)) * n + (x ^ pre ^ delta) for delta, pre in items])
                phase.append(Transfer(src=x, dst=x ^ g, edge=g, fraction=size, chunks=tuple(blocks)))
        phases.append(phase)
    return phases


def a2a_tiling_parallel(topo, order) -> Phases:
    ell = len(order)
    pieces = []
    for i in range(ell):
        rotated = [order[(i + m) % ell] for m in range(ell)]
        pieces.append(a2a_tiling(topo, rotated, i, ell))
    return merge(*pieces)


def a2a_tree(topo) -> Phases:
    """Direct all-to-all: every block follows its balanced shortest-path tree route."""
    inv = invariants(topo)
    tree = balanced_tree(topo)
    n = topo.n_ranks
    frac = Fraction(1, n)
    routes = {d: tree.route(d, topo) for sph in inv.spheres[1:] for d in sph}
    phases = []
    for k in range(1, inv.diameter + 1):
        by_gen: dict[int, list[tuple[int, int]]] = {}
        for d, r in routes.items():
            if len(r) < k:
                continue
            prefix = 0
            for g in r[: k - 1]:
                prefix = topo.add(prefix, g)
            by_gen.setdefault(r[k - 1], []).append((d, prefix))
        phase = []
        for x in range(n):
            for g, items in sorted(by_gen.items()):
                blocks = []
                for d, pre in items:
                    s = topo.sub(x, pre)
                    blocks.append(s * n + topo.add(s, d))
                phase.append(_t(x, topo.add(x, g), g, sorted(int(b) for b in blocks), frac))
        phases.append(phase)
    return phases
