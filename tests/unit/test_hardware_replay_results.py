"""Replay measurements from per-rank reports (pipelines.hardware.replay_results) and the
watchdog's wording (pipelines.hardware.launcher.where)."""

import numpy as np
import pytest

from pipelines.hardware.launcher import where
from pipelines.hardware.replay_plan import pairwise_plan
from pipelines.hardware.replay_results import failure_of, measure


def _report(elapsed, acts, checked, expected, bad=0):
    return {"name": "p", "elapsed_s": elapsed, "activation_s": acts, "checked_bytes": checked,
            "expected_bytes": expected, "mismatched_bytes": bad, "first_mismatch": "x" if bad else None}


def test_completion_is_slowest_rank_median_over_timed_iterations():
    demand = np.array([[0, 100, 0], [0, 0, 50], [30, 0, 0]])
    plan = pairwise_plan(demand)
    reps = [_report([9.0, 1.0, 3.0, 2.0], [[1, 1]] * 4, 10, 10),
            _report([9.0, 2.0, 1.0, 4.0], [[2, 0]] * 4, 10, 10),
            _report([0.5, 1.5, 1.0, 1.0], [[0, 3]] * 4, 10, 10)]
    m = measure(plan, reps, warmup=1)
    # iterations 1..3: max over ranks = 2, 3, 4 -> median 3 (the 9 s warm-up is dropped)
    assert m["completion_s"] == 3.0 and m["completion_s_per_iteration"] == [2.0, 3.0, 4.0]
    assert m["activation_s"] == [2, 3]
    assert m["algbw_Bps"] == pytest.approx(180 / 3 / 3.0) and m["busbw_Bps"] == pytest.approx(m["algbw_Bps"] * 2 / 3)
    assert m["verified"] and failure_of([m]) is None


def test_missing_or_wrong_bytes_fail_verification():
    plan = pairwise_plan(np.array([[0, 8], [8, 0]]))
    short = measure(plan, [_report([1.0], [[1.0]], 8, 8), _report([1.0], [[1.0]], 4, 8)], warmup=0)
    assert not short["verified"] and "checked 12 of 16" in failure_of([short])
    wrong = measure(plan, [_report([1.0], [[1.0]], 8, 8, bad=3), _report([1.0], [[1.0]], 8, 8)], warmup=0)
    assert not wrong["verified"] and "3 received bytes differ" in failure_of([wrong])


def test_watchdog_names_the_place():
    names = ["variopath", "nccl_pairwise"]
    assert where((0, 1, 2, 0), names) == "activation 2 of variopath (iteration 1)"
    assert where((1, 0, 5, 1), names) == "activation 5 of nccl_pairwise (iteration 0)"
    assert where((-1, 0, 0, -1), names) == "start-up"
    assert where((2, 0, 0, 9), names) == "shutdown"
