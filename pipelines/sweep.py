"""Sweep execution on Ray with MLflow logging from the driver (issue: orchestration).

Hydra's ``-m`` multirun hands the composed points to the ``gx_ray`` launcher
(``hydra_plugins/gx_ray_launcher``), which calls :func:`run_sweep`. Points run as Ray tasks
of whole colocated units (:func:`colocated_units`, sharing a process's caches) sized from the
points' observed run time (:class:`BatchSizer`, keeping Ray's per-task cost small next to
millisecond-scale evaluations); the driver collects them with ``ray.wait``, shows progress,
writes each point's files into its Hydra job directory and logs it to MLflow at once, so a
killed driver loses only the points in flight. A point that raises is recorded as failed
with its reason and the sweep goes on.
"""

from __future__ import annotations

import importlib
import math
import os
import sys
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ORCHESTRATION_KEYS = ("hydra", "ray", "tracking")


@dataclass
class SweepPoint:
    index: int
    overrides: list[str]
    cfg: dict  # resolved config without hydra
    out_dir: Path
    cfg_hash: str = ""
    name: str = ""


@dataclass
class SweepSummary:
    done: int = 0
    failed: int = 0
    skipped: int = 0
    errors: dict[int, str] = field(default_factory=dict)
    wall_s: float = 0.0
    timeline: list[dict] = field(default_factory=list)  # one row per point run: worker, start, wall

    def as_dict(self) -> dict[str, int]:
        return {"done": self.done, "failed": self.failed, "skipped": self.skipped}


def point_config(cfg: dict) -> dict:
    return {k: v for k, v in cfg.items() if k not in ORCHESTRATION_KEYS}


def run_points(pipeline: str, cfgs: list[dict]) -> list[dict]:
    """Worker side: run the pipeline's pure task on each config (no files, no MLflow)."""
    from omegaconf import OmegaConf

    from collectives.errors import SpecError

    module = importlib.import_module(f"pipelines.{pipeline}")
    task = module.main.task
    outcomes = []
    for cfg in cfgs:
        t0, started = time.perf_counter(), time.time()
        try:
            outcome = task(OmegaConf.create(cfg))
            results, artifacts = outcome if isinstance(outcome, tuple) else (outcome, None)
            outcomes.append({"ok": True, "results": results, "artifacts": artifacts or {},
                             "wall_s": time.perf_counter() - t0})
        except SpecError as exc:
            outcomes.append({"ok": False, "error": f"invalid point: {exc}", "wall_s": time.perf_counter() - t0})
        except Exception as exc:  # a failing point must not stop the sweep
            outcomes.append({"ok": False, "error": f"{type(exc).__name__}: {exc}",
                             "traceback": traceback.format_exc(), "wall_s": time.perf_counter() - t0})
        outcomes[-1].update(worker=f"{os.uname().nodename}:{os.getpid()}", started=started)
    return outcomes


def _dotted(cfg: dict, key: str):
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def colocated_units(points: list, colocate: list[str] | tuple = ()) -> list[list]:
    """Points that differ only in the ``colocate`` keys form one unit, run by one task in one
    process, so they share that process's caches (e.g. ``ray.colocate=[context]`` in a search:
    the 32K and 5M cells of a fabric and batch need the same OCS plans and schedules). Units keep
    the sweep's order (first appearance); without keys every point is its own unit."""
    if not colocate:
        return [[p] for p in points]
    import json

    units: dict[str, list] = {}
    for p in points:
        rest = json.loads(json.dumps(p.cfg, default=str))
        for key in colocate:  # drop each colocated key from the identity of the point
            parent, _, leaf = key.rpartition(".")
            node = _dotted(rest, parent) if parent else rest
            if isinstance(node, dict):
                node.pop(leaf, None)
        units.setdefault(json.dumps(rest, sort_keys=True), []).append(p)
    return list(units.values())


