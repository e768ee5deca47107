"""Unit tests for collectives.frontiers (Figure 11)."""

import pytest

from collectives.errors import SpecError
from collectives.frontiers import diameter_frontier, min_degree_for_layers, schedulable_frontier
from collectives.topology import CayleyTopology


def test_schedulable_frontier_size_64():
    # Figure 11 / A.2: two coset layers on an axis of 64 only at degree 14 (K8□K8)
    assert schedulable_frontier(64, 13) == 3
    assert schedulable_frontier(64, 14) == 2
    assert schedulable_frontier(64, 6) == 6
    assert schedulable_frontier(64, 5) is None
    assert schedulable_frontier(64, 63) == 1
    assert min_degree_for_layers(7, 2) == 15 + 7  # Q7[4, 3]


@pytest.mark.parametrize("size", [16, 32])
def test_diameter_frontier_is_a_staircase_with_witnesses(size):
    f = diameter_frontier(size)
    n = size.bit_length() - 1
    assert f[n][0] == n and f[size - 1][0] == 1
    degrees = sorted(f)
    assert all(f[a][0] >= f[b][0] for a, b in zip(degrees, degrees[1:]))
    for k, (diam, folds) in f.items():
        topo = CayleyTopology(n_bits=n, generators=tuple(1 << b for b in range(n)) + tuple(folds))
        assert topo.diameter == diam and topo.degree <= k


def test_diameter_frontier_size_16_matches_table4():
    f = diameter_frontier(16)
    assert f[5][0] == 2  # Q4 + 1111 (Table 4)
    assert f[4][0] == 4


def test_diameter_frontier_lags_schedulable_frontier():
    # the diameter frontier bounds every schedule: never above the coset-layer frontier
    for size in (16, 32):
        f = diameter_frontier(size)
        for k, (diam, _) in f.items():
            assert diam <= schedulable_frontier(size, k)


def test_bad_axis_size():
    with pytest.raises(SpecError):
        schedulable_frontier(48, 10)


def test_diameter_frontier_size_64_reaches_diameter_2_at_degree_13():
    # Figure 11: 'on an axis of 64 accelerators, diameter 2 is reached at degree 13'
    f = diameter_frontier(64)
    diam, folds = f[13]
    assert diam == 2
    topo = CayleyTopology(n_bits=6, generators=tuple(1 << b for b in range(6)) + tuple(folds))
    assert topo.degree == 13 and topo.diameter == 2
    # sphere-covering bound: 1 + k + C(k, 2) < 64 for k <= 10, so no smaller degree can do it
    assert all(f[k][0] >= 3 for k in range(6, 11))
    assert schedulable_frontier(64, 13) == 3  # ... while the coset layers still need 3 phases
