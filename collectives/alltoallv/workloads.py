"""AlltoAllv demand matrices (paper 000, Section 6 "Workloads"), all seeded and in whole bytes.

- ``uniform``: AlltoAll, every rank sends bytes_per_rank / (N-1) to every other rank;
- ``zipf``: skew AlltoAllv following FAST: each source ranks its N-1 destinations in a random
  order and gives the k-th one a share proportional to 1 / k^s (s = skew, paper 0.4 ... 0.8);
- ``moe``: randomized top-k MoE routing: every token of every rank picks k distinct experts out
  of E uniformly; experts are spread evenly over the ranks (expert e on rank e mod N); a token
  goes once to each rank hosting at least one of its experts, carrying hidden * dtype bytes;
- ``file``: a matrix the pipelines read from .npy, .csv or .json (``demand_matrix`` checks it).
Self traffic (the diagonal) is always zero: it is handled locally.
"""

from __future__ import annotations

import numpy as np

from collectives.errors import SpecError


def _whole(shares: np.ndarray, total: int) -> np.ndarray:
    """Largest-remainder rounding of a nonnegative vector to integers summing to ``total``."""
    raw = shares / shares.sum() * total
    out = np.floor(raw).astype(np.int64)
    short = int(total - out.sum())
    if short:
        out[np.argsort(-(raw - out), kind="stable")[:short]] += 1
    return out


def _check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise SpecError(f"ranks={n!r} must be a whole number >= 2 for an AlltoAllv")


def uniform(n: int, bytes_per_rank: int) -> np.ndarray:
    _check_n(n)
    if bytes_per_rank < 0:
        raise SpecError(f"bytes_per_rank={bytes_per_rank} must be non-negative")
    d = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        d[i, [j for j in range(n) if j != i]] = _whole(np.ones(n - 1), bytes_per_rank)
    return d


def zipf(n: int, bytes_per_rank: int, skew: float, seed: int) -> np.ndarray:
    _check_n(n)
    if bytes_per_rank < 0:
        raise SpecError(f"bytes_per_rank={bytes_per_rank} must be non-negative")
    if not (isinstance(skew, (int, float)) and skew >= 0):
        raise SpecError(f"workload.skew={skew!r} must be a non-negative number (paper: 0.4 ... 0.8)")
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n) ** float(skew)
    d = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        others = np.array([j for j in range(n) if j != i])
        d[i, rng.permutation(others)] = _whole(weights, bytes_per_rank)
    return d


def moe(n: int, tokens_per_rank: int, *, experts: int = 256, top_k: int = 8, hidden: int = 7168,
        dtype_bytes: int = 2, seed: int = 0) -> np.ndarray:
    _check_n(n)
    if tokens_per_rank < 0:
        raise SpecError(f"workload.tokens_per_rank={tokens_per_rank} must be non-negative")
    if not 1 <= top_k <= experts:
        raise SpecError(f"workload.top_k={top_k} must be between 1 and experts={experts}")
    rng = np.random.default_rng(seed)
    host = np.arange(experts) % n
    d = np.zeros((n, n), dtype=np.int64)
    token_bytes = int(hidden) * int(dtype_bytes)
    for i in range(n):
        if tokens_per_rank == 0:
            continue
        # top-k distinct experts per token: argpartition of random keys is a uniform k-subset
        picks = np.argpartition(rng.random((tokens_per_rank, experts)), top_k - 1, axis=1)[:, :top_k]
        ranks_hit = np.zeros((tokens_per_rank, n), dtype=bool)
        ranks_hit[np.arange(tokens_per_rank)[:, None], host[picks]] = True
        d[i] = ranks_hit.sum(axis=0) * token_bytes
    np.fill_diagonal(d, 0)
    return d


def demand_matrix(m: np.ndarray, n: int, what: str = "demand matrix") -> np.ndarray:
    """A user's demand matrix (read by the pipelines) checked against ``n`` ranks: whole, non-negative
    byte counts, shape n x n; the diagonal (a rank's bytes to itself) is dropped."""
    _check_n(n)
    m = np.asarray(m)
    if m.shape != (n, n):
        raise SpecError(f"{what} has shape {tuple(m.shape)}; it must be {n} x {n} for {n} ranks")
    if not np.all(np.isfinite(m)) or (m < 0).any() or not np.allclose(m, np.round(m)):
        raise SpecError(f"{what} must hold whole, non-negative byte counts")
    m = np.round(m).astype(np.int64)
    np.fill_diagonal(m, 0)
    return m
