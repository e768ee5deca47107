"""Hydra launcher ``hydra/launcher=gx_ray``: multirun points on Ray, tracked in MLflow.

All points are composed (and validated) in the driver before Ray starts, so a bad override
fails fast with Hydra's message; composition runs Hydra once per distinct set of config-group
overrides (``compose.LeafComposer``) and keeps per point only its overrides and hash. Execution, batching, progress and MLflow logging are in
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
from omegaconf import DictConfig

from hydra_plugins.gx_ray_launcher.compose import LeafComposer


@dataclass
class GxRayLauncherConf:
    _target_: str = "hydra_plugins.gx_ray_launcher.gx_ray_launcher.GxRayLauncher"


ConfigStore.instance().store(group="hydra/launcher", name="gx_ray", node=GxRayLauncherConf, provider="gxnet")


def _compose_once(loader) -> None:
    """Hydra's sweeper composes every point to check the batch before the launcher sees it.
    The launcher composes the points itself (:class:`LeafComposer`: Hydra once per distinct set
    of config-group overrides, plain values set on copies), so the sweeper's check becomes
    the same fast check: one composition per distinct base, a dict walk per swept value."""
    if getattr(loader, "_gx_compose_once", False):
        return
    compose = loader.load_sweep_config
    composers: dict = {}

    def load_sweep_config(master_config, sweep_overrides):
        composer = composers.get(id(master_config))
        if composer is None:
            composer = composers[id(master_config)] = LeafComposer(compose, master_config,
                                                                   loader.repository.group_exists)
        composer.check(list(sweep_overrides))
        return None  # the sweeper keeps nothing; the launcher composes

    loader.load_sweep_config = load_sweep_config
    loader._gx_compose_once = True
    loader._gx_compose = compose
    loader._gx_composers = composers


class GxRayLauncher(Launcher):
    def __init__(self) -> None:
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function
        _compose_once(hydra_context.config_loader)
        if getattr(task_function, "gx_pipeline", None) is not None:
            from pipelines.ray_cluster import start_early

            start_early(dict(config.get("ray") or {}))  # Ray starts while the points are composed

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from collectives.errors import SpecError
        from pipelines.outputs import user_error
        from pipelines.sweep import run_sweep

        assert self.config is not None and self.hydra_context is not None
        pipeline = getattr(self.task_function, "gx_pipeline", None)
        if pipeline is None:
            user_error("hydra/launcher=gx_ray runs gxnet pipelines only")
        sweep_dir = Path(str(self.config.hydra.sweep.dir)).resolve()
        loader = self.hydra_context.config_loader
        composer = loader._gx_composers.get(id(self.config)) or LeafComposer(
            loader._gx_compose, self.config, loader.repository.group_exists)
        points = PointSource(pipeline, composer, job_overrides, initial_job_idx, sweep_dir)
        points.check_all()  # every point composed and validated before Ray starts
        ray_cfg = dict(self.config.get("ray") or {})
        tracking_cfg = dict(self.config.get("tracking") or {})
        sweep_cfg = dict(self.config.get("sweep") or {}) if isinstance(self.config.get("sweep"), DictConfig) else {}
        sweep_hash = hashlib.sha256(json.dumps({"pipeline": pipeline, "points": sorted(points.hashes)},
                                               sort_keys=True).encode()).hexdigest()[:16]
        sweep_name = tracking_cfg.get("sweep_name") or f"{pipeline} sweep ({len(points)} points)"
        try:
            summary = run_sweep(pipeline, points, ray_cfg=ray_cfg, tracking_cfg=tracking_cfg,
                                sweep_name=sweep_name, sweep_hash=sweep_hash, sweep_cfg=sweep_cfg,
                                timeline_path=sweep_dir / "sweep_timeline.json", sweep_dir=sweep_dir)
        except SpecError as exc:  # a Ray cluster that cannot be joined, a bad sweep.* value
            user_error(str(exc))
        write_sweep_record(sweep_dir, pipeline=pipeline, sweep_name=sweep_name, sweep_hash=sweep_hash,
                           tracking_cfg=tracking_cfg, summary=summary)
        returns = []
        for i, overrides in enumerate(job_overrides):
            idx = initial_job_idx + i
            # failed points are recorded (MLflow, summary) rather than raised; the exit code says so
            ret = JobReturn(overrides=list(filter_overrides(overrides)), cfg=None, hydra_cfg=None,
                            working_dir=str(sweep_dir / points.subdir(i)), task_name=pipeline,
                            status=JobStatus.COMPLETED)
            ret.return_value = {"failed": summary.errors[idx]} if idx in summary.errors else None
            returns.append(ret)
        sys.stdout.flush()
        sys.stderr.flush()
        if summary.head_lost:
            # Ray's exit handlers would wait on the lost head; the summary is out, files and runs are written
            os._exit(summary.exit_code)
        if cli_process() and self.config.hydra.sweeper.get("max_batch_size") is None:  # the last batch
            exit_now(summary.exit_code)
        if summary.exit_code:
            sys.exit(summary.exit_code)
        return returns


def cli_process() -> bool:
    """Whether this process is the ``gx``/``python -m pipelines.<name>`` command itself (not, say,
    a test calling an entry point in-process): only then may the sweep end the process."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    return name.startswith("pipelines.") or Path(getattr(main, "__file__", "") or "").name == "gx"


