"""Benchmark: GenZ (genz-llm, the analytical LLM-serving model a user would reach for instead) and
gxnet on the same Mixtral-8x7B TP8 decode points, in one run; per point and per 2,160-point sweep.

Points: batch x context (``--batches``, ``--contexts``), Mixtral-8x7B, TP8 on 8 H100s, BF16.
gxnet times each point as a search does (a new ``Deployment`` and plan per point, one network
model for all, no trace): ``fabric=single_eps`` (one switched level, as NVSwitch), analytical
network model. GenZ times ``decode_moddeling(model="mistralai/Mixtral-8x7B", tensor_parallel=8,
system_name="H100_GPU", bits="bf16")`` per point. Each side runs each point ``--repeats`` times,
timed in CPU seconds of its process (``time.process_time``: what a machine shared with other
work does not inflate; on an idle machine it equals the wall time of these single-threaded
calls); the per-point figure is the median over points of each point's median.

Per sweep: GenZ's per-point median x 2,160 against gxnet's measured
``gx search -m experiment=figure4_megatron`` (Ray and MLflow on, in a temporary folder, cold and
warm OCS plan and compiled-program stores). The two are interleaved in ``--sweep-runs`` rounds: each round times GenZ
again, then runs the cold and the warm search, so every search is set against a GenZ timing
taken a minute before it (this host's speed drifts by up to 2x within minutes); the figures are
the medians of the rounds and the median of the rounds' ratios. ``--no-sweep`` skips the
search and uses gxnet's per-point figure x 2,160 instead, labelled as such. Each round first
times a fresh process's first touch of 1 GiB (``first touch … us/page``), the host's state:
a search is made of fresh processes that grow into ≈ 1.2 GiB of new memory, GenZ's timed loop is
one steady process (docs/benchmarks.md, the slow state).

GenZ is an optional benchmark extra, never a runtime dependency: install it into its own
environment (``python -m venv .venv-bench && .venv-bench/bin/pip install '.[bench]'``: genz-llm
0.0.16 with pandas 2.3.3, under which it runs faster than under pandas 3); this script finds ``.venv-bench/bin/python`` (or ``--genz-python``) and
runs GenZ there. Without it, gxnet is timed alone and the script says why GenZ is missing.

    .venv/bin/python benchmarks/peer_genz.py [--repeats 5] [--sweep-runs 3] [--no-sweep]
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
SWEEP_POINTS = 2160  # experiment=figure4_megatron: 30 cells x 72 Helix splits
GENZ_MODEL = "mistralai/Mixtral-8x7B"
GENZ_SYSTEM = "H100_GPU"


def parse_tokens(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024 ** 2}.get(text[-1], 1)
    return int(text[:-1] if scale > 1 else text) * scale


# --- GenZ side (runs in GenZ's environment: no gxnet imports) -------------------------------------

def genz_worker(points: list[tuple[int, int]], repeats: int) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    from GenZ import decode_moddeling

    def one(batch: int, context: int):
        return decode_moddeling(model=GENZ_MODEL, batch_size=batch, input_tokens=context, output_tokens=0, Bb=1,
                                system_name=GENZ_SYSTEM, bits="bf16", tensor_parallel=8)

    one(*points[0])  # warm-up: imports and GenZ's own first-call set-up
    rows = []
    for batch, context in points:
        times, latency_ms = [], None
        for _ in range(repeats):
            t0 = time.process_time()
            out = one(batch, context)
            times.append(time.process_time() - t0)
            latency_ms = float(out["Latency"]) if isinstance(out, dict) and "Latency" in out else None
        rows.append({"batch": batch, "context": context, "median_s": statistics.median(times),
                     "decode_step_ms": latency_ms})
    return {"rows": rows}


def find_genz_python(given: str | None) -> tuple[str | None, str]:
    """(python, '') where GenZ imports, else (None, why not)."""
    candidates = [given] if given else [str(ROOT / ".venv-bench" / "bin" / "python"), sys.executable]
    errors = []
    for py in candidates:
        if not py or not Path(py).exists():
            errors.append(f"{py}: no such interpreter")
            continue
        proc = subprocess.run([py, "-c", "import GenZ"], capture_output=True, text=True)
        if proc.returncode == 0:
            return py, ""
        errors.append(f"{py}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'import failed'}")
    return None, "; ".join(errors)


def time_genz(py: str, points, repeats: int) -> dict:
    arg = json.dumps({"points": points, "repeats": repeats})
    proc = subprocess.run([py, __file__, "--genz-worker", arg], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise RuntimeError(proc.stderr.strip()[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- gxnet side -----------------------------------------------------------------------------------

GXNET_OVERRIDES = ["model=mixtral_8x7b", "accelerator=h100", "precision=bf16", "fabric=single_eps", "world=8",
                   "parallel=tp_ep", "parallel.tp=8", "parallel.ep=1", "network=analytical", "tracking=off"]


def time_gxnet(points, repeats: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from gxnet.executor import execute
    from gxnet.plan import PLAN_CACHE, build_plan
    from pipelines.network import build_network
    from pipelines.specs import deployment_spec

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        base = compose("decode", overrides=GXNET_OVERRIDES)
    # warm-up, as on the GenZ side: the network model (once per sweep cell) and the model's compiled
    # program (once per model and scheme) are not per-point work
    first = deployment_spec(OmegaConf.merge(base, {"batch": points[0][0], "context": points[0][1]}))
    network = build_network(base, first.accelerator, first.world)
    execute(build_plan(first), network, trace=False)
    rows = []
    for batch, context in points:
        cfg = OmegaConf.merge(base, {"batch": batch, "context": context})
        times, step = [], None
        for _ in range(repeats):
            PLAN_CACHE.clear()  # every point builds its plan, as a new split of a search does
            t0 = time.process_time()
            step = execute(build_plan(deployment_spec(cfg)), network, trace=False)
            times.append(time.process_time() - t0)
        rows.append({"batch": batch, "context": context, "median_s": statistics.median(times),
                     "decode_step_ms": step.decode_step_s * 1e3})
    return {"rows": rows}


def search_round() -> dict[str, float]:
    """Wall seconds of ``gx search -m experiment=figure4_megatron`` with Ray and MLflow on, in a
    fresh folder with a fresh MLflow store: "cold" with empty OCS plan and compiled-program stores,
    then "warm", the same search again with the stores the cold run left (a re-run)."""
    from benchmarks.search_sweep import wait_for_report

    walls: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("cold", "warm"):
            env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{tmp}/{kind}-mlflow.db", GX_TRACKING="true",
                       GX_PLAN_STORE=f"{tmp}/plan-store", GX_PROGRAM_STORE=f"{tmp}/program-store")
            cmd = [sys.executable, "-m", "pipelines.search", "-m", "experiment=figure4_megatron",
                   "tracking=mlflow", f"hydra.sweep.dir={tmp}/{kind}-sweep"]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True,
                                  env={**env, "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")})
            walls[kind] = time.perf_counter() - t0
            if proc.returncode:
                sys.exit(f"search sweep failed:\n{proc.stderr[-3000:]}")
            wait_for_report(proc.stderr)  # the next run starts once this one's report is attached
    return walls


def point_s(timed: dict) -> float:
    """The per-point figure of one side: the median over points of each point's median."""
    return statistics.median(r["median_s"] for r in timed["rows"])


