"""Unit tests for collectives.selection (Eq. 1, Table 5 selection)."""

import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectives.cost import Cost
from collectives.errors import SpecError
from collectives.selection import best_schedule, hockney_time_s, non_dominated, price_all
from collectives.topology import block_fold, hypercube, ring, with_folds

LAM, R = 0.52e-6, 5e10


def test_hockney_eq1():
    c = Cost(h=3, v=Fraction(1), u=9)
    assert hockney_time_s(c, 4096, LAM, R) == pytest.approx(3 * LAM + 4096 / R)
    assert hockney_time_s(c, 4096, LAM, R, multiplicity=2) == pytest.approx(3 * LAM + 4096 / (2 * R))


def test_price_all_shape():
    table = price_all("allreduce", hypercube(4), 4096, LAM, R)
    assert table["two_shot"]["valid"] is False and table["two_shot"]["time_s"] is None
    r = table["coset_factored_parallel"]
    assert r["valid"] and r["phases"] == 4 and r["volume_bytes"] == 4096.0
    assert r["time_s"] == pytest.approx(4 * LAM + 4096 / R)


def test_best_is_argmin_over_valid():
    topo = with_folds(hypercube(4), [0b1111])
    for size in (256, 4096, 1 << 20, 1 << 26):
        table = price_all("allreduce", topo, size, LAM, R)
        best = best_schedule("allreduce", topo, size, LAM, R)
        t_best = table[best]["time_s"]
        assert all(t_best <= r["time_s"] * (1 + 1e-12) for r in table.values() if r["valid"])


def test_latency_vs_bandwidth_regimes():
    q9 = hypercube(9)
    assert best_schedule("allreduce", q9, 1024, LAM, R) == "coset_factored_parallel"
    assert best_schedule("allreduce", q9, 64 << 20, LAM, R) == "rs_ag_parallel"


def test_tie_break_is_deterministic():
    # on K4 one-shot, DVO, coset-factored (parallel) all cost h=1, v=sigma (Table 6's tie)
    k4 = block_fold((2,))
    picks = {best_schedule("allreduce", k4, 4096, LAM, R) for _ in range(3)}
    assert len(picks) == 1


def test_dominated_schedules_are_filtered():
    costs = {"a": Cost(h=2, v=Fraction(1), u=1), "b": Cost(h=3, v=Fraction(1), u=1), "c": Cost(h=4, v=Fraction(1, 2), u=1)}
    assert non_dominated(costs) == ["a", "c"]


def test_bad_parameters():
    with pytest.raises(SpecError):
        price_all("allreduce", hypercube(3), 4096, LAM, 0)
    with pytest.raises(SpecError):
        best_schedule("allreduce", hypercube(3), 4096, LAM, R, multiplicity=0)
    with pytest.raises(SpecError, match="unknown"):
        price_all("allreduce", hypercube(3), 4096, LAM, R, names=["nope"])


def test_ring_topology_only_prices_ring_and_one_shot():
    table = price_all("allreduce", ring(8), 4096, LAM, R)
    assert {n for n, r in table.items() if r["valid"]} == {"ring", "one_shot", "one_shot_dvo"}


def test_pricing_all_schedules_is_fast():
    topo = with_folds(hypercube(9), [0b111111111])
    price_all("allreduce", topo, 4096, LAM, R)  # warm the per-topology cache
    t0 = time.perf_counter()
    for _ in range(20):
        price_all("allreduce", topo, 4096, LAM, R)
    assert (time.perf_counter() - t0) / 20 < 5e-3  # 1 ms target, generous for a shared CI box


@settings(max_examples=40, deadline=None)
@given(topo=st.sampled_from([hypercube(5), with_folds(hypercube(4), [0b1111]), block_fold((3, 2)), ring(12),
                             block_fold((2, 2, 2))]),
       coll=st.sampled_from(["allreduce", "alltoall", "allgather", "reducescatter"]),
       size=st.integers(1, 1 << 28), lam=st.floats(1e-8, 1e-5), p=st.integers(1, 8))
def test_best_is_never_beaten(topo, coll, size, lam, p):
    table = price_all(coll, topo, size, lam, R, p)
    valid = {n: r for n, r in table.items() if r["valid"]}
    if not valid:
        with pytest.raises(SpecError):
            best_schedule(coll, topo, size, lam, R, p)
        return
    best = best_schedule(coll, topo, size, lam, R, p)
    assert valid[best]["time_s"] <= min(r["time_s"] for r in valid.values()) * (1 + 1e-9)