def exit_now(code: int) -> None:
    """End the command once the sweep is written: stop this driver's Ray
    (:func:`pipelines.ray_cluster.stop_before_exit`), close the log files, and leave without the interpreter's
    teardown, which waits ~1-3 s on Ray's and gRPC's threads after the last line is out. Every
    result, table line and MLflow run is on disk by now (the writer thread has been joined); the
    report process runs on by itself."""
    import logging

    from pipelines.ray_cluster import stop_before_exit

    stop_before_exit()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class SharedNodes:
    """Checking and hashing a point by its top-level nodes: a fast-path point shares every node
    its leaf overrides do not touch with its base (the same objects), so those are validated
    and serialised once per base. The schema checks (``pipelines.schema.validate``) are per
    group node and per numeric leaf, and join fabric with network: a point's changed nodes are
    checked with both of those whenever one changed. The hash is ``config_hash``'s exactly
    (the same JSON text, put together from cached pieces)."""

    JOINT = ("fabric", "network")

    def __init__(self) -> None:
        # keyed by id() and holding the object itself, so an id is never reused while it is a key
        self._checked: dict[int, dict] = {}        # bases validated whole
        self._json: dict[int, tuple] = {}          # a base's node -> (node, its JSON)

    def changed(self, c) -> dict:
        """The part of the point's config ``validate`` has not seen: all of it for a new base."""
        if c.base is None or id(c.base) not in self._checked:
            if c.base is not None:
                self._checked[id(c.base)] = c.base
            return c.plain
        part = {k: v for k, v in c.plain.items() if c.base.get(k) is not v}
        if any(k in part for k in self.JOINT):
            part.update({k: c.plain[k] for k in self.JOINT if k in c.plain})
        return part

    def config_hash(self, pipeline: str, cfg: dict, base: dict | None) -> str:
        parts = []
        for key in sorted(cfg):
            value = cfg[key]
            shared = base is not None and isinstance(value, (dict, list)) and base.get(key) is value
            hit = self._json.get(id(value)) if shared else None
            if hit is not None and hit[0] is value:
                text = hit[1]
            else:
                text = json.dumps(value, sort_keys=True, default=str)
                if shared:
                    if len(self._json) > 4096:
                        self._json.clear()
                    self._json[id(value)] = (value, text)
            parts.append(f"{json.dumps(key)}: {text}")
        body = '{"cfg": {' + ", ".join(parts) + '}, "pipeline": ' + json.dumps(pipeline) + "}"
        return hashlib.sha256(body.encode()).hexdigest()[:16]


class PointSource:
    """A sweep's points, composed when asked for: the driver keeps a point's overrides and
    config hash (a row), never its composed config, so a 50,000-point sweep holds megabytes."""

    def __init__(self, pipeline: str, composer: LeafComposer, job_overrides: Sequence[Sequence[str]],
                 initial_job_idx: int, sweep_dir: Path):
        self.pipeline, self.composer, self.sweep_dir = pipeline, composer, sweep_dir
        self.job_overrides, self.first = job_overrides, initial_job_idx
        self.hashes: list[str] = []
        self._subdirs: list[str] = []

    def __len__(self) -> int:
        return len(self.job_overrides)

    def check_all(self) -> None:
        """Compose and validate every point (one line and exit 2 for a bad one); keep its hash."""
        from pipelines.outputs import user_error
        from pipelines.schema import validate
        from pipelines.sweep import point_config

        checked = SharedNodes()
        for i, overrides in enumerate(self.job_overrides):
            try:
                c = self.composer.compose(list(overrides), self.first + i)
                validate(self.pipeline, checked.changed(c))
            except Exception as exc:
                user_error(f"sweep point #{self.first + i} ({' '.join(overrides)}): {' '.join(str(exc).split())}")
            self.hashes.append(checked.config_hash(self.pipeline, point_config(c.plain), c.base))
            self._subdirs.append(c.subdir)

    def subdir(self, i: int) -> str:
        return self._subdirs[i]

    def overrides(self, i: int) -> list[str]:
        return list(filter_overrides(self.job_overrides[i]))

    def index(self, i: int) -> int:
        return self.first + i

    def __getitem__(self, i: int):
        from pipelines.sweep import SweepPoint, point_config

        c = self.composer.compose(list(self.job_overrides[i]), self.first + i)
        out_dir = self.sweep_dir / c.subdir
        hydra = dict(c.hydra)
        hydra["runtime"] = {**hydra.get("runtime", {}), "output_dir": str(out_dir)}
        return SweepPoint(index=self.first + i, overrides=self.overrides(i), cfg=point_config(c.plain),
                          out_dir=out_dir, cfg_hash=self.hashes[i], job_cfg={**c.unresolved, "hydra": hydra})


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
