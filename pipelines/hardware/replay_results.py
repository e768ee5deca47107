"""Per-rank replay reports -> one measurement per replayed plan (pure, no torch).

Completion of one iteration is the slowest rank's time from the common start barrier to its
last activation's barrier (nccl-tests reports the max over ranks too); the reported value is
the median over the timed iterations (warm-up iterations dropped). An activation's time is the
slowest rank's, median over iterations. A plan is ``verified`` when every rank checked every
byte the demand sends it, in every iteration, and none differed from the pattern.
"""

from __future__ import annotations

import statistics

from pipelines.hardware.replay_plan import ReplayPlan, bandwidths


def measure(plan: ReplayPlan, per_rank: list[dict], warmup: int) -> dict:
    """``per_rank[r]`` is rank r's report for this plan (``replay_worker``)."""
    world = plan.world_size
    iters = len(per_rank[0]["elapsed_s"])
    timed = range(warmup, iters) if iters > warmup else range(iters)
    completion = [max(rep["elapsed_s"][i] for rep in per_rank) for i in timed]
    t = statistics.median(completion)
    n_act = len(per_rank[0]["activation_s"][0]) if per_rank[0]["activation_s"] else 0
    act = [statistics.median(max(rep["activation_s"][i][a] for rep in per_rank) for i in timed) for a in range(n_act)]
    checked = sum(rep["checked_bytes"] for rep in per_rank)
    expected = sum(rep["expected_bytes"] for rep in per_rank)
    bad = sum(rep["mismatched_bytes"] for rep in per_rank)
    algbw, busbw = bandwidths(plan.total_bytes, world, t)
    first = next((f"rank {r}: {rep['first_mismatch']}" for r, rep in enumerate(per_rank) if rep["first_mismatch"]), None)
    return {
        "name": plan.name,
        "kind": plan.kind,
        "activations": plan.n_activations,
        "total_bytes": plan.total_bytes,
        "verified": bad == 0 and checked == expected,
        "checked_bytes": checked,
        "expected_bytes": expected,
        "mismatched_bytes": bad,
        "first_mismatch": first,
        "completion_s": t,
        "completion_s_per_iteration": completion,
        "activation_s": act,
        "algbw_Bps": algbw,
        "busbw_Bps": busbw,
    }


def failure_of(measurements: list[dict]) -> str | None:
    """One line naming the first plan that did not verify, or None."""
    for m in measurements:
        if not m["verified"]:
            if m["mismatched_bytes"]:
                return f"{m['name']}: {m['mismatched_bytes']} received bytes differ from the demand ({m['first_mismatch']})"
            return f"{m['name']}: checked {m['checked_bytes']} of {m['expected_bytes']} expected bytes"
    return None
