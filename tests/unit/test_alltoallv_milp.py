"""collectives/alltoallv/milp.py: certified optimum of the channel model."""

import itertools

import numpy as np
import pytest
from scipy.optimize import linprog

from collectives.alltoallv.channels import ChannelTopology, PathOption
from collectives.alltoallv.milp import MilpOptimum
from collectives.alltoallv.validity import check_schedule
from collectives.errors import SpecError


def tiny():
    """3 ranks; i->j has a fast path over a shared link S and a slow private path."""
    def opts(i, j):
        return (PathOption(src=i, dst=j, kind="PXB", resources=("S",), shared=("S",), rate_Bps=4.0),
                PathOption(src=i, dst=j, kind="NIC", resources=(f"p{i}{j}",), shared=(f"p{i}{j}",), rate_Bps=1.0))
    return ChannelTopology(name="tiny", n_ranks=3, groups=((0,), (1,), (2,)),
                           paths={(i, j): opts(i, j) for i in range(3) for j in range(3) if i != j})


def brute_force_lp(t, d):
    """Enumerate every contention-free channel and solve the covering LP directly."""
    n = t.n_ranks
    pairs = [(i, j) for i in range(n) for j in range(n) if d[i, j] > 0]
    lanes = [(i, j, p) for i, j in pairs for p in t.options(i, j)]
    cols = []
    for r in range(1, n + 1):
        for combo in itertools.combinations(lanes, r):
            src = [c[0] for c in combo]
            dst = [c[1] for c in combo]
            res = [x for c in combo for x in c[2].shared]
            if len(set(src)) == r and len(set(dst)) == r and len(set(res)) == len(res):
                cols.append(combo)
    a = np.zeros((len(pairs), len(cols)))
    for k, combo in enumerate(cols):
        for i, j, p in combo:
            a[pairs.index((i, j)), k] += p.rate_Bps
    lp = linprog(np.ones(len(cols)), A_ub=-a, b_ub=-np.array([d[p] for p in pairs], float), method="highs")
    return lp.fun


def test_column_generation_matches_brute_force_optimum_and_is_certified():
    t = tiny()
    d = np.array([[0, 40, 8], [12, 0, 20], [4, 16, 0]]) * 10**6  # large: rounding to whole bytes is negligible
    s = MilpOptimum(t).plan(d)
    cert = s.meta["certificate"]
    assert cert["status"] == "optimal" and cert["gap"] == 0.0
    assert cert["objective_s"] == pytest.approx(brute_force_lp(t, d), rel=1e-9)
    assert check_schedule(s, t).valid
    # the rounded schedule's Eq. 2 time equals the optimum (up to whole-byte rounding)
    eq2 = sum(max(l.bytes / l.path.rate_Bps for l in a.lanes) for a in s.activations)
    assert eq2 == pytest.approx(cert["objective_s"], rel=1e-6)


def test_milp_refuses_large_instances():
    t = tiny()
    with pytest.raises(SpecError, match="max_ranks"):
        MilpOptimum(t, max_ranks=2)
