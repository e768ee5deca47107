"""Hydra launcher ``hydra/launcher=gx_ray``: multirun points on Ray, tracked in MLflow.

All points are composed (and validated) in the driver before Ray starts, so a bad override
fails fast with Hydra's message. Execution, batching, progress and MLflow logging are in
``pipelines.sweep``; this class only adapts Hydra's launcher interface to it.
"""


import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict


@dataclass
class GxRayLauncherConf:
    _target_: str = "hydra_plugins.gx_ray_launcher.gx_ray_launcher.GxRayLauncher"


ConfigStore.instance().store(group="hydra/launcher", name="gx_ray", node=GxRayLauncherConf, provider="gxnet")


def _compose_once(loader) -> None:
    """Hydra's sweeper composes every point to validate the batch, then hands the overrides to
    the launcher, which composes them again (~80 ms a point). Keep the sweeper's compositions
    (same master config, same overrides) and give each back once: half the driver's start-up."""
    if getattr(loader, "_gx_compose_once", False):
        return
    compose = loader.load_sweep_config
    kept: dict = {}

    def load_sweep_config(master_config, sweep_overrides, *, _take=False):
        key = (id(master_config), tuple(sweep_overrides))
        if _take and key in kept:
            return kept.pop(key)
        cfg = compose(master_config, list(sweep_overrides))
        if not _take:  # the sweeper only checks that the point composes; it keeps nothing
            kept[key] = cfg
        return cfg

    loader.load_sweep_config = load_sweep_config
    loader._gx_compose_once = True


class GxRayLauncher(Launcher):
    def __init__(self) -> None:
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function
        _compose_once(hydra_context.config_loader)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from collectives.errors import SpecError
        from pipelines.outputs import user_error
        from pipelines.schema import validate
        from pipelines.sweep import SweepPoint, point_config, run_sweep

        assert self.config is not None and self.hydra_context is not None
        pipeline = getattr(self.task_function, "gx_pipeline", None)
        if pipeline is None:
            user_error("hydra/launcher=gx_ray runs gxnet pipelines only")
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        points, sweep_cfgs = [], []
        for i, overrides in enumerate(job_overrides):
            idx = initial_job_idx + i
            try:
                # setup() wrapped the loader: take the sweeper's composition of this point
                sweep_cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides), _take=True)
                with open_dict(sweep_cfg):
                    sweep_cfg.hydra.job.id = idx
                    sweep_cfg.hydra.job.num = idx
                subdir = str(OmegaConf.select(sweep_cfg, "hydra.sweep.subdir"))
                with open_dict(sweep_cfg):
                    sweep_cfg.hydra.runtime.output_dir = str((sweep_dir / subdir).resolve())
                plain = OmegaConf.to_container(sweep_cfg, resolve=False)
                plain.pop("hydra", None)
                plain = OmegaConf.to_container(OmegaConf.create(plain), resolve=True)
                validate(pipeline, plain)
            except Exception as exc:
                user_error(f"sweep point #{idx} ({' '.join(overrides)}): {' '.join(str(exc).split())}")
            sweep_cfgs.append(sweep_cfg)
            points.append(SweepPoint(index=idx, overrides=list(filter_overrides(overrides)),
                                     cfg=point_config(plain), out_dir=(sweep_dir / subdir).resolve(),
                                     job_cfg=sweep_cfg))
        ray_cfg = dict(self.config.get("ray") or {})
        tracking_cfg = dict(self.config.get("tracking") or {})
        sweep_cfg = dict(self.config.get("sweep") or {}) if isinstance(self.config.get("sweep"), DictConfig) else {}
        sweep_hash = hashlib.sha256(json.dumps(
            {"pipeline": pipeline, "points": sorted(p.cfg_hash or json.dumps(p.cfg, sort_keys=True, default=str) for p in points)},
            sort_keys=True).encode()).hexdigest()[:16]
        sweep_name = tracking_cfg.get("sweep_name") or f"{pipeline} sweep ({len(points)} points)"
        try:
            summary = run_sweep(pipeline, points, ray_cfg=ray_cfg, tracking_cfg=tracking_cfg,
                                sweep_name=sweep_name, sweep_hash=sweep_hash, sweep_cfg=sweep_cfg,
                                timeline_path=sweep_dir.resolve() / "sweep_timeline.json")
        except SpecError as exc:  # a Ray cluster that cannot be joined, a bad sweep.* value
            user_error(str(exc))
        write_sweep_record(sweep_dir.resolve(), pipeline=pipeline, sweep_name=sweep_name, sweep_hash=sweep_hash,
                           tracking_cfg=tracking_cfg, summary=summary)
        returns = []
        for p, cfg in zip(points, sweep_cfgs):
            # failed points are recorded (MLflow, summary) rather than raised; the exit code says so
            ret = JobReturn(overrides=p.overrides, cfg=cfg, hydra_cfg=None, working_dir=str(p.out_dir),
                            task_name=pipeline, status=JobStatus.COMPLETED)
            ret.return_value = {"failed": summary.errors[p.index]} if p.index in summary.errors else None
            returns.append(ret)
        sys.stdout.flush()
        sys.stderr.flush()
        if summary.head_lost:
            # Ray's exit handlers would wait on the lost head; the summary is out, files and runs are written
            os._exit(summary.exit_code)
        if summary.exit_code:
            sys.exit(summary.exit_code)
        return returns


def write_sweep_record(sweep_dir: Path, *, pipeline: str, sweep_name: str, sweep_hash: str, tracking_cfg: dict,
                       summary) -> None:
    """``sweep.json`` in the sweep directory: which MLflow parent run holds this sweep (``gx report
    sweep=<parent_run_id>``, as ``dev.py run`` does), and how it ended."""
    from pipelines.outputs import write_atomic

    record = {"pipeline": pipeline, "sweep_name": sweep_name, "sweep_hash": sweep_hash,
              "parent_run_id": summary.parent_run_id, "tracking_uri": None,
              "experiment": tracking_cfg.get("experiment") or "gxnet", "exit_code": summary.exit_code,
              **summary.as_dict()}
    if summary.parent_run_id is not None:
        from pipelines.tracking import default_uri

        record["tracking_uri"] = tracking_cfg.get("uri") or default_uri()
    write_atomic(sweep_dir / "sweep.json", json.dumps(record, indent=1) + "\n")
