"""The single-GPU checks of issue #8, run by ``benchmarks/gpu_check.sh`` (see README.md).

Runs, each as its own pipeline process with a time limit, and collects every figure into ONE
file, ``<out>/gpu_check.json`` (plus ``gpu_check.md``, the same figures as tables):

1. the host: torch / CUDA versions, GPU name and memory, ``nvidia-smi topo -m``;
2. topology discovery: ``pipelines.hardware.topology`` (NCCL dump, else nvidia-smi) -> platform YAML;
3. kernel calibration on CUDA (CUDA events, warm-up, CUDA-graph replay) in bf16 for three
   deployments stored in bf16, compared with the H200 roofline (``accelerator=h200``; paper 003 D.3
   found B200 decode kernels at 1.4-5x their roofline, none under ~3 us), and
   ``pipelines.decode compute=measured`` with each table: measured against roofline per kernel
   and per decode step;
4. the replay runner: gloo on the CPU (4 ranks), and NCCL with one GPU per rank when the host
   has >= 4 GPUs (multi-GPU PCIe servers).

Prints medians/ratios side by side; exit 1 if a step failed (its error is in the file too).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# All-bf16 storage (weights, KV, activations) so the roofline counts the bytes the bf16 kernels move
BF16 = ("precision.weights_bits=16", "precision.activations_bits=16", "precision.kv_bits=16")
MEGATRON = ("model=megatron_5t", "accelerator=h200", "world=512", "parallel.kvp=4", "parallel.tpa=128",
            "parallel.ep=16", "parallel.tpe=32", "context=5M", *BF16)
CALIBRATIONS = {
    "megatron_5t_b1_5M": (*MEGATRON, "batch=1"),
    "megatron_5t_b2_5M": (*MEGATRON, "batch=2"),  # bf16 KV: B=4 would not fit 141 GB of H200 HBM at 5M
    # paper 003 D.3's own comparison: GPT-OSS-120B decode with tensor parallelism on four GPUs
    # (B200 there), batch 1..16: kernels at 12-53 % of peak HBM bandwidth, 1.4-5x their roofline
    "gpt_oss_120b_tp4_b1_32K": ("model=gpt_oss_120b", "accelerator=h200", "world=4", "parallel=tp_ep",
                                "parallel.tp=4", "parallel.ep=1", "batch=1", "context=32K", *BF16),
    "gpt_oss_120b_tp4_b16_32K": ("model=gpt_oss_120b", "accelerator=h200", "world=4", "parallel=tp_ep",
                                 "parallel.tp=4", "parallel.ep=1", "batch=16", "context=32K", *BF16),
    "qwen3_30b_a3b_b16_32K": ("model=qwen3_30b_a3b", "accelerator=h200", "world=8", "parallel.kvp=2",
                              "parallel.tpa=4", "parallel.ep=8", "parallel.tpe=1", "batch=16", "context=32K", *BF16),
}


def run(cmd: list[str], timeout: float) -> tuple[int, str, float]:
    # keep the caller's PYTHONPATH (e.g. carried wheels on a bare GPU host) behind the repo root
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, GX_TRACKING="false", HYDRA_FULL_ERROR="0", PYTHONPATH=path)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, (p.stdout + p.stderr)[-3000:], time.monotonic() - t0
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:.0f} s", time.monotonic() - t0
    except OSError as exc:  # e.g. nvidia-smi missing
        return 127, str(exc), time.monotonic() - t0


def pipeline(name: str, overrides, out: Path, timeout: float) -> dict:
    rc, log, wall = run([sys.executable, "-m", f"pipelines.{name}", *overrides, f"hydra.run.dir={out}"], timeout)
    res = json.loads((out / "results.json").read_text()) if rc == 0 and (out / "results.json").exists() else None
    return {"rc": rc, "wall_s": wall, "results": res, "log_tail": None if rc == 0 else log}


def host() -> dict:
    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0}
    if info["gpus"]:
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, gpu_memory_bytes=int(p.total_memory), sm_count=p.multi_processor_count)
        try:
            info["peaks"] = measured_peaks(torch)
        except Exception as exc:  # noqa: BLE001 - the peaks are context; the checks still run
            info["peaks_error"] = f"{type(exc).__name__}: {exc}"
    rc, log, _ = run(["nvidia-smi", "topo", "-m"], 30)
    info["nvidia_smi_topo"] = log if rc == 0 else f"unavailable (rc {rc})"
    return info


def measured_peaks(torch) -> dict:
    """What this GPU reaches on the two roofline axes (CUDA events, median of 10 after 3 warm-ups,
    timed by ``pipelines.hardware.kernels.time_kernel`` like the calibration):
    a bf16 8192^3 GEMM (TFLOP/s) and a 4 GiB device-to-device copy (bytes read + written per s).
    The roofline's peaks come from the datasheet (conf/accelerator/h200.yaml); these say how much
    of a measured/roofline ratio is the chip rather than the kernel."""
    sys.path.insert(0, str(ROOT))
    from pipelines.hardware.kernels import time_kernel  # the calibration's own CUDA-event timer

    device = torch.device("cuda")

    def median_s(fn):
        return time_kernel(torch, fn, device, warmup=3, repeats=10, use_graphs=False)["median_s"]

    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    gemm_s = median_s(lambda: a @ b)
    src = torch.empty(1 << 31, device="cuda", dtype=torch.int16)  # 4 GiB
    dst = torch.empty_like(src)
    copy_s = median_s(lambda: dst.copy_(src))
    moved = 2 * src.numel() * src.element_size()
    del a, b, src, dst
    torch.cuda.empty_cache()
    return {"bf16_gemm_8192_tflops": 2 * n**3 / gemm_s / 1e12, "d2d_copy_bytes_per_s": moved / copy_s,
            "gemm_s": gemm_s, "copy_s": copy_s}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "gpu_check"))
    ap.add_argument("--budget-s", type=float, default=280.0, help="stop starting new steps after this")
    ap.add_argument("--device", default="cuda", help="calibration device (cpu: a dry run of this script)")
    a = ap.parse_args()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    left = lambda: a.budget_s - (time.monotonic() - t_start)  # noqa: E731
    report: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": host(), "steps": {}}
    failed = []

    rc, log, wall = run([sys.executable, "-m", "pipelines.hardware.topology", "--name", "gpu_host",
                         "--out", str(out / "platform_gpu_host.yaml")], 120)
    report["steps"]["topology"] = {"rc": rc, "wall_s": wall, "log": log.strip()[-500:]}

    for label, overrides in CALIBRATIONS.items():
        if left() < 30:
            report["steps"][f"calibrate/{label}"] = {"skipped": "time budget"}
            continue
        # a CPU dry run lifts the CPU's 256 MiB per-kernel cap (GPT-OSS-120B's LM head is 580 MB)
        cap = ("max_kernel_bytes=2GiB",) if a.device == "cpu" else ()
        cal = pipeline("calibrate", (*overrides, f"device={a.device}", *cap), out / "runs" / f"calibrate_{label}",
                       min(150, left()))
        step = {"calibrate": cal}
        if cal["rc"] == 0:
            table = out / "runs" / f"calibrate_{label}" / "calibration.json"
            dec = pipeline("decode", (*overrides, "compute=measured", f"calibration={table}"),
                           out / "runs" / f"decode_{label}", min(90, max(10, left())))
            step["decode_measured"] = dec
            if dec["rc"] != 0:
                failed.append(f"decode_measured/{label}")
        else:
            failed.append(f"calibrate/{label}")
        report["steps"][f"calibrate/{label}"] = step

    sys.path.insert(0, str(ROOT))
    import numpy as np

    from collectives.alltoallv import workloads
    from pipelines.hardware.cpu_testbed import schedule_json

    gpus = report["host"]["gpus"]
    replays = [("gloo_4_ranks", 4, "gloo")]
    if gpus >= 4:
        replays.append((f"nccl_{8 if gpus >= 8 else 4}_gpus", 8 if gpus >= 8 else 4, "nccl"))
    for label, n, backend in replays:
        if left() < 30:
            report["steps"][f"replay/{label}"] = {"skipped": "time budget"}
            continue
        demand = workloads.moe(n, 512, experts=64, top_k=8, hidden=4096, seed=1).astype(np.int64)
        sched = out / "runs" / f"schedule_{label}.json"
        sched.parent.mkdir(parents=True, exist_ok=True)
        sched.write_text(json.dumps(schedule_json("variopath", n // 4, demand)))
        r = pipeline("replay", (f"schedule={sched}", f"backend={backend}", "timeout=60s"), out / "runs" / f"replay_{label}",
                     min(150, left()))
        report["steps"][f"replay/{label}"] = r
        if r["rc"] != 0:
            failed.append(f"replay/{label}")

    report["wall_s"] = time.monotonic() - t_start
    report["failed"] = failed
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    md = markdown(report)
    (out / "gpu_check.md").write_text(md)
    print(md)
    return 1 if failed else 0


def hbm_bandwidth_Bps(accelerator: str) -> float:
    """The roofline's HBM bandwidth (datasheet), from conf/accelerator/<name>.yaml."""
    import yaml

    with open(ROOT / "conf" / "accelerator" / f"{accelerator}.yaml") as f:
        return float(yaml.safe_load(f)["hbm_bandwidth_Bps"])


