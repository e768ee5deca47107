#!/usr/bin/env python3
"""Set-up and entry commands that need nothing but Python 3.11 and pip.

    python3 dev.py run [overrides]   install into .venv (idempotent) and run the main job: a Megatron 5T
                                     decode step on 512 RX00 on the three scale-up fabrics at batch
                                     1/4/16 (gx decode -m experiment=fabric_comparison, on local Ray,
                                     into ./mlflow.db), then its report (table + figures)
    python3 dev.py test [pytest args] install into .venv (idempotent) and run the test suite
    python3 dev.py gx PIPELINE [...] run any pipeline inside .venv

Installation is skipped when .venv already holds this exact pyproject.toml (hash stamp).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
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


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in {"run", "test", "gx", "install"}:
        print(__doc__)
        sys.exit(2)
    what, rest = sys.argv[1], sys.argv[2:]
    install()
    os.chdir(ROOT)
    if what == "run":
        sweep = subprocess.run([str(BIN / "gx"), "decode", "-m", "experiment=fabric_comparison", *rest], cwd=ROOT)
        if sweep.returncode:
            sys.exit(sweep.returncode)
        os.execv(str(BIN / "gx"), [str(BIN / "gx"), "report", "pipeline=decode", "hydra.run.dir=outputs/report"])
    if what == "gx":
        os.execv(str(BIN / "gx"), [str(BIN / "gx"), *rest])
    if what == "test":
        os.execv(str(BIN / "python"), [str(BIN / "python"), "-m", "pytest", "-q", "-n", "2", *rest])


if __name__ == "__main__":
    main()
