"""Closed-form pricing speed and executor throughput.

    .venv/bin/python benchmarks/collectives_pricing.py [--repeat 200] [--before REV] [--exec-repeat 3]

Prints, per topology and collective, the median time to price every schedule at one size
(warm: per-topology invariants cached, as a planner sees them after the first call; cold: caches
cleared before each call) against the 1 ms target, then the data-flow executor's throughput
(transfers/s and chunk moves/s) on 512-rank schedules. ``--before REV`` also runs the executor of
revision REV (its ``collectives/verify.py``) on the same built schedules, the two called in turn
``--exec-repeat`` times: medians side by side, their ratio, and the same executed (h, v, u).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from collectives.schedules import COLLECTIVES, lookup
from collectives.selection import best_schedule, price_all
from collectives.topology import block_fold, clear_caches, folded_cube, hypercube, with_folds
from collectives.verify import execute

LAM, R, SIGMA = 0.52e-6, 5e10, 4096


def _median(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def pricing(repeat: int) -> None:
    topos = [with_folds(hypercube(4), [0b1111]), hypercube(9), folded_cube(9), block_fold((3, 3, 3)),
             with_folds(hypercube(9), [0b000000111, 0b000111000, 0b111000000])]
    print(f"{'topology':<26} {'collective':<14} {'warm median':>12} {'cold median':>12} {'warm/1ms':>9} {'best @4KiB':>26}")
    for topo in topos:
        for coll in COLLECTIVES:
            price_all(coll, topo, SIGMA, LAM, R)
            warm = _median(lambda: price_all(coll, topo, SIGMA, LAM, R), repeat)

            def cold():
                clear_caches()
                price_all(coll, topo, SIGMA, LAM, R)

            cold_t = _median(cold, max(3, repeat // 50))
            best = best_schedule(coll, topo, SIGMA, LAM, R)
            print(f"{topo.describe():<26} {coll:<14} {warm * 1e6:>10.1f}us {cold_t * 1e3:>10.1f}ms "
                  f"{warm / 1e-3:>9.3f} {best:>26}")


def executor_of(rev: str):
    """``execute`` of ``collectives/verify.py`` at git revision ``rev`` (loaded beside this tree's)."""
    root = Path(__file__).resolve().parent.parent
    text = subprocess.run(["git", "show", f"{rev}:collectives/verify.py"], cwd=root, check=True,
                          capture_output=True).stdout
    path = Path(tempfile.mkdtemp()) / "verify_before.py"
    path.write_bytes(text)
    spec = importlib.util.spec_from_file_location("verify_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["verify_before"] = module
    spec.loader.exec_module(module)
    return module.execute


def executor(before: str | None = None, repeat: int = 1) -> None:
    q9 = hypercube(9)
    cases = [("allreduce", "recursive_doubling"), ("allreduce", "coset_factored_parallel"), ("allreduce", "rs_ag"),
             ("allreduce", "one_shot"), ("allreduce", "ring"), ("allgather", "coset_factored"),
             ("reducescatter", "one_shot_dvo"), ("alltoall", "bruck"), ("alltoall", "direct")]
    old = executor_of(before) if before else None
    print(f"\n{'schedule (Q9, N=512)':<40} {'transfers':>10} {'chunk moves':>12} {'build s':>8} {'exec s':>8} "
          f"{'transfers/s':>12} {'moves/s':>12}" + (f" {'before s':>9} {'after/before':>12}" if old else ""))
    for coll, name in cases:
        alg = lookup(coll, name)
        t0 = time.perf_counter()
        sched = alg.build(q9)
        build_s = time.perf_counter() - t0
        now, then = [], []
        for _ in range(repeat):  # in turn, so both see the same host state
            t1 = time.perf_counter()
            new_rep = execute(sched, q9)
            now.append(time.perf_counter() - t1)
            if old:
                t1 = time.perf_counter()
                old_rep = old(sched, q9)
                then.append(time.perf_counter() - t1)
                if (old_rep.h, old_rep.v, old_rep.u) != (new_rep.h, new_rep.v, new_rep.u):
                    sys.exit(f"error: {coll} {name}: the executors disagree on (h, v, u)")
        exec_s = statistics.median(now)
        moves = sum(len(t.chunks) for p in sched.phases for t in p.transfers)
        line = (f"{coll + ' ' + name:<40} {new_rep.transfers:>10} {moves:>12} {build_s:>8.2f} {exec_s:>8.2f} "
                f"{new_rep.transfers / exec_s:>12.0f} {moves / exec_s:>12.0f}")
        if old:
            ratio = statistics.median(a / b for a, b in zip(now, then))
            line += f" {statistics.median(then):>9.2f} {ratio:>12.2f}"
        print(line)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--before", help="git revision whose executor runs beside this tree's")
    ap.add_argument("--exec-repeat", type=int, default=1, help="executor calls per schedule (median)")
    ap.add_argument("--executor-only", action="store_true", help="skip the pricing table")
    args = ap.parse_args()
    if not args.executor_only:
        pricing(args.repeat)
    executor(args.before, max(1, args.exec_repeat))
