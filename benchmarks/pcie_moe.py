"""Benchmark: expert routing, PCIe AlltoAllv per layer and the MoE prefill model (issue #9).

Prints, in one run, side by side:
1. wall-clock medians of the pieces (routing draw per layer, phase plan build, one phase
   evaluation per scheduler), so regressions show;
2. modelled per-layer AlltoAllv completion (data movement, planning excluded) for NCCL-like and
   VarioPath under uniform, global-Zipf and per-source-Zipf routing, with ratios.

    .venv/bin/python benchmarks/pcie_moe.py [--repeats 5] [--nodes 2] [--layers 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.network import pcie_cluster  # noqa: E402
from fabrics.network.pcie import PcieNetwork, PcieNetworkParams  # noqa: E402
from gxnet.precision import precision_from_dict  # noqa: E402
from gxnet.ep_phase import EpDeployment, PhaseSpec, build_phase_plan, execute_phase  # noqa: E402
from gxnet.expert_routing import RoutingProblem, RoutingSpec, expert_hosts, layer_routing  # noqa: E402
from gxnet.testing import accelerator, model  # noqa: E402


def median_s(fn, repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=8192)
    args = ap.parse_args()
    ep = 8 * args.nodes
    plat = yaml.safe_load((ROOT / "conf" / "platform" / "r5080_bf3.yaml").read_text())
    cluster = pcie_cluster(plat, args.nodes)
    cache = str(ROOT / ".gxnet-cache" / "variopath")
    nets = {s: PcieNetwork(cluster, PcieNetworkParams(scheduler=s, planning="none", catalog_dir=cache))
            for s in ("nccl", "variopath")}
    m = dataclasses.replace(model("qwen3_30b_a3b"), layers=args.layers)
    bf16 = precision_from_dict({"name": "bf16", "weights_bits": 16, "kv_bits": 16})
    hosts = expert_hosts(128, ep, "uneven")
    prob = RoutingProblem(tokens=args.tokens, experts=128, top_k=8, layers=1, ep=ep, token_bytes=4096)

    print(f"# wall clock (median of {args.repeats}), Qwen3-30B-A3B, {args.tokens} tokens, EP{ep} on {args.nodes} R5080-BF3 nodes")
    for kind in ("uniform", "topk", "zipf"):
        spec = RoutingSpec(model=kind, placement="uneven")
        print(f"routing draw per layer [{kind:7s}]  {median_s(lambda: layer_routing(spec, prob, 0, hosts), args.repeats) * 1e3:8.2f} ms")
    dep = EpDeployment(model=m, accelerator=accelerator("rtx5080"), ep=ep, phase=PhaseSpec(prompt_tokens=args.tokens),
                       routing=RoutingSpec(model="topk", placement="uneven"), precision=bf16)
    build_phase_plan(dep)  # compile once
    print(f"phase plan build ({args.layers} layers, topk)   {median_s(lambda: build_phase_plan(dep), args.repeats) * 1e3:8.2f} ms")
    plan = build_phase_plan(dep)
    for s, n in nets.items():
        execute_phase(plan, n)  # warm: catalog and plan caches
        t_cold = median_s(lambda: execute_phase(plan, PcieNetwork(cluster, PcieNetworkParams(
            scheduler=s, planning="none", catalog_dir=cache))), max(1, args.repeats // 2))
        t_warm = median_s(lambda: execute_phase(plan, n, trace=False), args.repeats)
        print(f"phase evaluation [{s:9s}] new network {t_cold * 1e3:8.1f} ms   cached plans {t_warm * 1e3:8.2f} ms")

    print(f"\n# modelled AlltoAllv per layer (dispatch + combine mean, planning excluded), median over {args.layers} layers")
    print(f"{'routing':28s} {'nccl ms':>9s} {'variopath ms':>13s} {'nccl/vp':>8s} {'vs uniform (nccl, vp)':>24s}")
    base = None
    for label, spec in (("uniform (expectation)", RoutingSpec(placement="uneven")),
                        ("top-k random", RoutingSpec(model="topk", placement="uneven")),
                        ("zipf 0.8 global", RoutingSpec(model="zipf", zipf_s=0.8, placement="uneven")),
                        ("zipf 0.8 per source", RoutingSpec(model="zipf", zipf_s=0.8, zipf_scope="per_source", placement="uneven"))):
        p = build_phase_plan(dataclasses.replace(dep, routing=spec))
        med = {}
        for s, n in nets.items():
            r = execute_phase(p, n, trace=False).summary()["alltoallv"]
            med[s] = statistics.median(r["per_layer_dispatch_s"] + r["per_layer_combine_s"])
        base = base or med
        print(f"{label:28s} {med['nccl'] * 1e3:9.3f} {med['variopath'] * 1e3:13.3f} {med['nccl'] / med['variopath']:8.2f} "
              f"{med['nccl'] / base['nccl']:11.2f} {med['variopath'] / base['variopath']:11.2f}")


if __name__ == "__main__":
    main()
