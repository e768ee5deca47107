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

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

from pipelines.cache_dirs import cache_dir

ROOT = Path(__file__).resolve().parent.parent
ENV = "GX_PLAN_STORE"


@lru_cache(maxsize=1)  # explicit keyed cache of one value: the source does not change in a process
def planner_fingerprint() -> str:
    """SHA-256 (16 hex digits) over the source files the planner's answers depend on."""
    h = hashlib.sha256()
    for package in ("fabrics/planner", "collectives"):
        for path in sorted((ROOT / package).rglob("*.py")):
            h.update(str(path.relative_to(ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


class PlanStore:
    """``fabrics.planner.PlanStore`` on a folder; counts its hits, misses and writes."""

    def __init__(self, root: str | os.PathLike, code: str | None = None):
        self.root = Path(root) / (code or planner_fingerprint())
        self.hits = self.misses = self.writes = 0

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def load(self, key: str):
        from fabrics.planner.record import plan_from_record

        try:
            plan = plan_from_record(json.loads(self.path(key).read_text()))
        except (OSError, ValueError):  # absent, unreadable, truncated or of another shape
            self.misses += 1
            return None
        if plan.request_hash != key:  # a file moved or edited by hand
            self.misses += 1
            return None
        self.hits += 1
        return plan

    def save(self, key: str, plan) -> None:
        from fabrics.planner.record import plan_record

        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}.", suffix=".tmp")
            with os.fdopen(fd, "w") as f:  # dumps, not dump: one C-encoded string, not chunks from the Python encoder
                f.write(json.dumps(plan_record(plan), separators=(",", ":")))
            os.replace(tmp, path)
            self.writes += 1
        except OSError:  # a read-only or full disk: the plan is still used, just not kept
            try:
                os.unlink(tmp)
            except (OSError, UnboundLocalError):
                pass

    def stats(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "writes": self.writes}


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