class BatchSizer:
    """Points per Ray task. An int is fixed. "auto" adapts to the points' observed run time:
    the first tasks carry one unit each; after that a task carries about ``target_task_s`` of
    work (so Ray's few-ms per-task cost stays under ~1 % on millisecond points) but never more
    than a 1/(2 x workers) share of what is left, so the tail still spreads over every worker."""

    def __init__(self, batch_size: int | str | None, n_workers: int, target_task_s: float = 0.5):
        self.fixed = self.parse(batch_size)
        self.n_workers, self.target_task_s = max(1, n_workers), target_task_s
        self.points = 0
        self.wall_s = 0.0

    @staticmethod
    def parse(batch_size) -> int | None:
        """None for "auto", else the fixed number of points per task; SpecError otherwise."""
        from collectives.errors import SpecError

        if batch_size in (None, "auto"):
            return None
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise SpecError(f"ray.batch_size={batch_size!r} must be auto or a positive integer "
                            "(points per Ray task)")
        return batch_size

    def observe(self, outcomes: list[dict]) -> None:
        self.points += len(outcomes)
        self.wall_s += sum(o.get("wall_s", 0.0) for o in outcomes)

    def size(self, remaining: int) -> int:
        if self.fixed is not None:
            return self.fixed
        if not self.points:
            return 1
        per_point = max(self.wall_s / self.points, 1e-6)
        want = math.ceil(self.target_task_s / per_point)
        return max(1, min(64, want, math.ceil(remaining / (2 * self.n_workers))))


class Progress:
    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.stream, self.t0 = total, stream, time.perf_counter()

    def update(self, s: SweepSummary) -> None:
        n = s.done + s.failed + s.skipped
        width = 30
        filled = int(width * n / max(1, self.total))
        rate = n / max(1e-9, time.perf_counter() - self.t0)
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {n}/{self.total} "
                          f"done {s.done} failed {s.failed} skipped {s.skipped} ({rate:.1f}/s)")
        if n >= self.total:
            self.stream.write("\n")
        self.stream.flush()


def init_ray(ray_cfg: dict) -> int:
    """Local Ray by default; an existing cluster when ray.address or RAY_ADDRESS is set."""
    import ray

    address = ray_cfg.get("address") or os.environ.get("RAY_ADDRESS")
    if not ray.is_initialized():
        kwargs: dict[str, Any] = dict(include_dashboard=False, ignore_reinit_error=True, logging_level="ERROR",
                                      log_to_driver=bool(ray_cfg.get("log_to_driver", False)))
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = int(ray_cfg.get("num_cpus") or os.cpu_count() or 1)
        ray.init(**kwargs)
    return int(ray.cluster_resources().get("CPU", 1))