def markdown(r: dict) -> str:
    h = r["host"]
    lines = [f"# gpu_check ({r['started']}, {r.get('wall_s', 0):.0f} s)", "",
             f"host: {h.get('gpu', 'no GPU')} x{h['gpus']}, torch {h['torch']}, CUDA {h['cuda']}", ""]
    if h.get("peaks"):
        pk = h["peaks"]
        lines += [f"measured peaks: bf16 GEMM 8192^3 {pk['bf16_gemm_8192_tflops']:.0f} TFLOP/s, "
                  f"device copy {pk['d2d_copy_bytes_per_s'] / 1e12:.2f} TB/s (read + write)", ""]
    for name, step in r["steps"].items():
        if not name.startswith("calibrate/") or "calibrate" not in step:
            continue
        cal = step["calibrate"]["results"]
        if not cal:
            lines += [f"## {name}: failed", "```", str(step["calibrate"].get("log_tail")), "```", ""]
            continue
        dec = (step.get("decode_measured") or {}).get("results") or {}
        lines += [f"## {name} ({cal['device'].get('name')}, {cal['dtype']}, roofline {cal['roofline_accelerator']})", "",
                  "| kernel | track | measured us | roofline us | measured / roofline | HBM MB | % of peak HBM BW | scaled |",
                  "|---|---|---|---|---|---|---|---|"]
        peak = hbm_bandwidth_Bps(cal["roofline_accelerator"])
        for k in cal["kernels"]:
            if k.get("reused_from") is not None:
                continue  # the same shapes measured for an earlier layer or track
            lines.append(f"| {k['name']} ({k['kernel']}) | {k['track']} | {k['measured_s'] * 1e6:.2f} | "
                         f"{k['roofline_s'] * 1e6:.3f} | {k['measured_over_roofline']:.2f} | "
                         f"{k['hbm_bytes'] / 1e6:.2f} | {100 * k['hbm_bytes'] / k['measured_s'] / peak:.1f} | "
                         f"{'x%.3g' % k['scale_factor'] if k['scaled'] else ''} |")
        lines += ["", f"compute per step (busiest track): measured {cal['measured_compute_s'] * 1e3:.3f} ms, "
                      f"roofline {cal['roofline_compute_s'] * 1e3:.3f} ms "
                      f"(x{cal['measured_over_roofline_step']:.2f})"]
        if dec:
            lines.append(f"decode step: measured {dec['decode_step_s'] * 1e3:.3f} ms, roofline "
                         f"{dec['roofline_decode_step_s'] * 1e3:.3f} ms")
        elif step.get("decode_measured"):
            lines.append(f"decode compute=measured failed: {str(step['decode_measured'].get('log_tail')).strip()}")
        lines.append("")
    for name, step in r["steps"].items():
        if name.startswith("replay/") and step.get("results"):
            res = step["results"]
            lines += [f"## {name}: verified={res['verified']}", "", "| plan | completion ms | algbw GB/s | busbw GB/s |",
                      "|---|---|---|---|"]
            lines += [f"| {p['name']} | {p['completion_s'] * 1e3:.3f} | {p['algbw_Bps'] / 1e9:.3f} | "
                      f"{p['busbw_Bps'] / 1e9:.3f} |" for p in res["plans"]]
            lines.append("")
    if r["failed"]:
        lines.append(f"FAILED: {', '.join(r['failed'])}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
