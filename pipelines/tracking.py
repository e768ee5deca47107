"""MLflow tracking: one parent run per sweep, one child run per point, logged from the driver.

Default store: SQLite at an absolute path in the working directory (``mlflow.db``), created
once by the driver before any job; an existing tracking server when ``tracking.uri`` (or
``MLFLOW_TRACKING_URI``) is given. A point is identified by its config hash (tag
``gx.config_hash``); a rerun skips points that already have a FINISHED child run, and replaces
(deletes) stale RUNNING/FAILED children of a point it runs again, so nothing is duplicated.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TAG_HASH = "gx.config_hash"
TAG_SWEEP = "gx.sweep_hash"
TAG_PIPELINE = "gx.pipeline"
TAG_PARENT = "mlflow.parentRunId"


def config_hash(pipeline: str, cfg: dict) -> str:
    """Stable hash of a point: pipeline name + resolved config (without Hydra's own node)."""
    body = {k: v for k, v in cfg.items() if k != "hydra"}
    text = json.dumps({"pipeline": pipeline, "cfg": body}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def default_uri(cwd: str | None = None) -> str:
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{Path(cwd or os.getcwd()).resolve() / 'mlflow.db'}"


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(d, (list, tuple)) and prefix:
        out[prefix[:-1]] = json.dumps(d, default=str)[:500]
    elif prefix:
        out[prefix[:-1]] = d
    return out


def numeric_metrics(results: dict) -> dict[str, float]:
    """Numbers from results.json (nested dicts flattened), as MLflow metrics."""
    metrics = {}
    for key, val in flatten(results).items():
        if isinstance(val, bool):
            continue
        if isinstance(val, (int, float)):
            metrics[key.replace("/", "_")] = float(val)
    return metrics


@dataclass
class Tracker:
    uri: str
    experiment: str

    def __post_init__(self) -> None:
        import mlflow
        from mlflow.tracking import MlflowClient

        if self.uri.startswith("sqlite:///"):
            Path(self.uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
        mlflow.set_tracking_uri(self.uri)
        self.client = MlflowClient(tracking_uri=self.uri)
        exp = self.client.get_experiment_by_name(self.experiment)
        self.experiment_id = exp.experiment_id if exp else self.client.create_experiment(self.experiment)

    # -- parent -------------------------------------------------------------------------
    def parent_run(self, sweep_hash: str, name: str, tags: dict[str, str]) -> str:
        """The sweep's parent run; a rerun of the same sweep reuses it."""
        found = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{TAG_SWEEP}` = '{sweep_hash}'", max_results=1
        )
        if found:
            return found[0].info.run_id
        run = self.client.create_run(self.experiment_id, run_name=name, tags={TAG_SWEEP: sweep_hash, **tags})
        return run.info.run_id

    def children(self, parent_id: str) -> dict[str, list]:
        """Child runs of a parent by config hash."""
        runs = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{TAG_PARENT}` = '{parent_id}'", max_results=50000
        )
        by_hash: dict[str, list] = {}
        for r in runs:
            by_hash.setdefault(r.data.tags.get(TAG_HASH, ""), []).append(r)
        return by_hash

    def finished_hashes(self, parent_id: str) -> set[str]:
        return {h for h, runs in self.children(parent_id).items() if any(r.info.status == "FINISHED" for r in runs)}

    def remove_unfinished(self, runs: list) -> None:
        for old in runs:
            if old.info.status != "FINISHED":
                self.client.delete_run(old.info.run_id)

    def finish_parent(self, parent_id: str, summary: dict[str, int]) -> None:
        for k, v in summary.items():
            self.client.log_metric(parent_id, f"sweep.{k}", float(v))
        self.client.set_terminated(parent_id, "FINISHED")

    # -- child --------------------------------------------------------------------------
    def log_point(self, parent_id: str | None, *, pipeline: str, cfg_hash: str, name: str, params: dict,
                  results: dict | None, artifact_dir: Path | None, error: str | None,
                  stale: list | None = None) -> str:
        """Log one point as a child run; removes older unfinished runs of the same point."""
        from mlflow.entities import Metric, Param

        tags = {TAG_HASH: cfg_hash, TAG_PIPELINE: pipeline, "gx.git_commit": git_commit()}
        if parent_id:
            tags[TAG_PARENT] = parent_id
        if error:
            tags["gx.error"] = error[:4900]
        run = self.client.create_run(self.experiment_id, run_name=name, tags=tags)
        rid = run.info.run_id
        flat = {k: str(v)[:500] for k, v in flatten(params).items()}
        self.client.log_batch(
            rid,
            params=[Param(k, v) for k, v in sorted(flat.items())],
            metrics=[Metric(k, v, 0, 0) for k, v in sorted(numeric_metrics(results or {}).items())],
        )
        if artifact_dir is not None and Path(artifact_dir).is_dir():
            self.client.log_artifacts(rid, str(artifact_dir))
        self.client.set_terminated(rid, "FAILED" if error else "FINISHED")
        self.remove_unfinished(stale or [])
        return rid
