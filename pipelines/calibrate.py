"""``python -m pipelines.calibrate``: time every fused decode kernel with torch on this machine.

Builds each kernel of the deployment's decode step (``pipelines.hardware.calibration_shapes``) at
its exact per-rank shapes, times it on the device (CUDA: events + CUDA-graph replay; CPU:
perf_counter loops), scales down and extrapolates kernels that do not fit, and writes
``calibration.json`` (the table ``python -m pipelines.decode compute=measured
calibration=<path>`` uses).

results.json keys: ``device`` (type, name, torch version), ``dtype``, ``model_precision``,
``deployment``, ``kernels`` (per track and kernel: ``measured_s``, ``roofline_s``,
``measured_over_roofline``, ``scaled``, ``scale_factor``), ``measured_compute_s`` /
``roofline_compute_s`` (sum over one step of the busiest track: kernels x repetitions),
``calibration_path``. Artifact: ``calibration.json``.
"""

from __future__ import annotations

from pathlib import Path

from collectives.errors import SpecError
from pipelines.app import gx_main
from pipelines.specs import deployment_spec, positive_int
from pipelines.units import parse_bytes

DTYPES = ("bfloat16", "float16", "float32")


def check_choices(cfg) -> None:
    """Reject bad device/dtype strings before importing torch (seconds on a busy machine)."""
    import re

    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", str(cfg.device)):
        raise SpecError(f"device={cfg.device!r} is not supported; use auto, cpu, cuda or cuda:N")
    if str(cfg.dtype) not in ("auto", *DTYPES):
        raise SpecError(f"dtype={cfg.dtype!r} is not supported; use auto or one of {', '.join(DTYPES)} "
                        f"(FP4/FP8 GEMMs have no portable torch kernel)")


def device_of(torch, value: str):
    value = str(value)
    if value == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(value)
    except RuntimeError:
        raise SpecError(f"device={value!r} is not a torch device; use auto, cpu, cuda or cuda:N") from None
    if dev.type not in ("cpu", "cuda"):
        raise SpecError(f"device={value!r} is not supported; use auto, cpu, cuda or cuda:N")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SpecError(f"device={value!r} but torch sees no CUDA GPU (torch {torch.__version__}); use device=cpu")
    return dev


def dtype_of(torch, value: str, device):
    value = str(value)
    if value == "auto":
        # CPU GEMMs in bf16 are emulated on most CPUs (slower than fp32); GPUs run bf16 natively
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if value not in DTYPES:
        raise SpecError(f"dtype={value!r} is not supported; use auto or one of {', '.join(DTYPES)} "
                        f"(FP4/FP8 GEMMs have no portable torch kernel)")
    return getattr(torch, value)


def kernel_cap(torch, value, device) -> int:
    if str(value) != "auto":
        return parse_bytes(value, "max_kernel_bytes")
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free // 4)
    return 256 * 2 ** 20


def precision_note(dep, dtype, torch) -> str:
    """Say when the kernels move other element widths than the roofline counts (FP4 has no torch kernel)."""
    bits = torch.finfo(dtype).bits
    p = dep.precision
    if (p.weights_bits, p.kv_bits, p.activations_bits) == (bits, bits, bits):
        return ""
    return (f"model precision {p.name} (weights {p.weights_bits} / KV {p.kv_bits} / activations {p.activations_bits} "
            f"bits) measured in {str(dtype).replace('torch.', '')} ({bits} bits): torch has no portable FP4/FP8 kernels, "
            f"so memory-bound kernels move up to {bits // min(p.weights_bits, p.kv_bits)}x the roofline's bytes; "
            f"set precision.weights_bits/kv_bits/activations_bits={bits} for a like-for-like roofline")


def summarize(table: dict) -> dict:
    """Per-step compute time of the busiest track, measured and roofline (kernels x repeats)."""
    busiest = [k for k in table["kernels"] if k["track"] == 0]
    return {"measured_compute_s": sum(k["measured_s"] * k["repeat"] for k in busiest),
            "roofline_compute_s": sum(k["roofline_s"] * k["repeat"] for k in busiest),
            "scaled_kernels": sorted({k["name"] for k in table["kernels"] if k["scaled"]})}


def task(cfg):
    check_choices(cfg)
    dep = deployment_spec(cfg)
    import torch

    device = device_of(torch, cfg.device)
    dtype = dtype_of(torch, cfg.dtype, device)
    cap = kernel_cap(torch, cfg.max_kernel_bytes, device)
    warmup = positive_int(cfg.warmup, "warmup")
    repeats = positive_int(cfg.repeats, "repeats")
    if device.type == "cpu":
        torch.set_num_threads(positive_int(cfg.threads, "threads"))
    elif device.index is not None:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    from pipelines.hardware.calibrate_kernels import calibrate

    print(f"calibrating {dep.describe()} on {device} in {str(dtype).replace('torch.', '')}")
    table = calibrate(torch, dep, dtype=dtype, device=device, max_kernel_bytes=cap, warmup=warmup,
                      repeats=repeats, use_graphs=bool(cfg.cuda_graphs))
    from hydra.core.hydra_config import HydraConfig

    out = Path(HydraConfig.get().runtime.output_dir).resolve()
    s = summarize(table)
    res = {
        "device": table["device"],
        "dtype": table["dtype"],
        "model_precision": table["model_precision"],
        "precision_note": precision_note(dep, dtype, torch),
        "deployment": table["deployment"],
        "roofline_accelerator": dep.accelerator.name,
        **s,
        "measured_over_roofline_step": s["measured_compute_s"] / s["roofline_compute_s"] if s["roofline_compute_s"] else None,
        "kernels": [{k: e.get(k) for k in ("section", "name", "kernel", "track", "repeat", "measured_s", "roofline_s",
                                            "measured_over_roofline", "flops", "hbm_bytes", "scaled", "scale_factor", "reused_from")}
                    for e in table["kernels"]],
        "calibration_path": str(out / "calibration.json"),
    }
    print(f"compute per step (busiest track): measured {s['measured_compute_s'] * 1e3:.3f} ms, roofline "
          f"({dep.accelerator.name}) {s['roofline_compute_s'] * 1e3:.3f} ms; wrote {res['calibration_path']}")
    return res, {"calibration.json": table}


main = gx_main("calibrate")(task)

if __name__ == "__main__":
    main()
