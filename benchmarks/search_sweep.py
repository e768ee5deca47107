"""Benchmark: the 2,160-point Megatron 5T analytical search as one -m sweep, Ray vs one process.

72 Helix splits x 5 batches x 2 contexts x 3 fabrics (issue: orchestration; paper 003 B.6), i.e.
``gx search -m experiment=figure4_megatron``. Runs the same sweep with Ray (all cores) and in one
process (``ray.enabled=false``), alternating, MLflow off so only execution is measured, and
prints command wall times (what a user waits for, start-up and composition included), the
sweep's own time, points/s, how busy the Ray workers were, and the speed-up.

    .venv/bin/python benchmarks/search_sweep.py [--experiment figure4_megatron] [--repeats 1]

``--compare REF`` measures before/after side by side in one run instead: the same sweep with
the code of git commit REF and of ``--after`` (default HEAD; both exported to a temporary
folder, so edits made meanwhile do not leak in), alternating, wall and CPU seconds, Ray
on, MLflow on (``--tracking off`` for off), this tree twice: with a cold OCS plan store (a fresh
``GX_PLAN_STORE`` folder each run) and with the warm store the cold run left. Prints each run as
it ends and the medians:

    .venv/bin/python benchmarks/search_sweep.py --compare 6f183eb --repeats 3

``--variants ',ray.affinity=[]'`` compares override sets on this tree instead (alternated, cold
plan store each run, MLflow on): command wall, first-to-last point span, workers' busy time, and
whether every point's results are byte-identical.

``--compare REF --cells`` measures the point work alone the same way: the six cells of batch 1
(three fabrics x two contexts) in one fresh process per run, CPU seconds per cell, and whether
every variant gives the same results; ``--cell-list all_ocs`` runs the ten all-OCS cells (batches
1-16 x 32K, 5M, colocated as a worker runs them), ``--cell-list all`` the 30 cells of the
figure-4 search in sweep order, or give any comma-separated list. Each tree plans with its own
OCS plan store, warmed by one untimed run; the after tree is also timed with an empty store.
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


def run(experiment: str, ray: bool, out: Path) -> tuple[float, float, str]:
    """(command wall s, sweep wall s, Ray workers' busy share) of one run."""
    import re

    cmd = [sys.executable, "-m", "pipelines.search", "-m", f"experiment={experiment}",
           f"ray.enabled={str(ray).lower()}", "tracking.enabled=false", f"hydra.sweep.dir={out}"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ))
    wall = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"sweep failed:\n{proc.stderr[-3000:]}")
    m = re.search(r"skipped in ([0-9.]+) s(?:; Ray workers busy (\d+) %)?", proc.stderr)
    return wall, float(m.group(1)) if m else float("nan"), (m.group(2) + " %") if m and m.group(2) else "-"


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


