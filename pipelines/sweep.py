"""Sweep execution on Ray with MLflow logging from the driver (issue: orchestration).

Hydra's ``-m`` multirun hands the composed points to the ``gx_ray`` launcher
(``hydra_plugins/gx_ray_launcher``), which calls :func:`run_sweep`. Points run as Ray tasks
in small batches (one task per batch keeps Ray's per-task overhead small next to
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
        t0 = time.perf_counter()
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
    return outcomes


def batches(items: list, n_workers: int, batch_size: int | str | None) -> list[list]:
    if not items:
        return []
    if batch_size in (None, "auto"):
        # ~4 batches per worker balances load while keeping per-task overhead small
        size = max(1, min(64, math.ceil(len(items) / (4 * max(1, n_workers)))))
    else:
        size = max(1, int(batch_size))
    return [items[i:i + size] for i in range(0, len(items), size)]


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
              sweep_name: str, sweep_hash: str) -> SweepSummary:
    from pipelines.app import write_outputs
    from pipelines.tracking import Tracker, config_hash

    t0 = time.perf_counter()
    summary = SweepSummary()
    for p in points:
        p.cfg_hash = p.cfg_hash or config_hash(pipeline, p.cfg)
        p.name = p.name or (" ".join(p.overrides) or f"point {p.index}")

    tracker = parent = None
    existing: dict[str, list] = {}
    if tracking_cfg.get("enabled", True):
        from pipelines.tracking import default_uri, git_commit

        tracker = Tracker(uri=tracking_cfg.get("uri") or default_uri(), experiment=tracking_cfg.get("experiment") or "gxnet")
        parent = tracker.parent_run(sweep_hash, sweep_name, {"gx.pipeline": pipeline, "gx.git_commit": git_commit()})
        existing = tracker.children(parent)

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
                              error=None if outcome["ok"] else outcome["error"], stale=existing.get(p.cfg_hash))
        progress.update(summary)

    use_ray = bool(ray_cfg.get("enabled", True)) and todo
    if use_ray:
        import ray

        n_workers = init_ray(ray_cfg)
        remote = ray.remote(num_cpus=1, max_retries=0)(run_points)
        groups = batches(todo, n_workers, ray_cfg.get("batch_size", "auto"))
        pending = {remote.remote(pipeline, [p.cfg for p in g]): g for g in groups}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                group = pending.pop(ref)
                try:
                    outcomes = ray.get(ref)
                except Exception as exc:  # a worker died: its points fail, the sweep goes on
                    outcomes = [{"ok": False, "error": f"worker failed: {type(exc).__name__}: {exc}"}] * len(group)
                for p, outcome in zip(group, outcomes):
                    record(p, outcome)
    else:
        for p in todo:
            record(p, run_points(pipeline, [p.cfg])[0])

    summary.wall_s = time.perf_counter() - t0
    if tracker is not None:
        tracker.finish_parent(parent, summary.as_dict())
    print(f"sweep {sweep_name}: {summary.done} done, {summary.failed} failed, {summary.skipped} skipped "
          f"in {summary.wall_s:.1f} s", file=sys.stderr)
    for idx, err in sorted(summary.errors.items()):
        print(f"  point #{idx} failed: {err}", file=sys.stderr)
    if tracker is not None:
        print(f"MLflow: {tracker.uri} (experiment {tracker.experiment!r}); open the UI with: "
              f"mlflow ui --backend-store-uri {tracker.uri}", file=sys.stderr)
    return summary
