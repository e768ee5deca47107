"""Benchmark: Megatron 5T decode-step evaluation on every scale-up fabric (FabricAnalytical).

Megatron 5T, 512 of 576 RX00 (single-level fabrics: 512), 5M context, batch 1, Helix
(4, 128, 16, 32), 36 ports × 400 Gb/s. Per fabric, medians side by side:

  cold     : fresh network model, every planner / schedule cache emptied: prepare (plan, circuits,
             placement) + pricing each distinct collective once + the executor walk
  new net  : fresh network model, caches warm (plan from the request-hash cache, schedule arrays
             cached): what a second deployment with the same demand costs
  warm     : the same network model again (prepared fabric and prices cached) — target ≤ 20 ms
  warm/nt  : warm without trace events
  plan hit : ``fabrics.planner.plan`` on the cached request (target ≤ 1 ms)

and the decode result (tokens/s/user, communication per step, system power, tokens/s/MW).

Run: .venv/bin/python benchmarks/fabric_decode.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from fabrics.network.analytical import FabricAnalytical, clear_fabric_caches
from pipelines.network import fabric_from_dict
from fabrics.planner import clear_plan_cache, plan, request_from_demand
from fabrics.power import system_power_W, tokens_per_s_per_MW
from gxnet.deployment import Deployment
from gxnet.executor import execute
from gxnet.parallel import ParallelSpec
from gxnet.plan import build_plan
from gxnet.testing import accelerator, model

KINDS = ("single_eps", "single_ocs", "all_eps", "hybrid", "all_ocs")


def fabric(kind):
    acc = None if kind.startswith("single") else 576
    return fabric_from_dict({"kind": kind, "ports": 36, "link_rate": 5e10, "accelerators": acc}, world=512)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    dep = Deployment(model=model("megatron_5t"), accelerator=accelerator("rx00"), world=512,
                     parallel=ParallelSpec(kvp=4, tpa=128, ep=16, tpe=32), batch=1, context_tokens=5_000_000)
    p = build_plan(dep)
    print(f"Megatron 5T, 512 RX00, 5M context, B=1, Helix (4,128,16,32); medians of {args.repeats}")
    print(f"{'fabric':<11}{'cold s':>9}{'new net ms':>12}{'warm ms':>9}{'warm/nt ms':>12}{'plan hit ms':>13}"
          f"{'tok/s/user':>12}{'comm ms':>9}{'power MW':>10}{'tok/s/MW':>10}")
    for kind in KINDS:
        f = fabric(kind)
        cold, new, warm, warm_nt, hit = [], [], [], [], []
        for _ in range(args.repeats):
            clear_plan_cache()
            clear_fabric_caches()
            cold.append(timed(lambda: execute(p, FabricAnalytical(f))))
            new.append(timed(lambda: execute(p, FabricAnalytical(f))))
            net = FabricAnalytical(f)
            execute(p, net)
            warm.append(timed(lambda: execute(p, net)))
            warm_nt.append(timed(lambda: execute(p, net, trace=False)))
            if f.spec.level1_kind == "ocs":
                req, _ = request_from_demand(p.demand, world=512, ports=36, link_rate_Bps=5e10,
                                             hop_latency_s=net.deployment.plan_json["hop_latency_s"])
                hit.append(timed(lambda: plan(req)))
        step = execute(p, net, trace=False)
        watts = system_power_W(f, 2631.0)
        med = statistics.median
        print(f"{kind:<11}{med(cold):9.2f}{med(new) * 1e3:12.1f}{med(warm) * 1e3:9.1f}{med(warm_nt) * 1e3:12.1f}"
              f"{(med(hit) * 1e3 if hit else float('nan')):13.3f}{step.interactivity_tok_s_user:12.1f}"
              f"{step.breakdown_s['communication'] * 1e3:9.3f}{watts / 1e6:10.3f}"
              f"{tokens_per_s_per_MW(step.throughput_tok_s, watts):10.1f}")


if __name__ == "__main__":
    main()
