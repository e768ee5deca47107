"""Batched maximum-weight perfect assignment of small square matrices (the AA's inner step).

Each Alternating-Algorithm step of VarioPath (paper 000, Section 4.2) solves one g x g assignment
problem per rank group. ``scipy.optimize.linear_sum_assignment`` solves one matrix per call; for
the small g of PCIe switches (2-5 GPUs per switch) enumerating the g! permutations of a whole
batch at once in numpy gives the same optimum with far less per-call overhead. ``method="lsa"``
forces SciPy for every matrix; ``"auto"`` enumerates for g <= 5 and uses SciPy above. Both
return an optimal assignment (ties may be broken differently).
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import linear_sum_assignment

_PERMS: dict[int, np.ndarray] = {}  # explicit keyed cache: g -> all permutations of range(g)


def _perms(g: int) -> np.ndarray:
    if g not in _PERMS:
        _PERMS[g] = np.array(list(itertools.permutations(range(g))), dtype=np.int64)
    return _PERMS[g]


def batched_assignment(values: np.ndarray, method: str = "auto") -> np.ndarray:
    """values: (B, g, g) row x column weights -> (B, g) column assigned to each row, maximising the sum."""
    b, g, g2 = values.shape
    if g != g2:
        raise ValueError("assignment matrices must be square")
    if method == "lsa" or (method == "auto" and g > 5):
        out = np.empty((b, g), dtype=np.int64)
        for k in range(b):
            rows, cols = linear_sum_assignment(values[k], maximize=True)
            out[k, rows] = cols
        return out
    perms, select = perm_selector(g)
    scores = values.reshape(b, g * g) @ select  # (B, P): one matmul scores every permutation
    return perms[scores.argmax(axis=1)]


_SELECT: dict[int, np.ndarray] = {}  # explicit keyed cache: g -> (g*g, g!) 0/1 selector


def perm_selector(g: int) -> tuple[np.ndarray, np.ndarray]:
    perms = _perms(g)
    if g not in _SELECT:
        sel = np.zeros((g * g, len(perms)))
        for p, perm in enumerate(perms):
            sel[np.arange(g) * g + perm, p] = 1.0
        _SELECT[g] = sel
    return perms, _SELECT[g]
