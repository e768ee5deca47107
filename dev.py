#!/usr/bin/env python3
"""Set-up and entry commands that need nothing but Python 3.11 and pip.

    python3 dev.py run [overrides]   install into .venv (idempotent) and run the main job: a Megatron 5T
                                     decode step on 512 RX00 on the three scale-up fabrics at batch
                                     1/4/16 (gx decode -m experiment=fabric_comparison, on a private
                                     Ray, into ./mlflow.db, job folders in outputs/sweeps/<time>), then
                                     the report of that sweep (table + figures in outputs/report)
    python3 dev.py test [pytest args] install into .venv (idempotent) and run the test suite
    python3 dev.py gx PIPELINE [...] run any pipeline inside .venv

Installation is skipped when .venv already holds this exact pyproject.toml (hash stamp).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".gxnet-installed"


def _sh(*cmd: str) -> None:
    result = subprocess.run(cmd, cwd=ROOT)
    if result.returncode:
        sys.exit(result.returncode)


def install() -> None:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    if not (BIN / "python").exists():
        print("[dev] creating .venv", flush=True)
        _sh(sys.executable, "-m", "venv", str(VENV))
    print("[dev] installing gxnet and its pinned dependencies into .venv (first time: a few minutes)", flush=True)
    _sh(str(BIN / "python"), "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    _sh(str(BIN / "python"), "-m", "pip", "install", "--quiet", "-e", ".[test,profile]")
    STAMP.write_text(digest)


def run_main_job(overrides: list[str]) -> int:
    """The main sweep, then the report of *that* sweep (by its MLflow parent run, read from the
    sweep's sweep.json), into an emptied outputs/report. Exit code: the worse of the two."""
    sweep_dir = next((Path(a.split("=", 1)[1]) for a in overrides if a.startswith("hydra.sweep.dir=")), None)
    if sweep_dir is None:
        sweep_dir = Path("outputs") / "sweeps" / time.strftime("%Y-%m-%d_%H-%M-%S")
        overrides = [*overrides, f"hydra.sweep.dir={sweep_dir}"]
    sweep = subprocess.run([str(BIN / "gx"), "decode", "-m", "experiment=fabric_comparison", *overrides], cwd=ROOT)
    if sweep.returncode not in (0, 1):  # 1: some points failed; the others still get their report
        return sweep.returncode
    record_path = ROOT / sweep_dir / "sweep.json"
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    if not record.get("parent_run_id"):
        print("[dev] tracking is off: no report (the report reads the sweep back from MLflow)", flush=True)
        return sweep.returncode
    report_dir = ROOT / "outputs" / "report"
    shutil.rmtree(report_dir, ignore_errors=True)  # no figures of an earlier sweep next to this one's
    report = subprocess.run([str(BIN / "gx"), "report", f"sweep={record['parent_run_id']}",
                             f"tracking.uri='{record['tracking_uri']}'",
                             f"tracking.experiment='{record.get('experiment') or 'gxnet'}'",
                             "hydra.run.dir=outputs/report"], cwd=ROOT)
    return max(sweep.returncode, report.returncode)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in {"run", "test", "gx", "install"}:
        print(__doc__)
        sys.exit(2)
    what, rest = sys.argv[1], sys.argv[2:]
    install()
    os.chdir(ROOT)
    if what == "run":
        sys.exit(run_main_job(rest))
    if what == "gx":
        os.execv(str(BIN / "gx"), [str(BIN / "gx"), *rest])
    if what == "test":
        os.execv(str(BIN / "python"), [str(BIN / "python"), "-m", "pytest", "-q", "-n", "2", "--dist", "worksteal", *rest])


if __name__ == "__main__":
    main()
