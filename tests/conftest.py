import os

os.environ.setdefault("GX_TRACKING", "false")  # tests opt in to MLflow explicitly
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_pipeline(name: str, *overrides: str, out_dir: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m pipelines.<name>`` with Hydra's run dir set to ``out_dir``."""
    env = dict(os.environ)
    env.setdefault("HYDRA_FULL_ERROR", "0")
    cmd = [sys.executable, "-m", f"pipelines.{name}", *overrides, f"hydra.run.dir={out_dir}"]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def pipeline(tmp_path):
    """``pipeline("decode", "batch=4")`` -> (CompletedProcess, out_dir)."""
    counter = {"n": 0}

    def _run(name: str, *overrides: str, timeout: float = 300):
        counter["n"] += 1
        out = tmp_path / f"run{counter['n']}"
        return run_pipeline(name, *overrides, out_dir=out, timeout=timeout), out

    return _run
