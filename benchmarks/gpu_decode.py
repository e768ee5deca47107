"""Benchmark: decode-step evaluation on the GPU fabrics (``fabric=nvswitch | gpu_cluster``).

Zoo models on today's GPU systems, context 4K, the ideal network model (``network=analytical``)
and, when the build has it, the NCCL-like one (``network=nccl``). Per deployment, medians of
``--repeats``:

  first    : the first evaluation in the process (compiles the model's graph, builds the plan)
  cold     : plan cache emptied, fresh network model (the compiled graph stays): plan, model, walk
  warm     : the plan cached, a fresh network model (what a sweep point with a known deployment costs)
  warm net : the same network model again (its price cache warm) -- target <= 10 ms; also its minimum
  warm/nt  : warm net without trace events

Run: .venv/bin/python benchmarks/gpu_decode.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import yaml

from gxnet.deployment import Deployment
from gxnet.executor import execute
from gxnet.parallel import ParallelSpec
from gxnet.plan import PLAN_CACHE, build_plan
from gxnet.precision import precision_from_dict
from gxnet.testing import CONF, accelerator, model
from pipelines.network import build_network

# (label, model, accelerator, precision, fabric overrides, world, parallel, batch)
POINTS = [
    ("Llama-3.1-70B TP8, HGX H200", "llama3_1_70b", "h200", "fp8", {"name": "nvswitch"}, 8,
     ParallelSpec(scheme="tp_ep", tp=8, ep=1), 64),
    ("Mixtral-8x7B EP8, HGX H100", "mixtral_8x7b", "h100", "bf16", {"name": "nvswitch"}, 8,
     ParallelSpec(scheme="tp_ep", tp=1, ep=8), 64),
    ("DeepSeek-V3 DPA16/EP16, 2 x 8 H200", "deepseek_v3", "h200", "fp8", {"name": "gpu_cluster"}, 16,
     ParallelSpec(scheme="dp_attention", dpa=16, ep=16), 256),
    ("GPT-OSS-120B EP64, GB300 NVL72", "gpt_oss_120b", "gb300", "fp4", {"name": "nvswitch"}, 64,
     ParallelSpec(scheme="tp_ep", tp=1, ep=64), 256),
]


def networks() -> list[str]:
    from fabrics.network.registry import NETWORK_MODELS

    return [n for n in ("analytical", "nccl") if n in NETWORK_MODELS.names()]


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def fabric_cfg(fab: dict, network: str) -> dict:
    base = yaml.safe_load((CONF / "fabric" / f"{fab['name']}.yaml").read_text())
    return {"fabric": {**base, **fab}, "network": {"name": network}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"decode step on GPU fabrics, context 4K; medians of {args.repeats}")
    print(f"{'deployment':<38}{'network':<12}{'first ms':>9}{'cold ms':>9}{'warm ms':>9}{'warm net ms':>13}{'min ms':>8}{'warm/nt ms':>12}"
          f"{'step ms':>9}{'comm ms':>9}")
    for label, mname, aname, prec, fab, world, par, batch in POINTS:
        precision = precision_from_dict(yaml.safe_load((CONF / "precision" / f"{prec}.yaml").read_text()))
        dep = Deployment(model=model(mname), accelerator=accelerator(aname), world=world, parallel=par,
                         batch=batch, context_tokens=4096, precision=precision)
        for network in networks():
            cfg = fabric_cfg(fab, network)
            cold, warm, warm_net, warm_nt = [], [], [], []
            PLAN_CACHE.clear()
            first = timed(lambda: execute(build_plan(dep), build_network(cfg, dep.accelerator, world)))
            for _ in range(args.repeats):
                PLAN_CACHE.clear()
                cold.append(timed(lambda: execute(build_plan(dep), build_network(cfg, dep.accelerator, world))))
                warm.append(timed(lambda: execute(build_plan(dep), build_network(cfg, dep.accelerator, world))))
                net = build_network(cfg, dep.accelerator, world)
                execute(build_plan(dep), net)
                warm_net.append(timed(lambda: execute(build_plan(dep), net)))
                warm_nt.append(timed(lambda: execute(build_plan(dep), net, trace=False)))
            step = execute(build_plan(dep), net, trace=False)
            med = statistics.median
            print(f"{label:<38}{network:<12}{first * 1e3:9.1f}{med(cold) * 1e3:9.1f}{med(warm) * 1e3:9.2f}"
                  f"{med(warm_net) * 1e3:13.2f}{min(warm_net) * 1e3:8.2f}{med(warm_nt) * 1e3:12.2f}"
                  f"{step.decode_step_s * 1e3:9.3f}{step.breakdown_s['communication'] * 1e3:9.3f}")


if __name__ == "__main__":
    main()
