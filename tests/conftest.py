import os

os.environ.setdefault("GX_TRACKING", "false")  # tests opt in to MLflow explicitly
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from forked import run_forked

ROOT = Path(__file__).resolve().parent.parent


# pipelines whose runs start torch.distributed process groups: a real subprocess each (a fork of
# a process that may have used torch's thread pools is not safe)
FRESH_PROCESS = frozenset({"replay"})


def run_pipeline(name: str, *overrides: str, out_dir: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m pipelines.<name>`` with Hydra's run dir set to ``out_dir``: in a forked
    child of this process (``forked.run_forked``: the same exit status, output and files, without
    an interpreter start), or as a real subprocess for the pipelines in ``FRESH_PROCESS``."""
    args = [*overrides, f"hydra.run.dir={out_dir}"]
    env = {"HYDRA_FULL_ERROR": os.environ.get("HYDRA_FULL_ERROR", "0")}
    if name not in FRESH_PROCESS:
        module = importlib.import_module(f"pipelines.{name}")
        argv = [module.__file__, *args]  # argv[0] as ``python -m`` sets it
        return run_forked(module.main, argv, cwd=ROOT, env=env, timeout_s=timeout)[0]
    cmd = [sys.executable, "-m", f"pipelines.{name}", *args]
    return subprocess.run(cmd, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def pipeline(tmp_path):
    """``pipeline("decode", "batch=4")`` -> (CompletedProcess, out_dir)."""
    counter = {"n": 0}

    def _run(name: str, *overrides: str, timeout: float = 300):
        counter["n"] += 1
        out = tmp_path / f"run{counter['n']}"
        return run_pipeline(name, *overrides, out_dir=out, timeout=timeout), out

    return _run