def run_sweep(pipeline: str, points: list[SweepPoint], *, ray_cfg: dict, tracking_cfg: dict,
              sweep_name: str, sweep_hash: str, timeline_path: Path | None = None) -> SweepSummary:
    from pipelines.app import write_outputs
    from pipelines.tracking import config_hash

    t0, t0_epoch = time.perf_counter(), time.time()
    summary = SweepSummary()
    for p in points:
        p.cfg_hash = p.cfg_hash or config_hash(pipeline, p.cfg)
        p.name = p.name or (" ".join(p.overrides) or f"point {p.index}")

    tracker = parent = None
    existing: dict[str, list] = {}
    if tracking_cfg.get("enabled", True):
        from pipelines.app import run_guarded
        from pipelines.tracking import open_tracker

        tracker = run_guarded(lambda: open_tracker(tracking_cfg))  # store unreachable: one line, exit 2
        parent = run_guarded(lambda: tracker.open_sweep(sweep_hash, sweep_name, pipeline, points))  # 2nd driver: exit 2
        existing = tracker.children(parent)
        tracker.adopt_from_disk(parent, points, existing)  # computed earlier but never logged: log, don't recompute

    todo = []
    for p in points:
        runs = existing.get(p.cfg_hash, [])
        if any(r.info.status == "FINISHED" for r in runs):
            tracker.remove_unfinished(runs)  # a killed earlier rerun may have left one behind
            summary.skipped += 1
        else:
            todo.append(p)
    progress = Progress(len(points))
    progress.update(summary)

    def record(p: SweepPoint, outcome: dict) -> None:
        summary.timeline.append({"index": p.index, "point": p.name, "ok": outcome["ok"],
                                 "worker": outcome.get("worker"), "wall_s": outcome.get("wall_s"),
                                 "start_s": None if "started" not in outcome else outcome["started"] - t0_epoch})
        if outcome["ok"]:
            write_outputs(p.out_dir, outcome["results"], outcome["artifacts"])
            summary.done += 1
        else:
            p.out_dir.mkdir(parents=True, exist_ok=True)
            summary.failed += 1
            summary.errors[p.index] = outcome["error"]
        if tracker is not None:
            tracker.log_point(parent, pipeline=pipeline, cfg_hash=p.cfg_hash, name=p.name, params=p.cfg,
                              results=outcome.get("results"), artifact_dir=p.out_dir if outcome["ok"] else None,
                              error=None if outcome["ok"] else outcome["error"], stale=existing.get(p.cfg_hash),
                              out_dir=p.out_dir, wall_s=outcome.get("wall_s"))
        progress.update(summary)

    use_ray = bool(ray_cfg.get("enabled", True)) and todo
    if use_ray:
        import ray

        n_workers = init_ray(ray_cfg)
        remote = ray.remote(num_cpus=1, max_retries=0)(run_points)
        units = deque(colocated_units(todo, list(ray_cfg.get("colocate") or ())))
        sizer = BatchSizer(ray_cfg.get("batch_size", "auto"), n_workers)
        left = len(todo)
        pending: dict = {}

        def submit() -> None:  # one task: whole units, about sizer.size() points
            nonlocal left
            group: list[SweepPoint] = []
            want = sizer.size(left)
            while units and (not group or len(group) + len(units[0]) <= want):
                group.extend(units.popleft())
            left -= len(group)
            pending[remote.remote(pipeline, [p.cfg for p in group])] = group

        window = 2 * n_workers  # one running and one queued task per worker: no worker waits
        while units and len(pending) < window:
            submit()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                group = pending.pop(ref)
                try:
                    outcomes = ray.get(ref)
                except Exception as exc:  # a worker died: its points fail, the sweep goes on
                    outcomes = [{"ok": False, "error": f"worker failed: {type(exc).__name__}: {exc}"}] * len(group)
                sizer.observe(outcomes)
                for p, outcome in zip(group, outcomes):
                    record(p, outcome)
            while units and len(pending) < window:
                submit()
    else:
        for p in todo:
            record(p, run_points(pipeline, [p.cfg])[0])

    summary.wall_s = time.perf_counter() - t0
    if tracker is not None:
        tracker.finish_parent(parent, summary.as_dict())
    busy = ""
    if use_ray and summary.timeline:
        workers = {r["worker"] for r in summary.timeline if r["worker"]}
        work_s = sum(r["wall_s"] or 0.0 for r in summary.timeline)
        busy = (f"; Ray workers busy {100 * work_s / (n_workers * summary.wall_s):.0f} % of the sweep's "
                f"wall time ({len(workers)} of {n_workers} used)")
    if timeline_path is not None and summary.timeline:
        import json

        timeline_path.parent.mkdir(parents=True, exist_ok=True)
        timeline_path.write_text(json.dumps({"wall_s": summary.wall_s, "ray": bool(use_ray),
                                             "points": summary.timeline}, indent=1) + "\n")
    print(f"sweep {sweep_name}: {summary.done} done, {summary.failed} failed, {summary.skipped} skipped "
          f"in {summary.wall_s:.1f} s{busy}", file=sys.stderr)
    for idx, err in sorted(summary.errors.items()):
        print(f"  point #{idx} failed: {err}", file=sys.stderr)
    if tracker is not None:
        print(tracker.closing_line(), file=sys.stderr)
    return summary
