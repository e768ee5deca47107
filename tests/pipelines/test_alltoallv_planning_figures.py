"""``gx alltoallv``: the steady-state planning figure and the first, cold call beside it (timings.json).

``planning_over_communication`` is the median of ``planning_repeats`` plans of the same demand
after a warm-up plan, over the modelled completion; ``planning_cold_s`` and
``planning_over_communication_cold`` are the first call's. All are wall-clock figures: never in
results.json (tests/pipelines/test_determinism.py checks the bytes of results.json).
"""

import pytest
from gx_inprocess import run_task

from collectives.errors import SpecError

COLD_KEYS = {"planning_cold_s", "planning_cpu_cold_s", "planning_over_communication_cold"}


def test_steady_state_and_cold_planning_figures_are_timings_not_results():
    results, artifacts = run_task("alltoallv", "catalog_cache=null", "planning_repeats=3")
    t = artifacts["timings.json"]
    assert COLD_KEYS <= set(t) and t["planning_repeats"] == 3
    assert not (set(t) - {"catalog"}) & set(results)
    assert t["planning_over_communication"] == pytest.approx(t["planning_s"] / results["completion_s"])
    assert t["planning_over_communication_cold"] == pytest.approx(t["planning_cold_s"] / results["completion_s"])
    assert t["planning_s_per_activation"] == pytest.approx(t["planning_s"] / results["activations"])
    assert 0 < t["planning_s"] and 0 < t["planning_cpu_s"] and 0 < t["planning_cold_s"]


def test_no_repeats_reports_the_first_call_and_the_milp_is_not_repeated():
    _, artifacts = run_task("alltoallv", "catalog_cache=null", "planning_repeats=0")
    t = artifacts["timings.json"]
    assert t["planning_s"] == t["planning_cold_s"] and t["planning_repeats"] == 0
    _, artifacts = run_task("alltoallv", "platform=fig1", "scheduler=milp", "workload.bytes_per_rank=1MiB",
                            "catalog_cache=null")
    t = artifacts["timings.json"]
    assert t["planning_repeats"] == 0 and t["planning_s"] == t["planning_cold_s"]


@pytest.mark.parametrize("bad", ["-1", "2.5", "true"])
def test_bad_repeat_counts_are_refused(bad):
    with pytest.raises(SpecError, match="planning_repeats"):
        run_task("alltoallv", "catalog_cache=null", f"planning_repeats={bad}")
