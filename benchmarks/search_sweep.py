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


def overhead(points: int = 64) -> None:
    """Ray's cost per point: a sweep of millisecond-scale `demand` points, three ways."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, extra in (("one process", ["ray.enabled=false"]),
                             ("ray, batch_size=1", ["ray.batch_size=1"]),
                             ("ray, batch_size=auto", [])):
            cmd = [sys.executable, "-m", "pipelines.demand", "-m", f"batch=range(1,{points + 1})", "context=32K",
                   "tracking.enabled=false", f"hydra.sweep.dir={Path(tmp) / f'mode{len(rows)}'}", *extra]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if proc.returncode:
                sys.exit(f"sweep failed:\n{proc.stderr[-3000:]}")
            wall = time.perf_counter() - t0
            import re

            m = re.search(r"skipped in ([0-9.]+) s", proc.stderr)
            rows.append((label, wall, float(m.group(1)) if m else float("nan")))
    base = rows[0][2]
    print(f"Ray overhead, {points} millisecond-scale points (`gx demand -m batch=range(1,{points + 1})`):")
    print(f"{'mode':<22} {'command wall s':>15} {'sweep s (run_sweep)':>20} {'extra ms/point':>15}")
    for label, wall, sweep in rows:
        print(f"{label:<22} {wall:>15.1f} {sweep:>20.2f} {1e3 * (sweep - base) / points:>15.1f}")
    print("(command wall includes composing and validating every point before the sweep starts)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fabrics", default="all_eps,hybrid,all_ocs")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--overhead", action="store_true", help="measure Ray's per-point overhead instead")
    args = ap.parse_args()
    if args.overhead:
        overhead()
        return
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