def export_commit(ref: str, dest: Path) -> Path:
    """The tree of commit ``ref`` as plain files under ``dest`` (``git archive``)."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    # the tree's optional C extensions (untracked build products), built as an install builds them:
    # without them the planners run their Python fallbacks
    if (dest / "setup.py").exists():
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=dest,
                       capture_output=True, check=True)
    return dest


def timed_sweep(code: Path, experiment: str, tmp: Path, tracking: bool, store: Path | None) -> tuple[float, float]:
    """(wall s, CPU s of the command and every process it waited for: Ray's included) of one
    ``gx search -m`` sweep of ``code`` (Ray on), from a clean folder. CPU time is what a loaded
    machine does not inflate."""
    import resource

    run_dir = Path(tempfile.mkdtemp(dir=tmp))
    env = {k: v for k, v in os.environ.items() if k not in ("GX_PLAN_STORE", "MLFLOW_TRACKING_URI")}
    env.update(PYTHONPATH=str(code), MLFLOW_TRACKING_URI=f"sqlite:///{run_dir}/mlflow.db",
               GX_PLAN_STORE=str(store) if store is not None else "off",  # compiled programs go with the plans
               GX_PROGRAM_STORE=f"{store}-programs" if store is not None else "off")
    cmd = [sys.executable, "-m", "pipelines.search", "-m", f"experiment={experiment}",
           f"tracking.enabled={str(tracking).lower()}", f"hydra.sweep.dir={run_dir / 'sweep'}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=code, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        sys.exit(f"sweep of {code} failed:\n{proc.stderr[-3000:]}")
    wait_for_report(proc.stderr)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def compare_variants(variants: list[str], experiment: str, repeats: int) -> None:
    """This tree with each comma-free override set of ``variants`` ('' = as configured), alternated,
    Ray and MLflow on, a cold plan store each run: command wall, the sweep's first point start to
    last point end, and the Ray workers' summed point time (``sweep_timeline.json``), plus whether
    every point's results.json is byte-identical across all runs."""
    import hashlib

    rows: dict[str, list[tuple[float, float, float]]] = {v: [] for v in variants}
    digests: dict[str, set] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            for v in variants:
                run_dir = Path(tempfile.mkdtemp(dir=tmp))
                env = {k: x for k, x in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
                env.update(GX_PLAN_STORE=str(run_dir / "plans"), GX_PROGRAM_STORE=str(run_dir / "programs"),
                           MLFLOW_TRACKING_URI=f"sqlite:///{run_dir}/mlflow.db")
                cmd = [sys.executable, "-m", "pipelines.search", "-m", f"experiment={experiment}",
                       f"hydra.sweep.dir={run_dir / 'sweep'}", *v.split()]
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
                wall = time.perf_counter() - t0
                if proc.returncode:
                    sys.exit(f"sweep {v!r} failed:\n{proc.stderr[-3000:]}")
                wait_for_report(proc.stderr)
                points = json.loads((run_dir / "sweep" / "sweep_timeline.json").read_text())["points"]
                span = max(x["start_s"] + x["wall_s"] for x in points) - min(x["start_s"] for x in points)
                rows[v].append((wall, span, sum(x["wall_s"] for x in points)))
                for f in (run_dir / "sweep").glob("[0-9]*/results.json"):
                    digests.setdefault(f.parent.name, set()).add(hashlib.sha256(f.read_bytes()).hexdigest())
                print(f"  run {r + 1}: {v or '(as configured)':<28} wall {wall:6.1f} s   first-last point "
                      f"{span:5.1f} s   workers busy {rows[v][-1][2]:5.1f} s", flush=True)
    med = statistics.median
    print(f"{'variant':<30} {'wall s':>7} {'first-last s':>13} {'busy s':>7}   runs (wall s)")
    for v, rs in rows.items():
        print(f"{v or '(as configured)':<30} {med(w for w, _, _ in rs):>7.1f} {med(s for _, s, _ in rs):>13.1f} "
              f"{med(b for _, _, b in rs):>7.1f}   " + ", ".join(f"{w:.1f}" for w, _, _ in rs))
    print("same results in every run:", "yes" if all(len(d) == 1 for d in digests.values()) else "NO")


def wait_for_report(stderr: str, limit_s: float = 120.0) -> None:
    """The sweep's report is attached to its MLflow parent run by a background process that
    outlives the command; the next timed run starts once it has ended, so runs do not overlap."""
    import re

    m = re.search(r"in the background \(pid (\d+);", stderr)
    if not m:
        return
    pid, deadline = int(m.group(1)), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.1)


def compare(ref: str, after_ref: str, experiment: str, repeats: int, tracking: bool) -> None:
    import shutil

    label = {"before": f"before ({ref})", "cold": f"{after_ref}, cold plan store", "warm": f"{after_ref}, warm plan store"}
    walls: dict[str, list[tuple[float, float]]] = {k: [] for k in label}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        before = export_commit(ref, tmp / "before")
        after = export_commit(after_ref, tmp / "after")
        store = tmp / "plan-store"
        print(f"experiment={experiment}, Ray on, MLflow {'on' if tracking else 'off'}, {os.cpu_count()} cores; "
              f"{repeats} run(s) each, alternating", flush=True)
        for r in range(repeats):
            shutil.rmtree(store, ignore_errors=True)
            shutil.rmtree(f"{store}-programs", ignore_errors=True)
            for key, code, st in (("before", before, None), ("cold", after, store), ("warm", after, store)):
                walls[key].append(timed_sweep(code, experiment, tmp, tracking, st))
                w, c = walls[key][-1]
                print(f"  run {r + 1}: {label[key]:<30} wall {w:7.1f} s   CPU {c:7.1f} s", flush=True)
    print(f"{'code':<32} {'median wall s':>14} {'median CPU s':>13}   runs (wall s)")
    for key, v in walls.items():
        print(f"{label[key]:<32} {statistics.median(w for w, _ in v):>14.1f} {statistics.median(c for _, c in v):>13.1f}   "
              f"{', '.join(f'{w:.1f}' for w, _ in v)}")
    for i, what in ((0, "wall"), (1, "CPU")):
        base = statistics.median(v[i] for v in walls["before"])
        print(f"speed-up over {ref} ({what}): cold store {base / statistics.median(v[i] for v in walls['cold']):.2f}x, "
              f"warm store {base / statistics.median(v[i] for v in walls['warm']):.2f}x")


CELLS = ("all_ocs:1:32K", "all_ocs:1:5M", "hybrid:1:32K", "hybrid:1:5M", "all_eps:1:32K", "all_eps:1:5M")


def cell_worker(cells: list[str]) -> None:
    """In this process (the code on PYTHONPATH): CPU s and a results digest per search cell."""
    import hashlib

    from hydra import compose, initialize_config_dir

    code = Path(os.environ["PYTHONPATH"].split(os.pathsep)[0])
    with initialize_config_dir(config_dir=str(code / "conf"), version_base=None):
        cfgs = [compose("search", overrides=["experiment=figure4_megatron", f"fabric={f}", f"batch={b}",
                                             f"context={c}", "tracking=off"])
                for f, b, c in (cell.split(":") for cell in cells)]
    from pipelines.search import task

    out = []
    for cell, cfg in zip(cells, cfgs):
        t0 = time.process_time()
        results, _ = task(cfg)
        out.append({"cell": cell, "cpu_s": time.process_time() - t0,
                    "digest": hashlib.sha256(json.dumps(results, sort_keys=True).encode()).hexdigest()[:16]})
    print("CELLS" + json.dumps(out))


def compare_cells(ref: str, after_ref: str, repeats: int, cells=CELLS) -> None:
    """Point work before/after: the cells in one fresh process per run (colocated as a sweep runs
    them), CPU seconds (not inflated by a loaded machine), results digests compared. Each tree
    has its own OCS plan store, filled by one untimed run first ("warm"); "cold" runs the after
    tree with an empty store each time."""
    import shutil

    label = {"before": f"before ({ref}), warm store", "cold": f"{after_ref}, cold plan store",
             "warm": f"{after_ref}, warm plan store"}
    runs: dict[str, list[list[dict]]] = {k: [] for k in label}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        trees = {"before": export_commit(ref, tmp / "before"), "after": export_commit(after_ref, tmp / "after")}
        stores = {"before": tmp / "store-before", "warm": tmp / "store-after", "cold": tmp / "store-cold"}

        def cells_run(key: str) -> list[dict]:
            tree = "before" if key == "before" else "after"
            env = dict(os.environ, PYTHONPATH=str(trees[tree]), GX_PLAN_STORE=str(stores[key]),
                       GX_PROGRAM_STORE=f"{stores[key]}-programs")
            proc = subprocess.run([sys.executable, __file__, "--cell-worker", *cells], cwd=trees[tree],
                                  capture_output=True, text=True, env=env)
            if proc.returncode:
                sys.exit(f"cells of {tree} failed:\n{proc.stderr[-3000:]}")
            return json.loads(proc.stdout.split("CELLS", 1)[1])

        cells_run("before"), cells_run("warm")  # fill each tree's store (untimed)
        for r in range(repeats):
            shutil.rmtree(stores["cold"], ignore_errors=True)
            shutil.rmtree(f"{stores['cold']}-programs", ignore_errors=True)
            for key in ("before", "cold", "warm"):
                runs[key].append(cells_run(key))
                print(f"  run {r + 1}: {label[key]:<34} CPU {sum(c['cpu_s'] for c in runs[key][-1]):7.1f} s", flush=True)
    print(f"search cells in one process, CPU s, median of {repeats} run(s):")
    print(f"{'cell':<16}" + "".join(f"{label[k]:>36}" for k in label) + "   same results")
    for i, cell in enumerate(cells):
        meds = [statistics.median(run[i]["cpu_s"] for run in runs[k]) for k in label]
        same = len({run[i]["digest"] for k in label for run in runs[k]}) == 1
        print(f"{cell:<16}" + "".join(f"{m:>36.2f}" for m in meds) + f"   {'yes' if same else 'NO'}")
    totals = {k: statistics.median(sum(c["cpu_s"] for c in run) for run in runs[k]) for k in label}
    print(f"{'total':<16}" + "".join(f"{totals[k]:>36.2f}" for k in label))
    print(f"speed-up over {ref} (warm store): cold store {totals['before'] / totals['cold']:.2f}x, "
          f"warm store {totals['before'] / totals['warm']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cell-worker", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--cells", action="store_true", help="with --compare: point work of single cells, CPU s")
    ap.add_argument("--cell-list", metavar="CELLS", help="with --cells: comma-separated fabric:batch:context cells "
                    "run in order in one process (default: the six batch-1 cells); 'all_ocs' = the ten all-OCS "
                    "cells, 'all' = the 30 cells of figure4_megatron")
    ap.add_argument("--compare", metavar="REF", help="before/after: git commit --after against git commit REF")
    ap.add_argument("--after", default="HEAD", help="the 'after' commit of --compare (default HEAD)")
    ap.add_argument("--tracking", choices=("on", "off"), default="on", help="MLflow in --compare runs")
    ap.add_argument("--experiment", default="figure4_megatron")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--overhead", action="store_true", help="measure Ray's per-point overhead instead")
    ap.add_argument("--variants", metavar="A,B", help="this tree with these override sets alternated, e.g. "
                    "',ray.affinity=[]' ('' = as configured; space-separated overrides within a set)")
    args = ap.parse_args()
    if args.cell_worker:
        cell_worker(args.cell_worker)
        return
    if args.compare and args.cells:
        cells = CELLS
        if args.cell_list in ("all_ocs", "all"):  # sweep order: fabric, then batch, then context
            fabrics = ("all_ocs",) if args.cell_list == "all_ocs" else ("all_ocs", "hybrid", "all_eps")
            cells = tuple(f"{f}:{b}:{c}" for f in fabrics for b in (1, 2, 4, 8, 16) for c in ("32K", "5M"))
        elif args.cell_list:
            cells = tuple(args.cell_list.split(","))
        compare_cells(args.compare, args.after, args.repeats, cells)
        return
    if args.compare:
        compare(args.compare, args.after, args.experiment, args.repeats, args.tracking == "on")
        return
    if args.overhead:
        overhead()
        return
    if args.variants is not None:
        compare_variants(args.variants.split(","), args.experiment, args.repeats)
        return
    runs: dict[str, list[tuple[float, float, str]]] = {"ray": [], "one process": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            runs["ray"].append(run(args.experiment, True, Path(tmp) / f"ray{r}"))
            runs["one process"].append(run(args.experiment, False, Path(tmp) / f"seq{r}"))
        results = list((Path(tmp) / "ray0").glob("*/results.json"))
        points = sum(json.loads(p.read_text())["count"] for p in results)
    med = {k: statistics.median(w for w, _, _ in v) for k, v in runs.items()}
    med_sweep = {k: statistics.median(s for _, s, _ in v) for k, v in runs.items()}
    print(f"experiment={args.experiment}: {len(results)} cells, {points} timed splits, {os.cpu_count()} cores, "
          f"{args.repeats} run(s) each")
    print(f"{'mode':<12} {'command wall s':>15} {'sweep s':>8} {'points/s':>9} {'workers busy':>13}   runs (wall s)")
    for k, v in runs.items():
        print(f"{k:<12} {med[k]:>15.1f} {med_sweep[k]:>8.1f} {points / med[k]:>9.1f} {v[0][2]:>13}   "
              f"{', '.join(f'{w:.1f}' for w, _, _ in v)}")
    print(f"speed-up of Ray over one process: {med['one process'] / med['ray']:.2f}x (command wall), "
          f"{med_sweep['one process'] / med_sweep['ray']:.2f}x (sweep only)")


if __name__ == "__main__":
    main()
