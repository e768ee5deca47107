"""Simlette speed (paper 003, Appendix C.5, Figure 22): flit-by-flit vs optimized mode.

    .venv/bin/python benchmarks/simlette_speed.py              # 256 x 8-port EPS, 40 KiB all-reduce + decode step
    .venv/bin/python benchmarks/simlette_speed.py --repeat 3 --sweep --core 0

Prints, side by side, the median wall time of each mode, the speed-up, the simulated completion
times and their relative difference, for
  * the auto-selected schedule (two-shot at 40 KiB on 256 ranks, one DL flit per message), and
  * one-shot, the paper's workload ("a message spans up to 64 flits" at 40 KiB);
and the wall time of one Megatron 5T decode step at world 512 (single-level EPS, 36 ports, and 512 of
the 576 accelerators of all_eps, hybrid and all_ocs; optimized mode) with the reuse statistics and
the analytical model's step for comparison. Paper (Ryzen 9 9950X core): 827 s flit-by-flit,
90 s optimized; targets here: <= 90 s and <= 9 s; decode step <= 60 s.

    .venv/bin/python benchmarks/simlette_speed.py --before 6f183eb --repeat 3   # before/after, one run
    .venv/bin/python benchmarks/simlette_speed.py --before python --buffer 16384   # Python loop vs compiled, credits

``--before REV`` times the paper's case (256 x 8 ports, 40 KiB all-reduce, one-shot in both modes
and the auto schedule optimized) on this tree and on the tree of git revision REV (extracted with
``git archive`` into a temporary folder, its compiled Simlette loop built there if it has one; each
side prints which loop ran), alternating the two per repeat, each run in a fresh
process; the time counted is building the network and simulating (beyond Python start-up and
imports). It prints the medians side by side, the event counts, events per CPU second against
SimPy's own ceiling (processes yielding bare timeouts, measured in the same run) and whether both
trees give the same completion time to the last bit.
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
sys.path.insert(0, str(ROOT))

KIB = 1024


def one_allreduce(n: int, ports: int, size: int, mode: str, schedule: str | None, buffer_bytes: int | None = None) -> dict:
    from fabrics.network.simlette.build import simulate_collective
    from pipelines.network import simlette_from_config

    t0, c0 = time.perf_counter(), time.process_time()
    net = simlette_from_config({"kind": "single_eps", "ports": ports, "link_rate_Bps": 5e10, "accelerators": n},
                               {"mode": mode, "schedule": schedule, "buffer_bytes": buffer_bytes})
    res = simulate_collective(net, "allreduce", size)
    res["wall_s"] = time.perf_counter() - t0
    res["cpu_s"] = time.process_time() - c0  # differs from wall when other processes share the core
    return res


def compare(n: int, ports: int, size: int, schedule: str | None, repeat: int) -> None:
    rows = {}
    for mode in ("optimized", "flit"):
        runs = [one_allreduce(n, ports, size, mode, schedule) for _ in range(repeat)]
        rows[mode] = (statistics.median(r["wall_s"] for r in runs), statistics.median(r["cpu_s"] for r in runs), runs[0])
    (w_opt, c_opt, r_opt), (w_flit, c_flit, r_flit) = rows["optimized"], rows["flit"]
    diff = abs(r_opt["completion_s"] - r_flit["completion_s"]) / r_flit["completion_s"]
    print(f"{n:>4} acc x {ports} ports, {size // KIB} KiB all-reduce, schedule {r_opt['schedule']:<9}: "
          f"optimized {w_opt:6.2f} s wall {c_opt:6.2f} s cpu ({r_opt['events']:>9,} events) | "
          f"flit {w_flit:6.2f} s wall {c_flit:6.2f} s cpu ({r_flit['events']:>10,} events) | "
          f"speed-up {c_flit / c_opt:5.1f}x | "
          f"T {r_opt['completion_s'] * 1e6:8.3f} us vs {r_flit['completion_s'] * 1e6:8.3f} us (diff {diff:.2e})",
          flush=True)


def decode_step(world: int = 512, fabric: str | None = None) -> None:
    from hydra import compose, initialize_config_dir

    from gxnet.executor import execute
    from gxnet.plan import build_plan
    from pipelines.app import CONF_DIR
    from pipelines.network import build_network
    from pipelines.specs import deployment_spec

    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        cfg = compose(config_name="decode", overrides=[f"world={world}", "network=simlette"]
                      + ([f"fabric={fabric}"] if fabric else []))
    dep = deployment_spec(cfg)
    t0, c0 = time.perf_counter(), time.process_time()
    net = build_network(cfg, dep.accelerator, dep.world)
    step = execute(build_plan(dep), net)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rep = net.simulation_report()
    ana_s = None
    try:  # the analytical model on the same deployment (fabric=...), for the ratio
        cfg.network = {"name": "analytical"}
        ana_s = execute(build_plan(dep), build_network(cfg, dep.accelerator, dep.world)).decode_step_s
    except Exception:  # noqa: BLE001 - the comparison is informative only
        pass
    ratio = f" (analytical {ana_s * 1e3:.4f} ms, x{step.decode_step_s / ana_s:.3f})" if ana_s else ""
    fab = cfg.fabric
    print(f"Megatron 5T decode step, world {world}, {fab.get('name')} ({fab.get('ports')} ports), Simlette optimized: "
          f"{wall:.1f} s wall, {cpu:.1f} s cpu ({rep['sim_wall_s']:.1f} s simulating, {rep['events']:,} events); "
          f"{rep['episodes_simulated']} episodes simulated, {rep['episodes_reused']} reused; "
          f"decode step {step.decode_step_s * 1e3:.4f} ms{ratio}", flush=True)


def simpy_ceiling(events: int = 400_000, processes: int = 1000) -> float:
    """SimPy's own throughput: timeout events per CPU second of processes that only yield timeouts."""
    import simpy

    env = simpy.Environment()

    def proc(env, k):
        for _ in range(k):
            yield env.timeout(1.0)

    for _ in range(processes):
        env.process(proc(env, events // processes))
    c0 = time.process_time()
    env.run()
    return events / (time.process_time() - c0)


BEFORE_AFTER_CASES = (("optimized", "one_shot"), ("flit", "one_shot"), ("optimized", "auto"))


def child(tree: str, mode: str, n: int, schedule: str, buffer_bytes: str, loop: str) -> None:
    """One timed run in this process on the code of ``tree`` (JSON on stdout); loop "python": with
    the compiled Simlette loop switched off."""
    sys.path.insert(0, tree)
    if loop == "python":
        from fabrics.network.simlette.compiled import CORE

        CORE.use(False)
    res = one_allreduce(n, 8, 40 * KIB, mode, None if schedule == "auto" else schedule,
                        None if buffer_bytes == "unlimited" else int(buffer_bytes))
    import fabrics

    print(json.dumps({"wall_s": res["wall_s"], "cpu_s": res["cpu_s"], "events": res["events"],
                      "engine": res["simlette"].get("engine", "python"),
                      "completion_s": res["completion_s"], "schedule": res["schedule"],
                      "tree": str(Path(fabrics.__file__).resolve().parent.parent)}))


def _run_child(tree: Path, mode: str, n: int, schedule: str, buffer_bytes: int | None, loop: str) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(tree), mode, str(n), schedule,
           "unlimited" if buffer_bytes is None else str(buffer_bytes), loop]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=tree,
                         env={**os.environ, "PYTHONPATH": str(tree)})
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(res["tree"]) == tree.resolve(), f"child imported {res['tree']}, not {tree}"
    return res


