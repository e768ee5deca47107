"""A content-addressed store of OCS plans on disk, shared by the processes of a sweep and by
later runs (paper 003, Appendix A.2: a plan is a pure function of its request).

One JSON file per plan: ``<root>/<code>/<key[:2]>/<key>.json``, ``key`` the request hash
(``fabrics.planner.request_hash``) and ``code`` a fingerprint of the planner's source
(``fabrics/planner``, ``collectives``), so a changed planner never reads an older plan. Files
are written atomically (a temporary file renamed into place), so concurrent workers that plan
the same request both write the same bytes and a reader sees a whole file or none. A file that
cannot be read or decoded, or whose plan answers another request, is ignored and planned again
(then overwritten). Deleting the folder is always safe: it only costs planning time.

Where: ``$GX_PLAN_STORE`` if set (``off`` or empty: no store), else ``.gxnet-cache/plans`` in
the project folder. ``attach_default_plan_store()`` hands it to the planner
(``fabrics.planner.attach_plan_store``) once per process.
"""

from __future__ import annotations

import os

from pipelines.cache_dirs import KeyedFiles, cache_dir, read_json, source_fingerprint, write_json_atomic

ENV = "GX_PLAN_STORE"


def planner_fingerprint() -> str:
    """SHA-256 (16 hex digits) over the source files the planner's answers depend on."""
    return source_fingerprint("fabrics/planner", "collectives")


class PlanStore(KeyedFiles):
    """``fabrics.planner.PlanStore`` on a folder; counts its hits, misses and writes."""

    def __init__(self, root: str | os.PathLike, code: str | None = None):
        super().__init__(root, code or planner_fingerprint)

    def load(self, key: str):
        from fabrics.planner.record import plan_from_record

        record = read_json(self.path(key))
        try:
            plan = None if record is None else plan_from_record(record)
        except (ValueError, KeyError, TypeError):  # a file of another shape
            plan = None
        if plan is None or plan.request_hash != key:  # absent, unreadable, or moved or edited by hand
            self.misses += 1
            return None
        self.hits += 1
        return plan

    def save(self, key: str, plan) -> None:
        from fabrics.planner.record import plan_record

        # a read-only or full disk: the plan is still used, just not kept
        self.writes += write_json_atomic(self.path(key), plan_record(plan))


def default_plan_store() -> PlanStore | None:
    folder = cache_dir(ENV, "plans")
    return None if folder is None else PlanStore(folder)


def attach_default_plan_store() -> PlanStore | None:
    """Attach the default store to the planner unless one is attached already (then keep it)."""
    from fabrics.planner.cache import attach_plan_store

    current = attach_plan_store(None)
    store = current if current is not None else default_plan_store()
    attach_plan_store(store)
    return store
