"""fabrics/pcie/evaluator.py: max-min fair sharing and schedule timing."""

import numpy as np
import pytest

from collectives.alltoallv.activations import Activation, AlltoallvSchedule, Lane
from collectives.alltoallv.channels import PathOption
from fabrics.pcie.evaluator import evaluate, maxmin_rates, run_stage


def test_maxmin_classic_example():
    # flows: A uses r0; B uses r0 and r1; C uses r1. caps r0 = 10, r1 = 4
    inc = np.array([[1, 0], [1, 1], [0, 1]])
    rates = maxmin_rates(inc, np.array([10.0, 4.0]))
    assert rates == pytest.approx([8.0, 2.0, 2.0])


def test_maxmin_never_exceeds_capacity_and_is_pareto():
    rng = np.random.default_rng(0)
    for _ in range(30):
        inc = (rng.random((6, 5)) < 0.4).astype(float)
        inc[:, 0] = 1.0
        cap = rng.uniform(1, 10, 5)
        r = maxmin_rates(inc, cap)
        assert (inc.T @ r <= cap + 1e-9).all()
        # every flow crosses a saturated resource (no flow can grow alone)
        sat = inc.T @ r >= cap - 1e-9
        assert all((inc[f] * sat).any() for f in range(6))


def path(i, j, res, rate=64e9):
    return PathOption(src=i, dst=j, kind="PXB", resources=tuple(res), shared=tuple(res), rate_Bps=rate)


def test_run_stage_recomputes_rates_when_a_flow_finishes():
    cap = {"L": 10.0}
    lanes = [Lane(src=0, dst=1, path=path(0, 1, ["L"], 10.0), bytes=10),
             Lane(src=2, dst=3, path=path(2, 3, ["L"], 10.0), bytes=30)]
    # both at 5 until t=2 (first done, 10 B), then the second alone at 10: 20 B left -> t=4
    assert run_stage(lanes, cap) == pytest.approx([2.0, 4.0])


def test_evaluate_sequential_activations_metrics_and_overhead():
    cap = {"a": 1e9, "b": 2e9}
    d = np.zeros((3, 3), dtype=np.int64)
    d[0, 1], d[1, 2] = 1e9, 2e9
    acts = (Activation(lanes=(Lane(src=0, dst=1, path=path(0, 1, ["a"], 1e9), bytes=10**9),)),
            Activation(lanes=(Lane(src=1, dst=2, path=path(1, 2, ["b"], 2e9), bytes=2 * 10**9),)))
    s = AlltoallvSchedule(scheduler="t", platform="p", n_ranks=3, demand=d, activations=acts, channels=True)
    ev = evaluate(s, cap, overhead_s=0.5)
    assert ev.completion_s == pytest.approx(1.5 + 1.5)
    assert ev.rank_finish_s == pytest.approx((1.5, 3.0, 3.0))
    assert ev.algbw_Bps == pytest.approx(3e9 / (3 * 3.0))
    assert ev.busbw_Bps == pytest.approx(ev.algbw_Bps * 2 / 3)
