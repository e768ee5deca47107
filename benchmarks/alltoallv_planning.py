"""VarioPath planning cost (paper 000, Section 6.4, Table 4) on R5080-BF3 at 8, 16 and 32 GPUs.

Prints, side by side with the paper's C++ numbers: offline catalog size and build time (no disk
cache), online planning CPU time per activation (process time of Algorithm 2's decomposition, so other
load on a shared machine does not inflate it), the CPU time per activation spent afterwards on
emitting Python lane objects for schedule.json ("emit us"), activations, modelled communication time of the
planned schedule (flow-level evaluator) and planning / communication (O/C) for dense Zipf
(s = 0.6) demands of 1 GiB per source. Medians over the seeds. Targets (issue #6): 8-GPU catalog
<= 1 s; O/C <= 5 % at 16 GPUs.

    .venv/bin/python benchmarks/alltoallv_planning.py [--seeds 3] [--nodes 1,2,4] [--presets variopath_fast,variopath]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import yaml

from collectives.alltoallv.catalog import build_catalog
from collectives.alltoallv.variopath import VarioPathParams, VarioPathPlanner
from collectives.alltoallv.workloads import zipf
from fabrics.pcie.evaluator import evaluate
from fabrics.pcie.paths import channel_topology
from fabrics.pcie.platform import build_cluster
from pipelines.units import parse_rate

ROOT = Path(__file__).resolve().parent.parent
PAPER = {8: (3, 6, 0.8, 3.2, 0.07), 16: (41, 438, 4.95, 20.6, 0.76), 32: (None, None, None, None, None)}
CATALOG_KEYS = {"max_nodes", "max_families_per_shape", "name"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--presets", default="variopath_fast,variopath,variopath_quality")
    ap.add_argument("--nodes", default="1,2,4")
    args = ap.parse_args()
    platform = yaml.safe_load((ROOT / "conf" / "platform" / "r5080_bf3.yaml").read_text())
    print(f"R5080-BF3; demand: dense Zipf s=0.6, 1 GiB per source, seeds 0..{args.seeds - 1}; medians")
    head = (f"{'preset':>18} {'GPUs':>4} | {'shapes':>6} {'families':>8} {'build s':>8} {'complete':>8} | {'us/act':>7} "
            f"{'emit us':>7} {'acts':>5} {'comm ms':>8} {'O/C %':>6} | paper: shapes families build_s us/act O/C%")
    print(head)
    print("-" * len(head))
    for nodes in [int(x) for x in args.nodes.split(",")]:
        topo = channel_topology(build_cluster(platform, nodes, parse_rate))
        builds = []
        for _ in range(1 if nodes > 2 else 3):
            t0 = time.perf_counter()
            cat = build_catalog(topo)
            builds.append(time.perf_counter() - t0)
        for name in args.presets.split(","):
            report(name, topo, cat, statistics.median(builds), args.seeds)


def report(name, topo, cat, build_s, seeds) -> None:
    preset = yaml.safe_load((ROOT / "conf" / "scheduler" / f"{name}.yaml").read_text())
    planner = VarioPathPlanner(topo, cat, VarioPathParams(**{k: v for k, v in preset.items() if k not in CATALOG_KEYS}))
    per_act, emit, acts, comm, oc = [], [], [], [], []
    for seed in range(seeds):
        d = zipf(topo.n_ranks, 2**30, 0.6, seed)
        planner.plan(d)  # warm the numpy paths once per size
        c0 = time.process_time()
        s = planner.plan(d)
        total_cpu = time.process_time() - c0
        cpu = s.meta["planning_cpu_s"]  # the decomposition (Algorithm 2) only, CPU time
        ev = evaluate(s, topo.capacity_Bps)
        per_act.append(cpu / s.n_activations)
        emit.append((total_cpu - cpu) / s.n_activations)
        acts.append(s.n_activations)
        comm.append(ev.completion_s)
        oc.append(cpu / ev.completion_s)
    n = topo.n_ranks
    paper = " ".join("-" if v is None else str(v) for v in PAPER.get(n, (None,) * 5))
    print(f"{name:>18} {n:>4} | {cat.n_shapes:>6} {cat.n_families:>8} {build_s:>8.3f} {str(cat.complete):>8} | "
          f"{statistics.median(per_act) * 1e6:>7.1f} {statistics.median(emit) * 1e6:>7.1f} {statistics.median(acts):>5} {statistics.median(comm) * 1e3:>8.2f} "
          f"{statistics.median(oc) * 100:>6.2f} | {paper}")


if __name__ == "__main__":
    main()