def genz_sweep_s(genz: dict) -> float:
    """GenZ's time for the sweep: its per-point median x 2,160."""
    return point_s(genz) * SWEEP_POINTS


def interleaved_rounds(py: str | None, points, rounds: int, repeats: int) -> list[dict]:
    """``rounds`` rounds of (GenZ's per-point timing, then the cold and the warm search): this
    host's speed drifts by up to 2x within minutes, so each search is set against the GenZ
    timing taken just before it; printed as each round ends."""
    from benchmarks.cpu_by_process import first_touch_us

    out = []
    for r in range(rounds):
        # the host's state: a fresh process's first touch of new memory, which the search's fresh
        # processes pay ~300,000 times; probed before GenZ's timing (minutes before the searches,
        # so the pages it frees are the host's again when they start)
        touch_us = first_touch_us()
        genz_s = genz_sweep_s(time_genz(py, points, repeats)) if py else None
        walls = search_round()
        row = {"genz_s": genz_s, "first_touch_us": touch_us, **walls}
        out.append(row)
        ratios = "".join(f", {k} / GenZ = {walls[k] / genz_s:.3f}" for k in ("cold", "warm")) if genz_s else ""
        print(f"round {r + 1}: first touch {touch_us:.1f} us/page, " + (f"GenZ {genz_s:.1f} s, " if genz_s else "")
              + f"search cold {walls['cold']:.1f} s, warm {walls['warm']:.1f} s{ratios}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--genz-worker", help=argparse.SUPPRESS)
    ap.add_argument("--batches", default="1,4,16,64")
    ap.add_argument("--contexts", default="1K,4K,16K,32K")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--genz-python", default=None, help="interpreter with genz-llm (default: .venv-bench)")
    ap.add_argument("--sweep-runs", type=int, default=3,
                    help="rounds of (GenZ timing, cold search, warm search), interleaved")
    ap.add_argument("--no-sweep", action="store_true", help="do not run the 2,160-point search")
    ap.add_argument("--search-s", type=float, default=None,
                    help="use this measured search wall time (s) instead of running the sweep")
    args = ap.parse_args()
    if args.genz_worker:
        spec = json.loads(args.genz_worker)
        print(json.dumps(genz_worker([tuple(p) for p in spec["points"]], spec["repeats"])))
        return
    points = [(int(b), parse_tokens(c)) for b in args.batches.split(",") for c in args.contexts.split(",")]
    py, why = find_genz_python(args.genz_python)
    genz = None
    if py is None:
        print(f"GenZ is not installed ({why}); timing gxnet alone. Install it with: python -m venv .venv-bench "
              f"&& .venv-bench/bin/pip install '.[bench]'  (genz-llm 0.0.16 with pandas 2.3.3)")
    else:
        genz = time_genz(py, points, args.repeats)
    gx = time_gxnet(points, args.repeats)
    print(f"Mixtral-8x7B TP8 decode on 8 x H100 (BF16), {len(points)} points (batch x context), "
          f"{args.repeats} repeats each, {os.cpu_count()} cores")
    print(f"{'batch':>6} {'context':>8} {'gxnet ms':>9} {'gxnet step ms':>14}"
          + (f" {'GenZ ms':>8} {'GenZ step ms':>13} {'GenZ/gxnet':>11}" if genz else ""))
    for i, row in enumerate(gx["rows"]):
        line = f"{row['batch']:>6} {row['context']:>8} {row['median_s'] * 1e3:>9.2f} {row['decode_step_ms']:>14.3f}"
        if genz:
            g = genz["rows"][i]
            step = "-" if g["decode_step_ms"] is None else f"{g['decode_step_ms']:.3f}"
            line += f" {g['median_s'] * 1e3:>8.2f} {step:>13} {g['median_s'] / row['median_s']:>10.1f}x"
        print(line)
    gx_point = point_s(gx)
    print(f"per point (median): gxnet {gx_point * 1e3:.2f} ms"
          + (f", GenZ {point_s(genz) * 1e3:.2f} ms, ratio GenZ/gxnet {point_s(genz) / gx_point:.1f}x" if genz else ""))
    if args.search_s is not None or args.no_sweep:
        search_s = args.search_s if args.search_s is not None else gx_point * SWEEP_POINTS
        how = "given with --search-s" if args.search_s is not None else "gxnet per-point median x 2,160 (no sweep run)"
        genz_sweep = genz_sweep_s(genz) if genz else None
        if genz:
            print(f"per {SWEEP_POINTS:,}-point sweep: GenZ {genz_sweep:.1f} s (per-point median x {SWEEP_POINTS:,})")
        print(f"per {SWEEP_POINTS:,}-point sweep: gxnet {search_s:.1f} s ({how})"
              + (f"; gxnet / GenZ = {search_s / genz_sweep:.3f}" if genz else ""))
        return
    rounds = interleaved_rounds(py, points, args.sweep_runs, args.repeats)
    med = {k: statistics.median(r[k] for r in rounds) for k in ("cold", "warm")}
    if genz:
        genz_med = statistics.median(r["genz_s"] for r in rounds)
        print(f"per {SWEEP_POINTS:,}-point sweep: GenZ {genz_med:.1f} s (per-point median x {SWEEP_POINTS:,}, "
              f"median of {len(rounds)} rounds: " + ", ".join(f"{r['genz_s']:.1f}" for r in rounds) + " s)")
    for kind, search_s in med.items():
        walls = ", ".join(f"{r[kind]:.1f}" for r in rounds)
        ratio = ""
        if genz:
            per_round = [r[kind] / r["genz_s"] for r in rounds]
            ratio = (f"; gxnet / GenZ = {statistics.median(per_round):.3f} (median of the rounds' ratios: "
                     + ", ".join(f"{x:.3f}" for x in per_round) + f"; ratio of the medians {search_s / genz_med:.3f})")
        print(f"per {SWEEP_POINTS:,}-point sweep: gxnet {search_s:.1f} s (measured `gx search -m "
              f"experiment=figure4_megatron` (Ray + MLflow), {kind} OCS plan store, median of {len(rounds)}: "
              f"{walls} s){ratio}")
    print("host: a fresh process's first touch of new memory, us per 4 KiB page, per round: "
          + ", ".join(f"{r['first_touch_us']:.1f}" for r in rounds)
          + " (about 2 where the host backs free memory, 20-30 where it has taken it back)")


if __name__ == "__main__":
    main()
