"""Benchmark: wall time of one analytical decode-step evaluation of Megatron 5T.

Megatron 5T, 512 x RX00, 5M context, Helix (4, 128, 16, 32), batch 1 and 16, analytical
single-level EPS model (lambda = 0.81 us, 400 Gb/s, 36 ports; fabrics.network.analytical, or a fixed
latency stand-in if that module is missing). Prints medians side by side:

  cold    : first evaluation in a fresh state -- model graph, passes, lambdify, plan, execute
  new dep : compiled program cached, new deployment (the per-point cost of a split search)
  warm    : plan cached, execute only (the issue's target: <= 20 ms)
  warm/nt : the same without recording trace events

Run: .venv/bin/python benchmarks/decode_eval.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from gxnet import compile as gx_compile
from gxnet import graph as gx_graph
from gxnet.executor import execute
from gxnet.plan import PLAN_CACHE, build_plan
from gxnet.deployment import Deployment
from gxnet.parallel import ParallelSpec
from gxnet.testing import FixedLatencyNetwork, accelerator, model

MODEL, ACCEL = model("megatron_5t"), accelerator("rx00")  # YAML read once, outside the timings


def deployment(batch: int) -> Deployment:
    return Deployment(model=MODEL, accelerator=ACCEL, world=512, parallel=ParallelSpec(kvp=4, tpa=128, ep=16, tpe=32),
                      batch=batch, context_tokens=5_000_000)


def network():
    try:
        from fabrics.network.analytical import AnalyticalSingleLevel, SingleLevelParams
    except ImportError:  # pragma: no cover - before the analytical model existed
        return FixedLatencyNetwork(latency_s=5e-6, record=False), "fixed 5 us"
    return AnalyticalSingleLevel(SingleLevelParams(hop_latency_s=0.81e-6, link_rate_Bps=5e10, ports=36)), \
        "analytical single-level EPS"


def clear_all() -> None:
    PLAN_CACHE.clear()
    gx_compile.compiled_program.cache_clear()
    gx_graph.build_model_graph.cache_clear()


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    net, net_name = network()
    print(f"Megatron 5T, 512 x RX00, 5M context, Helix(4,128,16,32), network: {net_name}")
    print(f"{'batch':>5} {'cold ms':>9} {'new dep ms':>11} {'warm ms':>9} {'warm min':>9} {'warm/nt ms':>11} "
          f"{'warm/target':>12} {'step ms':>9} {'calls':>6}")
    for batch in (1, 16):
        colds = []
        for _ in range(max(3, args.repeats // 5)):
            clear_all()
            colds.append(timed(lambda: execute(build_plan(deployment(batch=batch)), net)))
        news = []
        for i in range(args.repeats):
            PLAN_CACHE.clear()
            news.append(timed(lambda: execute(build_plan(deployment(batch=batch)), net)))
        d = deployment(batch=batch)
        warm = [timed(lambda: execute(build_plan(d), net)) for _ in range(args.repeats)]
        warm_nt = [timed(lambda: execute(build_plan(d), net, trace=False)) for _ in range(args.repeats)]
        r = execute(build_plan(d), net)
        med = statistics.median
        print(f"{batch:>5} {med(colds) * 1e3:>9.1f} {med(news) * 1e3:>11.2f} {med(warm) * 1e3:>9.2f} "
              f"{min(warm) * 1e3:>9.2f} "
              f"{med(warm_nt) * 1e3:>11.2f} {med(warm) / 20e-3:>12.2f} {r.decode_step_s * 1e3:>9.3f} "
              f"{r.collective_calls:>6}")
    per_point = med(news)
    print(f"2160-point split search at the 'new dep' cost: {2160 * per_point:.1f} s "
          f"(+ one cold compile per model/scheme/accelerator)")


if __name__ == "__main__":
    main()
