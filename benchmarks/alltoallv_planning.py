"""VarioPath planning cost (paper 000, Section 6.4, Table 4) on R5080-BF3 at 8, 16 and 32 GPUs.

Prints, side by side with the paper's C++ numbers: offline catalog size and build time (no disk
cache), online planning time per activation -- CPU time (``time.process_time``, so other load
on a shared machine inflates it less) and wall time of Algorithm 2's decomposition --, the CPU
time per activation spent afterwards on emitting Python lane objects for schedule.json ("emit"),
activations, modelled communication time of the planned schedule (flow-level evaluator) and
planning CPU / communication (O/C) for dense Zipf (s = 0.6) demands of 1 GiB per source.
Medians over seeds x repeats. Targets (issue #6): 8-GPU catalog <= 1 s; O/C <= 5 % at 16 GPUs.

Rows ("before" and "after" in one run): ``v1_default`` is the previous default (K_target = 3N,
4 starts x 4 sweeps, M* only, the numpy loop); ``variopath`` is today's default preset and
``variopath@numpy`` the same preset on the numpy reference loop; ``variopath_fast`` and
``variopath_quality`` the other presets. ``--scale`` adds catalog build time and size for
R5080-CX8 clusters up to 256 GPUs (paper: 1616 shapes / 2140 families / 5674 s).

    .venv/bin/python benchmarks/alltoallv_planning.py [--seeds 3] [--repeats 3] [--nodes 1,2,4]
        [--presets v1_default,variopath@numpy,variopath,variopath_fast,variopath_quality] [--scale]

``--quality``: every preset against the certified MILP optimum on the tuning and the held-apart
test seeds of collectives/alltoallv/tuning.py (one and two R5080-BF3 nodes, Zipf s = 0.6 ... 1.2,
32 MiB per source; the MILP once per instance, ~5 min at 16 GPUs), per seed and as means.
``--steady``: planning over modelled communication as ``gx alltoallv`` reports it, at 8 and 16
GPUs (1 GiB per source, Zipf s = 0.6, seed 0): the cold first call of a fresh planner and the
steady state (median of 5 plans of the same demand after a warm-up), wall and CPU; medians of
``--runs`` fresh planners (default 3).

    .venv/bin/python benchmarks/alltoallv_planning.py --quality [--presets ...]
    .venv/bin/python benchmarks/alltoallv_planning.py --steady [--runs 3] [--presets ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import yaml

from collectives.alltoallv import tuning
from collectives.alltoallv.catalog import build_catalog
from collectives.alltoallv.schedulers import make_scheduler
from collectives.alltoallv.variopath import VarioPathParams, VarioPathPlanner
from collectives.alltoallv.workloads import zipf
from fabrics.pcie.evaluator import evaluate
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster

ROOT = Path(__file__).resolve().parent.parent
PAPER = {8: (3, 6, 0.8, 3.2, 0.07), 16: (41, 438, 4.95, 20.6, 0.76), 32: (None, None, None, None, None)}
CATALOG_KEYS = {"max_nodes", "max_families_per_shape", "max_shapes", "name"}
# the default preset before this change (conf/scheduler/variopath.yaml of issue #6), numpy loop
V1_DEFAULT = dict(k_target_per_rank=3.0, n_start=4, aa_sweeps=4, shape_beam=1, coarse_rounds_per_rank=0.0,
                  reuse=1, kernel="numpy")


# the default preset before the held-apart tuning (linear rank pressure, Eq. 6 on the plain D̂, no
# node pressure): the "before" row of --quality and --steady
V2_DEFAULT = dict(rank_pressure=4.0, pressure_power=1, node_pressure=0.0, shape_score="paper")


def preset(name: str) -> dict:
    if name == "v1_default":
        return dict(V1_DEFAULT)
    if name == "v2_default":
        return {**preset("variopath"), **V2_DEFAULT}
    base, _, kernel = name.partition("@")
    p = yaml.safe_load((ROOT / "conf" / "scheduler" / f"{base}.yaml").read_text())
    p = {k: v for k, v in p.items() if k not in CATALOG_KEYS}
    if kernel:
        p["kernel"] = kernel
    return p


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--presets", default="v1_default,variopath@numpy,variopath,variopath_fast,variopath_quality")
    ap.add_argument("--nodes", default="1,2,4")
    ap.add_argument("--scale", action="store_true", help="also catalog build at 64-256 GPUs (R5080-CX8)")
    ap.add_argument("--quality", action="store_true", help="MILP ratio on the tuning and test seeds (tuning.py)")
    ap.add_argument("--steady", action="store_true", help="cold vs steady-state planning share at 8 / 16 GPUs")
    ap.add_argument("--runs", type=int, default=3, help="fresh planners per preset for --steady (medians)")
    args = ap.parse_args()
    if args.quality or args.steady:
        presets = [p for p in args.presets.split(",") if p != "v1_default" and "@" not in p]
        presets = ["v2_default"] + [p for p in presets if p != "v2_default"]
        if args.quality:
            quality(presets)
        if args.steady:
            steady(presets, args.runs)
        return
    platform = yaml.safe_load((ROOT / "conf" / "platform" / "r5080_bf3.yaml").read_text())
    load = os.getloadavg()[0]
    print(f"R5080-BF3; demand: dense Zipf s=0.6, 1 GiB per source, seeds 0..{args.seeds - 1} x {args.repeats} "
          f"repeats; medians; load average {load:.1f} on {os.cpu_count()} CPUs")
    head = (f"{'preset':>18} {'GPUs':>4} | {'shapes':>6} {'families':>8} {'build s':>8} {'complete':>8} | "
            f"{'cpu us/act':>10} {'wall us/act':>11} {'emit us':>7} {'acts':>5} {'comm ms':>8} {'O/C %':>6} | "
            "paper: shapes families build_s us/act O/C%")
    print(head)
    print("-" * len(head))
    for nodes in [int(x) for x in args.nodes.split(",")]:
        topo = channel_topology(pcie_cluster(platform, nodes))
        builds = []
        for _ in range(1 if nodes > 2 else 3):
            t0 = time.perf_counter()
            cat = build_catalog(topo)
            builds.append(time.perf_counter() - t0)
        for name in args.presets.split(","):
            report(name, topo, cat, statistics.median(builds), args.seeds, args.repeats)
    if args.scale:
        scale()


def report(name, topo, cat, build_s, seeds, repeats) -> None:
    planner = VarioPathPlanner(topo, cat, VarioPathParams(**preset(name)))
    cpu_act, wall_act, emit, acts, comm, oc = [], [], [], [], [], []
    for seed in range(seeds):
        d = zipf(topo.n_ranks, 2**30, 0.6, seed)
        planner.plan(d)  # warm: flat arrays, compiled loop, numpy paths
        for _ in range(repeats):
            c0 = time.process_time()
            s = planner.plan(d)
            total_cpu = time.process_time() - c0
            cpu = s.meta["planning_cpu_s"]  # the decomposition (Algorithm 2) only
            n = s.n_activations
            cpu_act.append(cpu / n)
            wall_act.append(s.meta["planning_s"] / n)
            emit.append((total_cpu - cpu) / n)
        ev = evaluate(s, topo.capacity_Bps)
        acts.append(n)
        comm.append(ev.completion_s)
        oc.extend(c / ev.completion_s * n for c in cpu_act[-repeats:])
    n = topo.n_ranks
    paper = " ".join("-" if v is None else str(v) for v in PAPER.get(n, (None,) * 5))
    med = statistics.median
    print(f"{name:>18} {n:>4} | {cat.n_shapes:>6} {cat.n_families:>8} {build_s:>8.3f} {str(cat.complete):>8} | "
          f"{med(cpu_act) * 1e6:>10.1f} {med(wall_act) * 1e6:>11.1f} {med(emit) * 1e6:>7.1f} {med(acts):>5} "
          f"{med(comm) * 1e3:>8.2f} {med(oc) * 100:>6.2f} | {paper}", flush=True)


def _platform() -> dict:
    return yaml.safe_load((ROOT / "conf" / "platform" / "r5080_bf3.yaml").read_text())


def quality(presets: list[str]) -> None:
    """MILP completion / preset completion on every instance of both splits."""
    platform = _platform()
    ratio: dict[tuple, float] = {}  # (preset, split, nodes, skew, seed) -> ratio
    for nodes in tuning.NODES:
        topo = channel_topology(pcie_cluster(platform, nodes))
        milp = make_scheduler("milp", topo)
        planners = {n: make_scheduler("variopath", topo, {**preset(n), "name": "variopath"}) for n in presets}
        for split, seeds in (("tuning", tuning.TUNING_SEEDS), ("test", tuning.TEST_SEEDS)):
            for skew in tuning.SKEWS:
                for seed in seeds:
                    d = zipf(topo.n_ranks, tuning.BYTES_PER_RANK, skew, seed)
                    opt = evaluate(milp.plan(d), topo.capacity_Bps).completion_s
                    for n, planner in planners.items():
                        ratio[(n, split, nodes, skew, seed)] = opt / evaluate(planner.plan(d), topo.capacity_Bps).completion_s
            print(f"  {topo.n_ranks} GPUs, {split} seeds done", flush=True)
    print(f"\nVarioPath / MILP optimum (%), R5080-BF3, Zipf, {tuning.BYTES_PER_RANK >> 20} MiB per source; "
          f"tuning seeds {tuning.TUNING_SEEDS}, test seeds {tuning.TEST_SEEDS}")
    cells = [(nodes, skew) for nodes in tuning.NODES for skew in tuning.SKEWS]
    print(f"{'preset':>18} {'split':>6} | {'mean':>6} {'min':>5} | " + " ".join(f"{8 * n}g s{k}".rjust(8) for n, k in cells))
    for n in presets:
        for split in ("tuning", "test"):
            vals = [v for k, v in ratio.items() if k[:2] == (n, split)]
            per = [statistics.mean(v for k, v in ratio.items() if k[:4] == (n, split, nodes, skew)) for nodes, skew in cells]
            print(f"{n:>18} {split:>6} | {100 * statistics.mean(vals):6.2f} {100 * min(vals):5.1f} | "
                  + " ".join(f"{100 * x:8.2f}" for x in per), flush=True)
    print("\nper seed (test split), default preset:")
    for nodes in tuning.NODES:
        for skew in tuning.SKEWS:
            row = [ratio.get(("variopath", "test", nodes, skew, s)) for s in tuning.TEST_SEEDS]
            if row[0] is not None:
                print(f"  {8 * nodes} GPUs s={skew}: " + " ".join(f"{100 * x:.2f}" for x in row))


def steady(presets: list[str], runs: int, repeats: int = 5) -> None:
    """Cold first call vs steady state (median of ``repeats`` after a warm-up), medians of ``runs``.

    ``setup`` is the planner's construction -- with ``prepare()`` where the planner has it (the
    compiled loop's per-catalog tables, as the scheduler factory builds them); the catalog itself
    is built once before -- so ``setup + cold`` compares trees where the tables moved from the
    first plan into the construction. The same script runs on an older tree (PYTHONPATH) for a
    before/after in one run.
    """
    platform = _platform()
    load = os.getloadavg()[0]
    print(f"\nplanning / modelled communication, R5080-BF3, Zipf s=0.6, 1 GiB per source, seed 0; {runs} fresh "
          f"planners each, steady = median of {repeats} after a warm-up; load average {load:.1f} on {os.cpu_count()} CPUs")
    print(f"{'preset':>18} {'GPUs':>4} {'acts':>5} {'comm ms':>8} | {'setup ms':>8} {'cold us':>8} {'cold O/C':>8} | "
          f"{'steady us':>9} {'O/C wall':>8} {'CPU us':>7} {'O/C CPU':>8} {'us/act':>7}")
    med = statistics.median
    for nodes in (1, 2):
        topo = channel_topology(pcie_cluster(platform, nodes))
        cat = build_catalog(topo)
        d = zipf(topo.n_ranks, 2**30, 0.6, 0)
        for name in presets:
            setup, cold, wall, cpu = [], [], [], []
            for _ in range(runs):
                t0 = time.perf_counter()
                planner = VarioPathPlanner(topo, cat, VarioPathParams(**preset(name)))
                if hasattr(planner, "prepare"):
                    planner.prepare()
                setup.append(time.perf_counter() - t0)
                first = planner.plan(d)
                cold.append(first.meta["planning_s"])
                planner.plan(d)
                metas = [planner.plan(d).meta for _ in range(repeats)]
                wall.append(med(m["planning_s"] for m in metas))
                cpu.append(med(m["planning_cpu_s"] for m in metas))
            comm = evaluate(first, topo.capacity_Bps).completion_s
            n = first.n_activations
            print(f"{name:>18} {topo.n_ranks:>4} {n:>5} {comm * 1e3:>8.2f} | {med(setup) * 1e3:>8.1f} {med(cold) * 1e6:>8.0f} "
                  f"{med(cold) / comm * 100:>7.2f}% | {med(wall) * 1e6:>9.0f} {med(wall) / comm * 100:>7.2f}% "
                  f"{med(cpu) * 1e6:>7.0f} {med(cpu) / comm * 100:>7.2f}% {med(cpu) / n * 1e6:>7.1f}", flush=True)


def scale() -> None:
    """Offline catalog at scale (R5080-CX8: 2 GPUs and one ConnectX-8 per switch)."""
    cx8 = yaml.safe_load((ROOT / "conf" / "platform" / "r5080_cx8.yaml").read_text())
    print("\nR5080-CX8 catalog at scale (paper Table 4, 256 GPUs: 1616 shapes / 2140 families / 5674 s)")
    print(f"{'GPUs':>5} {'groups':>6} {'instances':>9} {'shapes':>6} {'families':>8} {'build s':>8} {'complete':>8}")
    for nodes in (2, 4, 8, 16, 32):
        topo = channel_topology(pcie_cluster(cx8, nodes))
        t0 = time.perf_counter()
        cat = build_catalog(topo)
        print(f"{topo.n_ranks:>5} {topo.n_groups:>6} {cat.stats['instances']:>9} {cat.n_shapes:>6} {cat.n_families:>8} "
              f"{time.perf_counter() - t0:>8.2f} {str(cat.complete):>8}", flush=True)


if __name__ == "__main__":
    main()
