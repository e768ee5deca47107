"""Benchmark: the 2,160-point Megatron 5T analytical search as one -m sweep, Ray vs one process.

72 Helix splits x 5 batches x 2 contexts x 3 fabrics (issue: orchestration; paper 003 B.6).
Runs the same sweep twice (``ray.enabled=true`` with all cores, then ``ray.enabled=false``),
MLflow off so only execution is measured, and prints wall times, points/s and the speed-up.

    .venv/bin/python benchmarks/search_sweep.py [--fabrics all_eps,hybrid,all_ocs] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(fabrics: str, ray: bool, out: Path) -> float:
    cmd = [sys.executable, "-m", "pipelines.search", "-m", "batch=1,2,4,8,16", "context=32K,5M",
           f"fabric={fabrics}", f"ray.enabled={str(ray).lower()}", "tracking.enabled=false",
           f"hydra.sweep.dir={out}"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ))
    wall = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"sweep failed:\n{proc.stderr[-3000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fabrics", default="all_eps,hybrid,all_ocs")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    n_cells = 5 * 2 * len(args.fabrics.split(","))
    walls: dict[str, list[float]] = {"ray": [], "one process": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            walls["ray"].append(run(args.fabrics, True, Path(tmp) / f"ray{r}"))
            walls["one process"].append(run(args.fabrics, False, Path(tmp) / f"seq{r}"))
        points = sum(json.loads(p.read_text())["count"] for p in (Path(tmp) / "ray0").glob("*/results.json"))
    med = {k: statistics.median(v) for k, v in walls.items()}
    print(f"{n_cells} cells, {points} timed splits, {os.cpu_count()} cores")
    print(f"{'mode':<12} {'median wall s':>14} {'points/s':>10}")
    for k, v in med.items():
        print(f"{k:<12} {v:>14.1f} {points / v:>10.1f}")
    print(f"speed-up of Ray over one process: {med['one process'] / med['ray']:.2f}x")


if __name__ == "__main__":
    main()