def build_engine_core(tree: Path) -> None:
    """The compiled Simlette loop of an extracted tree, built in place as an install would (a tree
    from before it has none: that side runs its Python loop)."""
    import sysconfig

    from pipelines.kernel_build import build_kernel

    src = tree / "fabrics" / "network" / "simlette" / "engine_core.c"
    if src.exists() and build_kernel(src.with_name("_engine_core" + sysconfig.get_config_var("EXT_SUFFIX")),
                                     source=src) is None:
        sys.exit(f"error: could not compile {src} (a C compiler and Python headers are needed)")


def before_after(rev: str, repeat: int, n: int = 256, cases=BEFORE_AFTER_CASES, buffer_bytes: int | None = None) -> None:
    """The paper's case on the tree of ``rev`` (``python``: this tree with its Python loop) and on
    this tree, alternating, medians side by side."""
    with tempfile.TemporaryDirectory(prefix="simlette_before_") as tmp:
        before = Path(tmp) if rev != "python" else ROOT
        if rev != "python":
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
            build_engine_core(before)
        trees = {"before": before, "after": ROOT}
        loops = {"before": "python" if rev == "python" else "auto", "after": "auto"}
        ceilings = []
        buf = "unlimited buffers" if buffer_bytes is None else f"{buffer_bytes} B receive buffers"
        print(f"{n} accelerators x 8 ports, single_eps, 40 KiB all-reduce, {buf}; before = {rev}, after = this tree; "
              f"medians of {repeat} runs, each in a fresh process (build + simulate, beyond start-up)", flush=True)
        for mode, schedule in cases:
            runs: dict[str, list[dict]] = {k: [] for k in trees}
            for _ in range(repeat):
                for name, tree in trees.items():
                    runs[name].append(_run_child(tree, mode, n, schedule, buffer_bytes, loops[name]))
                ceilings.append(simpy_ceiling())
            med = {k: {f: statistics.median(r[f] for r in v) for f in ("wall_s", "cpu_s")} for k, v in runs.items()}
            b, a = runs["before"][0], runs["after"][0]
            same = all(r["completion_s"] == b["completion_s"] for v in runs.values() for r in v)
            print(f"{mode:>9} {b['schedule']:<8} | before ({b['engine']}) {med['before']['wall_s']:6.2f} s wall "
                  f"{med['before']['cpu_s']:6.2f} s cpu {b['events']:>10,} events "
                  f"({b['events'] / med['before']['cpu_s'] / 1e3:5.0f} k/s) | after ({a['engine']}) {med['after']['wall_s']:6.2f} s wall "
                  f"{med['after']['cpu_s']:6.2f} s cpu {a['events']:>10,} events "
                  f"({a['events'] / med['after']['cpu_s'] / 1e3:5.0f} k/s) | speed-up "
                  f"{med['before']['wall_s'] / med['after']['wall_s']:4.2f}x wall "
                  f"{med['before']['cpu_s'] / med['after']['cpu_s']:4.2f}x cpu | "
                  f"T {a['completion_s'] * 1e6:.4f} us, identical: {same}", flush=True)
        print(f"SimPy ceiling (processes yielding bare timeouts), median of {len(ceilings)}: "
              f"{statistics.median(ceilings) / 1e3:.0f} k events per cpu second", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, tree, mode, n, schedule, buffer_bytes, loop = sys.argv
        child(tree, mode, int(n), schedule, buffer_bytes, loop)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=1, help="runs per mode (median reported)")
    ap.add_argument("--sweep", action="store_true", help="Figure 22: 32..256 accelerators, one-shot")
    ap.add_argument("--core", type=int, default=None, help="pin to this CPU core")
    ap.add_argument("--no-decode", action="store_true")
    ap.add_argument("--fabrics", default="single_eps,all_eps,hybrid,all_ocs",
                    help="decode-step fabrics (comma list; 512 of 576 accelerators on the two-level ones)")
    ap.add_argument("--before", metavar="REV", default=None,
                    help="time the paper's case on git revision REV (or `python`: this tree's Python loop) and "
                         "on this tree side by side, then stop")
    ap.add_argument("--buffer", type=int, default=None, metavar="BYTES",
                    help="with --before: receive buffers of this size (credits; default unlimited)")
    ap.add_argument("--cases", default=",".join(f"{m}:{s}" for m, s in BEFORE_AFTER_CASES),
                    help="with --before: mode:schedule list (schedule auto = the model's choice)")
    args = ap.parse_args()
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})
    if args.before:
        before_after(args.before, max(1, args.repeat), cases=[tuple(c.split(":")) for c in args.cases.split(",")],
                     buffer_bytes=args.buffer)
        return
    print("paper (Ryzen 9 9950X core): 256 acc one-shot 40 KiB: flit 827 s, optimized 90 s (9.2x); "
          "targets here: flit <= 90 s, optimized <= 9 s, decode step <= 60 s", flush=True)
    compare(256, 8, 40 * KIB, None, args.repeat)
    compare(256, 8, 40 * KIB, "one_shot", args.repeat)
    if args.sweep:
        for n in (32, 64, 128):
            compare(n, 8, 40 * KIB, "one_shot", args.repeat)
    if not args.no_decode:
        for fabric in args.fabrics.split(","):
            try:
                decode_step(fabric=fabric or None)
            except Exception as exc:  # the decode config belongs to another room; report, do not hide the rest
                print(f"decode step on {fabric} skipped: {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)

if __name__ == "__main__":
    main()
