"""Search VarioPath presets on the TUNING seeds: quality against the MILP optimum and steady planning.

For each candidate preset (the default conf/scheduler/variopath.yaml with some knobs overridden)
this prints, measured on the tuning seeds of collectives/alltoallv/tuning.py only:

- ``quality``: mean and minimum of MILP completion / preset completion (%) over one and two
  R5080-BF3 nodes, Zipf s = 0.6 ... 1.2, 32 MiB per source, both timed by the flow-level
  evaluator -- the instances of ``benchmarks/alltoallv_planning.py --quality``;
- ``2/sw``: mean quality on the R5080-BF3 variant with two GPUs per switch (4-GPU nodes, one and
  two nodes, Zipf s = 0.6, the same seeds) -- the topology where fewer AA starts and stronger
  pressure lose most (tests/validation/test_variopath_quality.py bounds the default there);
- ``O/C``: steady planning over modelled communication at 16 GPUs on the case the
  ``gx alltoallv platform=r5080_bf3 nodes=2 workload=zipf workload.bytes_per_rank=1GiB
  scheduler=variopath`` command reports (Zipf s = 0.6, seed 0, 1 GiB per source): the median of
  ``--repeats`` plans of the same demand after a warm-up, as pipelines/alltoallv.py measures it,
  CPU time (``planning_cpu_s``; the wall figure beside it) -- the shared machine inflates CPU less.

The MILP optima are cached in a JSON file (``--cache``; the MILP takes seconds per 16-GPU
instance, the presets milliseconds). ``--split test`` reports the chosen preset(s) on the
held-apart test seeds -- run it once, after the choice.

    .venv/bin/python benchmarks/variopath_presets.py [--grid small|NAME] [--presets k=v;k=v,...]
        [--split tuning|test] [--repeats 7] [--cache /tmp/vp_milp_optima.json] [--json rows.jsonl]
    .venv/bin/python benchmarks/variopath_presets.py --pareto rows.jsonl[,more.jsonl]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

import yaml

from collectives.alltoallv import tuning
from collectives.alltoallv.schedulers import make_scheduler
from collectives.alltoallv.workloads import zipf
from fabrics.pcie.evaluator import evaluate
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster

ROOT = Path(__file__).resolve().parent.parent
SPLITS = {"tuning": tuning.TUNING_SEEDS, "test": tuning.TEST_SEEDS}
# knobs the search varies; everything else stays at conf/scheduler/variopath.yaml
GRIDS = {
    "small": dict(n_start=(4, 6, 8, 10), shape_beam=(1, 2), reuse=(2, 3, 4), k_target_per_rank=(4.0, 6.0, 8.0)),
    # fewer activations: coarser early activations (coarse rounds), several quanta per channel
    "coarse": dict(n_start=(6, 10, 16), shape_beam=(2, 3), k_target_per_rank=(3.0, 4.0, 6.0),
                   coarse_rounds_per_rank=(0.5, 1.0, 1.5), max_quanta=(1, 2, 4)),
    # fewer AA runs per activation (looser reuse) and less AA work per run (rows, online family)
    "reuse": dict(k_target_per_rank=(6.0, 8.0), reuse=(2, 4, 8), reuse_floor=(0.8, 0.9, 0.95),
                  max_aa_rows=(64, 256), synth_min_groups=(0, 16)),
    # the cheap end: few starts, coarse early activations, loose reuse
    "cheap": dict(n_start=(4, 6, 10), shape_beam=(1, 2), k_target_per_rank=(3.0, 4.0),
                  coarse_rounds_per_rank=(0.5, 0.75), reuse=(4, 8), reuse_floor=(0.8,)),
    # the cheap end with more AA starts and wider beams
    "starts": dict(n_start=(16, 24), shape_beam=(1, 2, 3), k_target_per_rank=(3.0, 4.0),
                   coarse_rounds_per_rank=(0.75, 1.0), reuse=(8,), reuse_floor=(0.8, 0.9)),
    # the pressure weights with fewer AA starts: more quality per start on four GPUs per switch?
    "pressure": dict(rank_pressure=(8.0, 12.0, 16.0, 24.0, 32.0), pressure_power=(4, 6, 8, 12), n_start=(4, 6, 8, 10)),
    # less work per activation: shape candidates (how many, how often all shapes are scored), warm
    # AA starts with fewer starts and sweeps, early stop of starts
    "work": dict(shape_candidates=(0, 8, 16, 24), shape_rescore=(4, 8, 12, 16), warm_starts=(0, 1),
                 n_start=(4, 6, 10), aa_sweeps=(1, 2), start_patience=(0, 3)),
}


def base_preset(name: str = "variopath") -> dict:
    p = yaml.safe_load((ROOT / "conf" / "scheduler" / f"{name}.yaml").read_text())
    p["name"] = "variopath"
    return p


def bf3_platform() -> dict:
    return yaml.safe_load((ROOT / "conf" / "platform" / "r5080_bf3.yaml").read_text())


def topologies() -> dict:
    platform = bf3_platform()
    return {nodes: channel_topology(pcie_cluster(platform, nodes)) for nodes in tuning.NODES}


TWO_PER_SWITCH_NODES, TWO_PER_SWITCH_SKEW = (1, 2), 0.6  # the validation test's instances, on other seeds


def two_per_switch_topologies() -> dict:
    """The R5080-BF3 variant with 4-GPU nodes, two GPUs under each switch (the validation test's)."""
    platform = dict(bf3_platform(), gpus_per_node=4, gpus={"sw0": [0, 1], "sw1": [2, 3]})
    return {f"2sw{nodes}": channel_topology(pcie_cluster(platform, nodes)) for nodes in TWO_PER_SWITCH_NODES}


def instances(split: str, two_per_switch: bool = False):
    if two_per_switch:
        for nodes in TWO_PER_SWITCH_NODES:
            for seed in SPLITS[split]:
                yield f"2sw{nodes}", TWO_PER_SWITCH_SKEW, seed
        return
    for nodes in tuning.NODES:
        for skew in tuning.SKEWS:
            for seed in SPLITS[split]:
                yield nodes, skew, seed


def milp_optima(topos: dict, split: str, cache: Path) -> dict:
    """(nodes, skew, seed) -> certified MILP completion (s), cached across runs; ``topos`` holds
    both platforms (``topologies`` and ``two_per_switch_topologies``)."""
    known = json.loads(cache.read_text()) if cache.exists() else {}
    milps = {}
    wanted = list(instances(split)) + list(instances(split, two_per_switch=True))
    for nodes, skew, seed in wanted:
        key = f"{nodes}/{skew}/{seed}"
        if key in known:
            continue
        t = topos[nodes]
        milp = milps.setdefault(nodes, make_scheduler("milp", t))
        d = zipf(t.n_ranks, tuning.BYTES_PER_RANK, skew, seed)
        plan = milp.plan(d)
        assert plan.meta["certificate"]["status"] == "optimal", (key, plan.meta["certificate"])
        known[key] = evaluate(plan, t.capacity_Bps).completion_s
        cache.write_text(json.dumps(known, indent=0, sort_keys=True))
        print(f"  MILP {key}: {known[key] * 1e3:.3f} ms", file=sys.stderr, flush=True)
    return {k: v for k, v in known.items() if tuple(k.split("/")) in {(str(n), str(s), str(e)) for n, s, e in wanted}}


def quality(topos: dict, params: dict, split: str, optima: dict) -> list[float]:
    """MILP completion / preset completion on every instance of the split."""
    out = []
    for nodes in tuning.NODES:
        t = topos[nodes]
        planner = make_scheduler("variopath", t, params)
        for skew in tuning.SKEWS:
            for seed in SPLITS[split]:
                d = zipf(t.n_ranks, tuning.BYTES_PER_RANK, skew, seed)
                out.append(optima[f"{nodes}/{skew}/{seed}"] / evaluate(planner.plan(d), t.capacity_Bps).completion_s)
    return out


def two_per_switch_quality(topos: dict, params: dict, split: str, optima: dict) -> list[float]:
    """MILP completion / preset completion on the two-GPUs-per-switch instances of the split."""
    out, planners = [], {}
    for key, skew, seed in instances(split, two_per_switch=True):
        t = topos[key]
        planner = planners.setdefault(key, make_scheduler("variopath", t, params))
        d = zipf(t.n_ranks, tuning.BYTES_PER_RANK, skew, seed)
        out.append(optima[f"{key}/{skew}/{seed}"] / evaluate(planner.plan(d), t.capacity_Bps).completion_s)
    return out


def steady(topo, params: dict, repeats: int) -> dict:
    """The CLI's case and measurement (pipelines/alltoallv.py planning_figures): cold first call,
    one warm-up, median of ``repeats`` plans of the same demand."""
    planner = make_scheduler("variopath", topo, params)
    d = zipf(topo.n_ranks, 2**30, 0.6, 0)
    first = planner.plan(d)
    comm = evaluate(first, topo.capacity_Bps).completion_s
    planner.plan(d)
    metas = [planner.plan(d).meta for _ in range(repeats)]
    med = statistics.median
    return dict(acts=first.n_activations, comm_s=comm, cold_s=first.meta["planning_s"],
                wall_s=med(m["planning_s"] for m in metas), cpu_s=med(m["planning_cpu_s"] for m in metas))


def candidates(args) -> list[tuple[str, dict]]:
    base = base_preset(args.base)
    out = []
    if args.presets:
        for spec in args.presets.split(","):
            over = dict(kv.split("=") for kv in spec.split(";") if kv)
            typed = {k: yaml.safe_load(v) for k, v in over.items()}
            typed = {k: type(base[k])(v) if k in base else v for k, v in typed.items()}  # 8 -> 8.0 for floats
            out.append((spec or args.base, {**base, **typed}))
        return out
    if args.grid in GRIDS:
        grid = GRIDS[args.grid]
        for values in itertools.product(*grid.values()):
            over = dict(zip(grid, values))
            out.append((";".join(f"{k}={v}" for k, v in over.items()), {**base, **over}))
        return out
    return [(args.grid, base_preset(args.grid))]


def pareto(paths: list[str], target_quality: float = 0.99, target_oc: float = 0.01, two_per_switch: float = 0.98) -> None:
    """The non-dominated rows (higher mean quality, lower steady CPU O/C) of earlier ``--json`` runs."""
    rows = [json.loads(line) for p in paths for line in Path(p).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "cpu_s" in r]
    for r in rows:
        r["oc"] = r["cpu_s"] / r["comm_s"]
    front = [r for r in rows if not any(o["mean"] >= r["mean"] and o["oc"] <= r["oc"] and
                                        (o["mean"] > r["mean"] or o["oc"] < r["oc"]) for o in rows)]
    print(f"Pareto front of {len(rows)} presets ({r['split'] if rows else '-'} seeds): mean % of MILP vs steady CPU O/C")
    print(f"{'mean %':>7} {'min %':>6} {'2/sw %':>6} | {'acts':>4} {'CPU us':>7} {'O/C CPU':>7} {'O/C wall':>8} | preset")
    for r in sorted(front, key=lambda r: r["oc"]):
        two = f"{100 * r['mean_2sw']:>6.2f}" if "mean_2sw" in r else f"{'-':>6}"
        print(f"{100 * r['mean']:>7.2f} {100 * r['min']:>6.2f} {two} | {r['acts']:>4} {r['cpu_s'] * 1e6:>7.0f} "
              f"{100 * r['oc']:>6.2f}% {100 * r['wall_s'] / r['comm_s']:>7.2f}% | {r['preset']}")
    both = [r for r in rows if r["mean"] >= target_quality and r["oc"] <= target_oc]
    print(f"presets with mean >= {100 * target_quality:.0f} % and O/C <= {100 * target_oc:.0f} %: "
          + (", ".join(r["preset"] for r in both) or "none"))
    kept = [r for r in both if r.get("mean_2sw", 0.0) >= two_per_switch]
    print(f"... of them with >= {100 * two_per_switch:.0f} % on two GPUs per switch: "
          + (", ".join(r["preset"] for r in kept) or "none"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", default="small", help="a grid of GRIDS or a preset file name (conf/scheduler)")
    ap.add_argument("--presets", default="", help="comma-separated overrides of --base, 'k=v;k=v' each")
    ap.add_argument("--base", default="variopath", help="the preset the overrides start from")
    ap.add_argument("--split", default="tuning", choices=tuple(SPLITS))
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--no-steady", action="store_true")
    ap.add_argument("--cache", default="/tmp/vp_milp_optima.json")
    ap.add_argument("--json", default="", help="also append one JSON line per preset to this file")
    ap.add_argument("--pareto", default="", help="comma-separated --json files: print their Pareto front, run nothing")
    args = ap.parse_args()
    if args.pareto:
        pareto(args.pareto.split(","))
        return
    topos = {**topologies(), **two_per_switch_topologies()}
    optima = milp_optima(topos, args.split, Path(args.cache))
    print(f"VarioPath presets on the {args.split} seeds {SPLITS[args.split]}; quality = MILP / preset completion "
          f"(1-2 R5080-BF3 nodes, Zipf {tuning.SKEWS}, {tuning.BYTES_PER_RANK >> 20} MiB per source); O/C = steady "
          f"planning CPU (wall) / modelled communication, 16 GPUs, Zipf 0.6, 1 GiB per source, median of "
          f"{args.repeats}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    print(f"{'mean %':>7} {'min %':>6} {'8g %':>6} {'16g %':>6} {'2/sw %':>6} | {'acts':>4} {'CPU us':>7} {'O/C CPU':>7} "
          f"{'O/C wall':>8} {'cold':>6} | preset", flush=True)
    for label, params in candidates(args):
        t0 = time.perf_counter()
        r = quality(topos, params, args.split, optima)
        half = len(r) // 2
        row = dict(preset=label, split=args.split, mean=statistics.mean(r), min=min(r),
                   mean8=statistics.mean(r[:half]), mean16=statistics.mean(r[half:]),
                   mean_2sw=statistics.mean(two_per_switch_quality(topos, params, args.split, optima)))
        if not args.no_steady:
            row.update(steady(topos[2], params, args.repeats))
            oc = f"{row['acts']:>4} {row['cpu_s'] * 1e6:>7.0f} {row['cpu_s'] / row['comm_s'] * 100:>6.2f}% " \
                 f"{row['wall_s'] / row['comm_s'] * 100:>7.2f}% {row['cold_s'] / row['comm_s'] * 100:>5.2f}%"
        else:
            oc = " " * 38
        print(f"{100 * row['mean']:>7.2f} {100 * row['min']:>6.2f} {100 * row['mean8']:>6.2f} {100 * row['mean16']:>6.2f} "
              f"{100 * row['mean_2sw']:>6.2f} | "
              f"{oc} | {label}  ({time.perf_counter() - t0:.1f} s)", flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
