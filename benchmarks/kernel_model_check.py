"""The fitted GPU kernel model (gxnet/kernels.py) against a gpu_check.sh run it was not fitted to.

``benchmarks/gpu_check.sh`` times every fused kernel of five decode deployments on one GPU (CUDA
graphs of the torch ops each fused kernel stands for, exact per-rank shapes, bf16). This prints,
per distinct kernel (first track, shapes measured once), GXNET's HBM bytes, the measured time, the
kernel model's ``kernel_latency_s + max(D / (eta_D W), F / (eta_F P))`` for that accelerator in
bf16, and the residual (predicted / measured - 1), largest kernels first; then the median residual
of the kernels above ``--min-mb``. Kernels far below it are chains of 2-5 small torch ops rather
than one fused kernel, so their times say little about a fused engine (docs/hardware.md).

    .venv/bin/python benchmarks/kernel_model_check.py [--file benchmarks/results/h200_gpu_check.json] [--min-mb 100]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from gxnet import testing as T
from gxnet.kernels import kernel_model
from gxnet.precision import precision_from_dict

ROOT = Path(__file__).resolve().parent.parent


def rows(report: dict) -> list[dict]:
    """One row per kernel timed (reused shapes and other tracks left out), largest first."""
    out = []
    for step, body in report["steps"].items():
        cal = ((body or {}).get("calibrate") or {}).get("results") if isinstance(body, dict) else None
        if not cal:
            continue
        km = kernel_model(T.accelerator(cal["roofline_accelerator"]), precision_from_dict("bf16"))
        seen = set()
        for k in cal["kernels"]:
            # one row per timing: entries that share one (reused_from; files written before it was
            # reported: the same kernel kind, bytes, FLOPs and time to the last bit) count once
            timing = (k["kernel"], k["hbm_bytes"], k["flops"], k["measured_s"])
            if k.get("reused_from") is not None or timing in seen or k["track"] != 0 or k["scaled"]:
                continue
            seen.add(timing)
            predicted = km.kernel_s(k["flops"], k["hbm_bytes"])
            out.append({"case": step.split("/", 1)[1], "kernel": f"{k['name']} ({k['kernel']})",
                        "hbm_MB": k["hbm_bytes"] / 1e6, "measured_us": k["measured_s"] * 1e6,
                        "predicted_us": predicted * 1e6, "residual": predicted / k["measured_s"] - 1})
    return sorted(out, key=lambda r: -r["hbm_MB"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", default=str(ROOT / "benchmarks" / "results" / "h200_gpu_check.json"))
    ap.add_argument("--min-mb", type=float, default=100.0, help="kernels moving at least this many MB count in the median")
    a = ap.parse_args()
    table = rows(json.loads(Path(a.file).read_text()))
    print(f"| case | kernel | HBM MB | measured us | model us | residual |\n|---|---|---:|---:|---:|---:|")
    for r in table:
        print(f"| {r['case']} | {r['kernel']} | {r['hbm_MB']:.1f} | {r['measured_us']:.1f} | {r['predicted_us']:.1f} | "
              f"{100 * r['residual']:+.1f} % |")
    big = [r["residual"] for r in table if r["hbm_MB"] >= a.min_mb]
    small = [r["residual"] for r in table if r["hbm_MB"] < a.min_mb]
    if big:
        print(f"\nkernels >= {a.min_mb:g} MB: {len(big)}, median residual {100 * statistics.median(big):+.1f} % "
              f"(range {100 * min(big):+.1f} .. {100 * max(big):+.1f} %)")
    if small:
        print(f"kernels < {a.min_mb:g} MB: {len(small)}, median residual {100 * statistics.median(small):+.1f} % "
              "(torch op chains, not fused kernels)")


if __name__ == "__main__":
    main()
