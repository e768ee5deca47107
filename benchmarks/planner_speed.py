"""Planner and fabric-preparation speed (issue #4: ≤ 2 s per plan cold, ≤ 1 ms cached; the search
target: a whole Megatron search cell on hybrid / all-OCS in a few seconds).

Measures, medians of ``--repeat`` runs:

* plan requests, cold (plan cache, per-axis prices, collectives invariants and phase matrices all
  emptied) and cached (request built and hashed, plan from the cache):
  - Table 6 (N = 256, L = 18, two meshes);
  - Helix two-mesh (N = 512, L = 36: (4, 128) all-to-all on KVP; (64, 8) all-gather 256 KiB on EP,
    all-reduce 4 KiB on TPE; 128 calls per step each);
  - Helix decode (Megatron 5T B = 1 at (4, 128, 16, 32) as the decode pipeline asks: the world
    all-reduce, the LM-head all-gather and the two region meshes; L = 36);
* ``--splits``: planning every Helix split of Megatron 5T (B = 1, 5M; 72 demands) as a search cell
  does (plan cache emptied per split, prices of earlier splits kept): total, median, slowest;
* ``--cells``: one whole analytical search cell (72 splits, ``pipelines.search.time_splits``) on
  all-EPS, hybrid and all-OCS, wall seconds.
* ``--requests``: the 360 OCS requests of the five all-OCS 32K cells of
  ``experiment=figure4_megatron`` (72 splits × batches 1, 2, 4, 8, 16), replayed as a search
  worker meets them: caches emptied, batch 1's 72 warm the process, the other 288 are timed (CPU
  seconds, ``time.process_time``), and every plan is compared with the recorded one by its plan
  record (``fabrics.planner.record.plan_record``, JSON with sorted keys): "mismatched plans" must
  be 0. The requests and plans are recorded once from the cells (``--record-to``, default
  ``.gxnet-cache/planner_figure4_requests.json``; recorded on the tree that runs first, so record
  on the reference revision: ``--baseline`` runs it first).

``--baseline REV`` runs the same measurements on ``git archive REV`` (read-only: the tree is
extracted into a temporary folder and this script runs there in a subprocess) and prints
before / after / ratio side by side.

    .venv/bin/python benchmarks/planner_speed.py [--repeat 3] [--splits] [--cells] [--requests] [--baseline REV]

The shared-host planner's compiled descent (``fabrics.planner.descent``) is used when built
(``python setup.py build_ext --inplace``); ``--python-descent`` measures the Python path.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KiB = 1024

REQUESTS = {
    "table6 (N=256, L=18)": dict(world=256, ports=18, link_rate_Bps=5e10, hop_latency_s=0.52e-6, meshes=[
        {"shape": [4, 64], "collective": "allreduce", "payloads": [4 * KiB, 32 * KiB]},
        {"shape": [16, 16], "collective": "allreduce", "payloads": [4 * KiB, 4 * KiB]}]),
    "helix 2-mesh (N=512, L=36)": dict(world=512, ports=36, link_rate_Bps=5e10, hop_latency_s=0.52e-6, meshes=[
        {"shape": [4, 128], "collectives": ["alltoall", "none"], "payloads": [66, 0], "weights": [128, 0]},
        {"shape": [64, 8], "collectives": ["allgather", "allreduce"], "payloads": [256 * KiB, 4 * KiB],
         "weights": [128, 128]}]),
}

# Table 1 rows of Megatron 5T, B = 1, Helix (4, 128, 16, 32): what the decode pipeline plans for
DECODE_ROWS = [("attention", "world", "allreduce", 1, 512, 128, 4 * KiB),
               ("attention", "kvp", "alltoall", 128, 4, 128, 66),
               ("attention", "tpa", "none", 4, 128, 0, 0),
               ("ffn", "ep", "allgather", 32, 16, 128, 256 * KiB),
               ("ffn", "tpe", "allreduce", 16, 32, 128, 4 * KiB),
               ("lm_head", "world", "allgather", 1, 512, 1, 25 * KiB)]


def _empty_caches() -> None:
    from collectives.topology import clear_caches
    from fabrics.planner import clear_plan_cache

    clear_plan_cache()
    clear_caches()
    try:  # absent before the fabric caches existed (baseline revisions)
        from fabrics.network.analytical import clear_fabric_caches

        clear_fabric_caches()
        from fabrics.scaleup.phase_pricing import clear_phase_cache

        clear_phase_cache()
    except ImportError:
        pass


def _decode_request():
    from fabrics.network.protocol import DemandEntry
    from fabrics.planner import request_from_demand

    demand = tuple(DemandEntry(region=r, axis=a, collective=c, groups=g, ranks=n, calls_per_step=k, payload_bytes=p)
                   for r, a, c, g, n, k, p in DECODE_ROWS)
    return request_from_demand(demand, world=512, ports=36, link_rate_Bps=5e10, hop_latency_s=0.52e-6)[0]


def measure_plans(repeat: int) -> dict:
    from fabrics.planner import plan, request_from_dict

    builders = {name: (lambda kw=kw: request_from_dict(**kw)) for name, kw in REQUESTS.items()}
    builders["helix decode (N=512, L=36, 4 meshes)"] = _decode_request
    out = {}
    for name, build in builders.items():
        cold, warm = [], []
        for _ in range(repeat):
            _empty_caches()
            req = build()
            t = time.perf_counter()
            p = plan(req)
            cold.append(time.perf_counter() - t)
            for _ in range(20):
                t = time.perf_counter()
                plan(build())  # includes building and hashing the request
                warm.append(time.perf_counter() - t)
        out[f"plan cold s: {name}"] = statistics.median(cold)
        out[f"plan cached ms: {name}"] = statistics.median(warm) * 1e3
        out[f"plan T µs: {name}"] = p.total_time_s * 1e6
    return out


def _cfg(fabric: str, batch: int = 1, context: str = "5M"):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path.cwd() / "conf"), version_base=None):
        return compose(config_name="search", overrides=[f"fabric={fabric}", f"batch={batch}", f"context={context}",
                                                        "tracking.enabled=false"])


def _split_demands():
    from gxnet.plan import deployment_demand
    from gxnet.parallel import ParallelSpec
    from gxnet.splits import helix_splits

    from collectives.errors import SpecError
    from pipelines.specs import deployment_spec, model_spec

    cfg = _cfg("all_ocs")
    out = []
    for split in helix_splits(model_spec(cfg), 512):
        par = ParallelSpec(scheme="helix", kvp=split.kvp, tpa=split.tpa, ep=split.ep, tpe=split.tpe)
        try:
            out.append(deployment_demand(deployment_spec(cfg, parallel=par)))
        except SpecError:
            continue
    return out


def measure_splits() -> dict:
    from fabrics.scaleup.deployment import planning_demand
    from fabrics.planner import plan, plan_cache, request_from_demand

    demands = _split_demands()
    _empty_caches()
    times = []
    for demand in demands:
        req, _ = request_from_demand(planning_demand(demand), world=512, ports=36, link_rate_Bps=5e10,
                                     hop_latency_s=0.52e-6)
        plan_cache.clear()
        t = time.perf_counter()
        plan(req)
        times.append(time.perf_counter() - t)
    return {"72 split plans total s": sum(times), "72 split plans median ms": statistics.median(times) * 1e3,
            "72 split plans slowest s": max(times)}


def measure_cells() -> dict:
    from pipelines.search import time_splits

    out = {}
    for fabric in ("all_eps", "hybrid", "all_ocs"):
        _empty_caches()
        cfg = _cfg(fabric)
        t = time.perf_counter()
        rows = time_splits(cfg)
        out[f"search cell s: {fabric} ({len(rows)} splits)"] = time.perf_counter() - t
    return out


def record_requests(path: Path) -> None:
    """Every OCS request the five all-OCS 32K cells plan, with its plan (the plan store off)."""
    os.environ["GX_PLAN_STORE"] = "off"
    import fabrics.planner.cache as cache
    from fabrics.planner.record import plan_record
    from pipelines.search import time_splits

    recorded, compute = [], cache._compute

    def recording(request):
        result = compute(request)
        recorded.append({"request": request.canonical(), "plan": plan_record(result)})
        return result

    _empty_caches()
    cache._compute = recording
    try:
        for batch in (1, 2, 4, 8, 16):
            from hydra import compose, initialize_config_dir

            with initialize_config_dir(config_dir=str(Path.cwd() / "conf"), version_base=None):
                cfg = compose(config_name="search", overrides=["experiment=figure4_megatron", "fabric=all_ocs",
                                                               f"batch={batch}", "context=32K", "tracking.enabled=false"])
            time_splits(cfg)
    finally:
        cache._compute = compute
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recorded))


def _recorded_request(d: dict):
    from fabrics.planner.request import MeshRequest, PlanRequest

    meshes = tuple(MeshRequest(**{k: tuple(v) for k, v in m.items()}) for m in d["meshes"])
    return PlanRequest(**{**d, "meshes": meshes})


def measure_requests(path: Path, repeat: int) -> dict:
    from fabrics.planner import shared_host_plan
    from fabrics.planner.record import plan_record

    if not path.exists():
        record_requests(path)
    recorded = [(_recorded_request(r["request"]), json.dumps(r["plan"], sort_keys=True))
                for r in json.loads(path.read_text())]
    warm, timed = recorded[:72], recorded[72:]
    cpu, mismatched = [], 0
    for _ in range(repeat):
        _empty_caches()
        for request, _ in warm:
            shared_host_plan(request)
        t = time.process_time()
        plans = [json.dumps(plan_record(shared_host_plan(request)), sort_keys=True) for request, _ in timed]
        cpu.append(time.process_time() - t)
        mismatched = max(mismatched, sum(got != want for got, (_, want) in zip(plans, timed)))
    return {f"{len(timed)} recorded requests CPU s": statistics.median(cpu), "… mismatched plans": mismatched}


def measure(args) -> dict:
    out = {} if args.requests_only else measure_plans(args.repeat)
    if args.splits:
        out.update(measure_splits())
    if args.cells:
        out.update(measure_cells())
    if args.requests or args.requests_only:
        out.update(measure_requests(Path(args.record_to).resolve(), args.repeat))
    return out


def baseline(rev: str, args) -> dict:
    """The same measurements on ``git archive rev`` (extracted to a temporary folder)."""
    blob = subprocess.run(["git", "archive", "--format=tar", rev], cwd=ROOT, capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(blob)) as tar:
            tar.extractall(tmp, filter="data")
        script = Path(tmp) / "benchmarks" / "planner_speed_current.py"
        script.write_text(Path(__file__).read_text())
        cmd = [sys.executable, str(script), "--json", "--repeat", str(args.repeat)]
        cmd += ["--splits"] * args.splits + ["--cells"] * args.cells + ["--requests"] * args.requests
        cmd += ["--requests-only"] * args.requests_only + ["--record-to", str(Path(args.record_to).resolve())]
        cmd += ["--python-descent"] * args.python_descent
        env = {**os.environ, "PYTHONPATH": tmp}
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"baseline {rev} failed:\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])


TARGETS = {"plan cold s": 2.0, "plan cached ms": 1.0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--splits", action="store_true", help="plan the 72 Megatron splits as a search cell does")
    ap.add_argument("--cells", action="store_true", help="time whole search cells (all-EPS, hybrid, all-OCS)")
    ap.add_argument("--requests", action="store_true", help="replay the 360 recorded figure-4 all-OCS 32K requests")
    ap.add_argument("--requests-only", action="store_true", help="--requests without the single-plan measurements")
    ap.add_argument("--record-to", default=str(ROOT / ".gxnet-cache" / "planner_figure4_requests.json"),
                    help="the recorded requests and plans (recorded from the cells when absent)")
    ap.add_argument("--python-descent", action="store_true", help="the planner's Python descent, not the built one")
    ap.add_argument("--baseline", metavar="REV", help="also measure git revision REV and print ratios")
    ap.add_argument("--json", action="store_true", help="print the measurements as one JSON line")
    args = ap.parse_args()
    if args.python_descent:
        try:  # absent before the compiled descent (baseline revisions)
            from fabrics.planner.descent import use_compiled_descent

            use_compiled_descent(False)
        except ImportError:
            pass
    if args.json:
        print(json.dumps(measure(args)))
        return
    before = baseline(args.baseline, args) if args.baseline else None
    after = measure(args)
    head = f"{'measurement':<58} {'after':>10}"
    if before:
        head += f" {'before':>10} {'before/after':>13}"
    print(head + f" {'target':>8}")
    for key, value in after.items():
        line = f"{key:<58} {value:>10.3f}"
        if before:
            b = before.get(key)
            ratio = "" if b is None or "T µs" in key or not value else f"{b / value:.1f}x"
            line += f" {b if b is not None else float('nan'):>10.3f} {ratio:>13}"
        target = next((t for prefix, t in TARGETS.items() if key.startswith(prefix)), None)
        print(line + (f" {target:>8}" if target is not None else ""))


if __name__ == "__main__":
    main()
