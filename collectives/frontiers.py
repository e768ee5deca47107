"""Diameter frontier and schedulable frontier per axis size (paper 003, Figure 11, Appendix A.2).

- Schedulable frontier: the fewest coset layers (phases of the coset-factored schedules) a
  folded cube of degree k allows. A tiling into l layers of sizes 2^a_j (sum a_j = n) costs
  sum_j (2^a_j - 1) generators, minimised by a balanced split, so this is pure arithmetic.
  Size 64: 3 layers from degree 9, 2 layers only from degree 14 (K8□K8).
- Diameter frontier: the smallest diameter of any Cayley graph of (Z2)^n with k generators (any
  schedule needs at least that many phases). This is the covering-radius problem of linear
  codes; with the unit masks fixed (no loss of generality: GL(n, 2) preserves diameters) the
  extra generators are searched exhaustively when there are at most ``EXHAUSTIVE_LIMIT``
  candidate sets, else by a seeded local search (an upper bound). For size 64 the search finds
  diameter 2 at degree 13, the paper's value, and the sphere-covering bound rules out k <= 10.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

from collectives.caches import register_cache
from collectives.errors import SpecError

EXHAUSTIVE_LIMIT = 30_000
_FRONTIER: dict[tuple, dict] = register_cache({})


def _bits_of(axis_size: int) -> int:
    if isinstance(axis_size, bool) or not isinstance(axis_size, int) or axis_size < 2 or axis_size & (axis_size - 1):
        raise SpecError(f"axis size {axis_size!r} must be a power of two >= 2 (labels are bit strings)")
    return axis_size.bit_length() - 1


def min_degree_for_layers(n_bits: int, layers: int) -> int:
    """Fewest generators of an l-layer tiling of (Z2)^n: balanced block fold."""
    q, r = divmod(n_bits, layers)
    return r * ((1 << (q + 1)) - 1) + (layers - r) * ((1 << q) - 1)


def schedulable_frontier(axis_size: int, degree: int) -> int | None:
    """Fewest coset layers at this degree; None below degree n (graph disconnected)."""
    n = _bits_of(axis_size)
    if degree < n:
        return None
    for layers in range(1, n + 1):
        if min_degree_for_layers(n, layers) <= degree:
            return layers
    return n


def _uncovered(extra, n, radius, perms) -> int:
    gens = list(range(n)) + list(extra)
    reach = np.zeros(1 << n, dtype=bool)
    reach[0] = True
    idx = perms[[1 << g for g in range(n)] + list(extra)]  # neighbour index per generator
    del gens
    for _ in range(radius):
        reach = reach | reach[idx].any(axis=0)
    return int((~reach).sum())


def _sphere_bound(n: int, k: int, radius: int) -> bool:
    return sum(math.comb(k, i) for i in range(radius + 1)) >= 1 << n


def _find(n: int, k: int, radius: int, seed: int = 0):
    """A generator set of size k (unit masks + k-n folds) with diameter <= radius, or None."""
    if not _sphere_bound(n, k, radius):
        return None
    N = 1 << n
    perms = np.arange(N)[None, :] ^ np.arange(N)[:, None]
    others = [m for m in range(1, N) if m & (m - 1)]
    m = k - n
    if m < 0:
        return None
    if m == 0:
        return () if _uncovered((), n, radius, perms) == 0 else None
    if math.comb(len(others), m) <= EXHAUSTIVE_LIMIT:
        for combo in combinations(others, m):
            if _uncovered(combo, n, radius, perms) == 0:
                return combo
        return None
    rng = np.random.default_rng(seed)
    for _restart in range(8):
        cur = list(rng.choice(others, size=m, replace=False))
        score = _uncovered(cur, n, radius, perms)
        for _step in range(3000):
            if score == 0:
                return tuple(sorted(int(x) for x in cur))
            i = int(rng.integers(m))
            cand = int(rng.choice(others))
            if cand in cur:
                continue
            trial = cur.copy()
            trial[i] = cand
            s = _uncovered(trial, n, radius, perms)
            if s <= score:
                cur, score = trial, s
    return None


def diameter_frontier(axis_size: int, seed: int = 0) -> dict[int, tuple[int, tuple[int, ...]]]:
    """{degree k: (smallest diameter found, fold masks achieving it)} for k = n .. N-1."""
    n = _bits_of(axis_size)
    key = (axis_size, seed)
    if key in _FRONTIER:
        return _FRONTIER[key]
    N = 1 << n
    out: dict[int, tuple[int, tuple[int, ...]]] = {}
    k = n
    for radius in range(n, 0, -1):
        if radius == 1:
            out[N - 1] = (1, tuple(m for m in range(1, N) if m & (m - 1)))
            break
        # smallest k at which this radius is reachable
        while True:
            found = _find(n, k, radius, seed)
            if found is not None:
                break
            k += 1
        out[k] = (radius, found)
    # fill the staircase: a degree keeps the best diameter of any smaller degree
    full: dict[int, tuple[int, tuple[int, ...]]] = {}
    best = None
    for d in range(n, N):
        if d in out and (best is None or out[d][0] < best[0]):
            best = out[d]
        full[d] = best
    _FRONTIER[key] = full
    return full
