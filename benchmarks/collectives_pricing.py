"""Closed-form pricing speed and executor throughput (issue #3 acceptance).

    .venv/bin/python benchmarks/collectives_pricing.py [--repeat 200]

Prints, per topology and collective, the median time to price every schedule at one size
(warm: per-topology invariants cached, as a planner sees them after the first call; cold: caches
cleared before each call) against the 1 ms target, then the data-flow executor's throughput
(transfers/s and chunk moves/s) on 512-rank schedules.
"""

from __future__ import annotations

import argparse
import statistics
import time

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


def executor() -> None:
    q9 = hypercube(9)
    cases = [("allreduce", "recursive_doubling"), ("allreduce", "coset_factored_parallel"), ("allreduce", "rs_ag"),
             ("allreduce", "one_shot"), ("allreduce", "ring"), ("allgather", "coset_factored"),
             ("reducescatter", "one_shot_dvo"), ("alltoall", "bruck"), ("alltoall", "direct")]
    print(f"\n{'schedule (Q9, N=512)':<40} {'transfers':>10} {'chunk moves':>12} {'build s':>8} {'exec s':>8} "
          f"{'transfers/s':>12} {'moves/s':>12}")
    for coll, name in cases:
        alg = lookup(coll, name)
        t0 = time.perf_counter()
        sched = alg.build(q9)
        t1 = time.perf_counter()
        rep = execute(sched, q9)
        t2 = time.perf_counter()
        moves = sum(len(t.chunks) for p in sched.phases for t in p.transfers)
        print(f"{coll + ' ' + name:<40} {rep.transfers:>10} {moves:>12} {t1 - t0:>8.2f} {t2 - t1:>8.2f} "
              f"{rep.transfers / (t2 - t1):>12.0f} {moves / (t2 - t1):>12.0f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    pricing(args.repeat)
    executor()
