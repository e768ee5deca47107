"""The cyclic garbage collector's pace in gxnet's own processes (the command, Ray's sweep workers,
the sweep's tracking process).

CPython runs a young collection every 700 net container allocations and a full one after ten of
the middle generation (when the heap has grown by a quarter since the last). A sweep's processes
keep large, long-lived memo tables -- the OCS planner's prices, ladders and leaf greedies, the
executor's plans, MLflow's and SQLAlchemy's objects -- and each new entry is walked on its way
through the generations and again in every full collection: perf put 17 % of a cold all-OCS
worker's samples in the collector, 11 % of an all-EPS/hybrid one's. A young threshold of 50,000
makes every generation's collections ~70x rarer; almost all of a point's garbage is freed by
reference counting anyway, and what is cyclic waits at most 50,000 allocations (a few MiB).
Paired runs (one per core, at once): 8-20 % less wall time for the all-OCS cells of the figure-4
search, 3-12 % for the all-EPS and hybrid cells, the same results (docs/benchmarks.md).
``GX_GC_YOUNG=700`` restores CPython's default (any positive whole number is taken).
"""

from __future__ import annotations

import gc
import os

YOUNG_THRESHOLD = 50_000
ENV = "GX_GC_YOUNG"


def young_threshold() -> int:
    """The young-generation threshold to use: ``GX_GC_YOUNG`` if it is a positive whole number."""
    raw = os.environ.get(ENV, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return YOUNG_THRESHOLD


def pace_collector() -> None:
    """Raise this process's young-generation threshold to :func:`young_threshold` (never lower it
    below what the process already set, unless ``GX_GC_YOUNG`` asks; the older generations keep
    their thresholds)."""
    young, middle, old = gc.get_threshold()
    wanted = young_threshold()
    if young == 0:  # the collector is switched off by whoever runs us: leave it so
        return
    if wanted > young or ENV in os.environ:
        gc.set_threshold(wanted, middle, old)
