"""Rewrite the golden results.json files of tests/golden/cases.py (run from the repository root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES, GOLDEN_DIR  # noqa: E402

ROOT = GOLDEN_DIR.parent.parent


def main(names: list[str]) -> None:
    env = dict(os.environ, GX_TRACKING="false")
    for name, (pipeline, overrides) in CASES.items():
        if names and name not in names:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", f"pipelines.{pipeline}", *overrides, f"hydra.run.dir={tmp}"]
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            if proc.returncode:
                sys.exit(f"{name}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
            results = json.loads((Path(tmp) / "results.json").read_text())
        (GOLDEN_DIR / f"{name}.json").write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
        print(f"wrote {name}.json")


if __name__ == "__main__":
    main(sys.argv[1:])
