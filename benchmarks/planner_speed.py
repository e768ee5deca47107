"""Planner speed (issue: ≤ 2 s per request cold, ≤ 1 ms cached).

Requests: the Table 6 worked plan (N = 256, L = 18, two meshes) and a 512-accelerator Helix
deployment with two meshes (attention (KVP, TPA) = (4, 128): all-to-all on KVP; FFN (EP, TPE)
= (64, 8): all-gather 256 KiB on EP, all-reduce 4 KiB on TPE; 128 calls per step each, L = 36).
Cold = every cache emptied (plan cache, axis prices, topology invariants and tilings).

    .venv/bin/python benchmarks/planner_speed.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from collectives.topology import clear_caches
from fabrics.planner import clear_plan_cache, plan, request_from_dict

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'request':<28} {'cold median s':>14} {'target s':>9} {'cold/target':>12} {'cached median ms':>17} "
          f"{'target ms':>10} {'T µs':>8} {'ports':>6}")
    for name, kw in REQUESTS.items():
        cold, warm = [], []
        for _ in range(args.repeat):
            clear_plan_cache()
            clear_caches()
            req = request_from_dict(**kw)
            t = time.perf_counter()
            p = plan(req)
            cold.append(time.perf_counter() - t)
            for _ in range(20):
                t = time.perf_counter()
                plan(request_from_dict(**kw))  # includes building and hashing the request
                warm.append(time.perf_counter() - t)
        c, w = statistics.median(cold), statistics.median(warm) * 1e3
        print(f"{name:<28} {c:>14.3f} {2.0:>9.1f} {c / 2.0:>12.2f} {w:>17.3f} {1.0:>10.1f} "
              f"{p.total_time_s * 1e6:>8.2f} {p.ports_used:>3}/{p.ports}")


if __name__ == "__main__":
    main()
