"""``gx sync [dir=multirun]``: log to MLflow what is on disk but not in the store.

Every job directory of a sweep (and every single run's directory) holds ``tracking.json``
beside ``results.json``: the point's pipeline, config hash, params, status and its sweep. When
the store was down during a sweep, or a driver was killed between writing a point and logging
it, those points are missing from the store; this pipeline logs them, under their sweep's
parent run (created when missing, matched by sweep hash), then finishes the parent with counts
over all its children and attaches the report. Idempotent: a point with a FINISHED child (or,
for single runs, a FINISHED run of its config hash) is never logged again, so running it twice,
or beside a rerun of the sweep, duplicates nothing. Writes ``results.json`` (``store``,
``uploaded``, ``already``, ``not_uploaded``, ``sweeps``).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from collectives.errors import SpecError
from pipelines.app import gx_main
from pipelines.specs import plain


def job_records(root: Path) -> dict[str | None, list[tuple[Path, object]]]:
    """(job dir, record) under ``root`` by sweep hash (None: single runs)."""
    from pipelines.tracking import RECORD, PointRecord

    groups: dict[str | None, list] = defaultdict(list)
    for path in sorted(root.rglob(RECORD)):
        rec = PointRecord.read(path.parent)
        if rec is not None and rec.cfg_hash:
            groups[rec.sweep_hash].append((path.parent, rec))
    return groups


def sync_sweep(tracker, sweep_hash: str, jobs: list) -> dict:
    """Log a sweep's missing points under its parent; counts for the summary."""
    first = jobs[0][1]
    sweep_dir = Path(jobs[0][0]).parent
    parent = tracker.resume_sweep(sweep_hash, first.sweep_name or f"{first.pipeline} sweep", first.pipeline,
                                  swept=first.swept or {}, n_points=first.points, sweep_dir=sweep_dir)
    existing = tracker.children(parent)
    uploaded = already = 0
    for job_dir, rec in jobs:
        runs = existing.get(rec.cfg_hash, [])
        if any(r.info.status == "FINISHED" for r in runs) or (rec.status == "FAILED" and runs):
            already += 1
            continue
        if tracker.log_from_disk(parent, job_dir, stale=runs):
            uploaded += 1
    tracker.finish_parent(parent, None)
    if not tracker.down:
        for job_dir, _ in jobs:
            (Path(job_dir).parent / "tracking_pending.jsonl").unlink(missing_ok=True)
    tracker.close()
    return {"sweep_hash": sweep_hash, "parent": parent, "points": len(jobs), "uploaded": uploaded, "already": already}


def sync_single_runs(tracker, jobs: list) -> dict:
    """Single runs have no parent: a FINISHED top-level run of the same config hash counts as logged."""
    uploaded = already = 0
    for job_dir, rec in jobs:
        if tracker.single_run_logged(rec.cfg_hash):
            already += 1
        elif tracker.log_from_disk(None, job_dir):
            uploaded += 1
    return {"sweep_hash": None, "parent": None, "points": len(jobs), "uploaded": uploaded, "already": already}


def task(cfg):
    from pipelines.tracking import SweepLocked, open_tracker

    root = Path(str(cfg.dir)).expanduser()
    if not root.is_dir():
        raise SpecError(f"dir={cfg.dir!r} is not a directory; give a sweep directory (e.g. multirun/2025-01-31/12-00-00) "
                        "or a folder of them")
    tracking = dict(plain(cfg.tracking))
    tracker = open_tracker(tracking, direct=True)
    groups = job_records(root.resolve())
    if not groups:
        raise SpecError(f"no job directory with tracking.json under {root}; nothing to sync")
    sweeps = []
    for sweep_hash, jobs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        if sweep_hash is None:
            sweeps.append(sync_single_runs(tracker, jobs))
            continue
        try:
            sweeps.append(sync_sweep(tracker, sweep_hash, jobs))
        except SweepLocked as exc:  # its driver is running: it logs its own points
            print(f"skipped: {exc}", file=sys.stderr)
    uploaded = sum(s["uploaded"] for s in sweeps)
    already = sum(s["already"] for s in sweeps)
    total = sum(len(jobs) for jobs in groups.values())
    not_uploaded = total - uploaded - already
    print(f"sync {root}: {uploaded} point(s) uploaded, {already} already in the store, {not_uploaded} not uploaded "
          f"({tracker.uri}, experiment {tracker.experiment!r})", file=sys.stderr)
    if tracker.down:
        raise SpecError(f"tracking store {tracker.uri} failed during the sync ({tracker.down}); run gx sync again")
    return {"store": tracker.uri, "uploaded": uploaded, "already": already, "not_uploaded": not_uploaded,
            "sweeps": sweeps}


main = gx_main("sync", track=False)(task)

if __name__ == "__main__":
    main()
