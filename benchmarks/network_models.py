"""Benchmark: one decode step per network model and fabric, side by side (medians, ratios).

Megatron 5T decode (batch 1, 32K context) at a small world (64: Helix (4,16,8,8), the fabrics sized
to it) and, with ``--full``, the default deployment (512 of 576 RX00, 5M context, Helix
(4,128,16,32)). For each fabric: the step time each model predicts and the wall time of a cold
evaluation (network built and prepared, plan cached) and of a warm one (the same network again),
medians of ``--repeats``; ratios against the analytical model.

Run: .venv/bin/python benchmarks/network_models.py [--repeats 3] [--full] [--models analytical,flow]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hydra import compose, initialize_config_dir  # noqa: E402

from gxnet.executor import execute  # noqa: E402
from gxnet.plan import build_plan  # noqa: E402
from pipelines.app import CONF_DIR  # noqa: E402
from pipelines.network import build_network  # noqa: E402
from pipelines.specs import deployment_spec  # noqa: E402

SMALL = ["world=64", "parallel.kvp=4", "parallel.tpa=16", "parallel.ep=8", "parallel.tpe=8", "context=32K"]
FABRIC_ARGS = {"single_eps": [], "single_ocs": ["fabric.ports=16"], "all_eps": ["fabric.accelerators=64"],
               "hybrid": ["fabric.accelerators=64"], "all_ocs": ["fabric.accelerators=64", "fabric.ports=16"]}


def config(fabric: str, model: str, full: bool):
    overrides = [f"fabric={fabric}", f"network={model}"] + ([] if full else SMALL + FABRIC_ARGS[fabric])
    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        return compose(config_name="decode", overrides=overrides)


def measure(fabric: str, model: str, full: bool, repeats: int) -> tuple[float, float, float]:
    cfg = config(fabric, model, full)
    dep = deployment_spec(cfg)
    plan = build_plan(dep)
    cold, warm, step = [], [], 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        net = build_network(cfg, dep.accelerator, dep.world)
        step = execute(plan, net, trace=False).decode_step_s
        cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        execute(plan, net, trace=False)
        warm.append(time.perf_counter() - t0)
    return step, statistics.median(cold), statistics.median(warm)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--full", action="store_true", help="the default 512-rank deployment instead of world 64")
    ap.add_argument("--models", default="analytical,flow,simlette")
    ap.add_argument("--fabrics", default=",".join(FABRIC_ARGS))
    args = ap.parse_args()
    models = args.models.split(",")
    print(f"Megatron 5T decode step, {'world 512, 5M' if args.full else 'world 64, 32K'}; medians of {args.repeats}")
    print(f"{'fabric':<11} {'model':<11} {'step us':>10} {'vs analytical':>14} {'cold s':>8} {'warm ms':>9} {'cold ratio':>11}")
    for fabric in args.fabrics.split(","):
        base = None
        for model in models:
            step, cold, warm = measure(fabric, model, args.full, args.repeats)
            base = base or (step, cold)
            print(f"{fabric:<11} {model:<11} {step * 1e6:10.2f} {step / base[0]:14.4f} {cold:8.3f} {warm * 1e3:9.2f} "
                  f"{cold / base[1]:11.2f}", flush=True)


if __name__ == "__main__":
    main()
