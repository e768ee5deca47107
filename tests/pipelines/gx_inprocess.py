"""Run a pipeline's task in this process: compose its Hydra config, call the task, write its files.

Faster than a subprocess per case (no interpreter start, imports once), used by the determinism
and bad-input-file tests; a few cases in those files still run real subprocesses."""

from __future__ import annotations

import importlib
from pathlib import Path


def compose(pipeline: str, *overrides: str):
    """The composed config of ``pipelines.<pipeline>`` with ``overrides`` (tracking off)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pipelines.app import CONF_DIR

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(version_base=None, config_dir=CONF_DIR):
            return hydra_compose(config_name=pipeline, overrides=[*overrides, "tracking.enabled=false"])
    finally:
        GlobalHydra.instance().clear()


def task_of(pipeline: str):
    return importlib.import_module(f"pipelines.{pipeline}").main.task


def run_task(pipeline: str, *overrides: str, out_dir: Path | None = None):
    """``(results, artifacts)`` of one run; with ``out_dir``, the files written as a CLI run writes them."""
    from pipelines.outputs import write_outputs

    outcome = task_of(pipeline)(compose(pipeline, *overrides))
    results, artifacts = outcome if isinstance(outcome, tuple) else (outcome, None)
    if out_dir is not None:
        write_outputs(Path(out_dir), results, artifacts)
    return results, artifacts or {}
