"""Figure 18 (paper 003, Appendix C.3.1): fold against multiplicity on N = 64, single-level OCS.

Coset-factored parallel all-reduce on Q6 (h = 6, p = 1), Q6 + fold (three K4 layers, h = 3,
degree 9) and Q6 with multiplicity 2 (p = 2): 12 of 13 ports used, 400 Gb/s links. Eq. 3 predicts
the fold/multiplicity crossover at sigma* = 3 * 0.52 us * 5e10 B/s * 2 = 156 kB; the paper's
simulation finds 159 kB. We locate the simulated crossover by bisection and require 159 kB +- 10 %.
"""

from __future__ import annotations

import pytest

from collectives.topology import hypercube, with_folds
from fabrics.network.simlette.build import simulate_collective
from pipelines.network import simlette_from_config

FOLD = with_folds(hypercube(6), [0b000011, 0b001100, 0b110000])
MULT = hypercube(6, multiplicity=2)
BASE = hypercube(6)


def completion_s(topo, sigma, mode="optimized"):
    net = simlette_from_config({"kind": "single_ocs", "ports": 12, "link_rate_Bps": 5e10, "accelerators": 64},
                               {"mode": mode, "schedule": "coset_factored_parallel"}, topology=topo)
    return simulate_collective(net, "allreduce", sigma)["completion_s"]


def crossover_bytes(lo=16_000, hi=1_000_000, tol=250):
    assert completion_s(FOLD, lo) < completion_s(MULT, lo)
    assert completion_s(FOLD, hi) > completion_s(MULT, hi)
    while hi - lo > tol:
        mid = (lo + hi) // 2
        if completion_s(FOLD, mid) < completion_s(MULT, mid):
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def test_fold_multiplicity_crossover_near_159_kB():
    sigma_star = crossover_bytes()
    assert sigma_star == pytest.approx(159e3, rel=0.10)
    # and the analytical Eq. 3 value is 156 kB: the simulation sits at or just above it
    assert sigma_star >= 156e3 * 0.99


def test_fold_wins_small_buffers_and_multiplicity_large_ones_and_both_beat_the_base():
    for sigma in (4 * 1024, 1 << 20):
        base = completion_s(BASE, sigma)
        assert completion_s(FOLD, sigma) < base and completion_s(MULT, sigma) < base
    assert completion_s(FOLD, 4096) < completion_s(MULT, 4096)
    assert completion_s(MULT, 1 << 20) < completion_s(FOLD, 1 << 20)


def test_crossover_is_the_same_flit_by_flit():
    for sigma in (140_000, 180_000):
        for topo in (FOLD, MULT):
            assert completion_s(topo, sigma, "flit") == pytest.approx(completion_s(topo, sigma), rel=1e-6)
