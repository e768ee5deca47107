"""collectives/alltoallv/assignment.py: batched assignment == scipy's linear_sum_assignment."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from collectives.alltoallv.assignment import batched_assignment


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(0, 10**6))
def test_enumeration_reaches_the_lsa_optimum(g, batch, seed):
    v = np.random.default_rng(seed).normal(size=(batch, g, g))
    got = batched_assignment(v, "enumerate")
    lsa = batched_assignment(v, "lsa")
    for b in range(batch):
        assert sorted(got[b]) == list(range(g))
        r, c = linear_sum_assignment(v[b], maximize=True)
        best = v[b][r, c].sum()
        assert v[b][np.arange(g), got[b]].sum() == np.float64(best) or abs(v[b][np.arange(g), got[b]].sum() - best) < 1e-9
        assert abs(v[b][np.arange(g), lsa[b]].sum() - best) < 1e-9
