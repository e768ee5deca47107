"""Measure every fused kernel of a deployment's decode step with torch -> calibration table.

For each track (distinct rank behaviour) and each kernel of ``calibration_shapes.kernel_shapes``
the kernel is built at its exact per-rank shapes and timed (``kernels.time_kernel``). A kernel
whose tensors exceed ``max_kernel_bytes`` is *scaled*: its growing dimension (context ``S`` for
flash-decode / KV append, active experts ``E_loc`` for the grouped expert GEMM) is halved until
it fits, measured there and at half that size, and the time is extrapolated linearly in the
kernel's HBM bytes (t = a + b * bytes through the two points, GXNET's own byte count at each
size); the entry says ``scaled: true`` with the factor and both points. Identical kernels
(same shapes, in any layer or track) are measured once; every entry keeps its own name, section
and repeat count, and ``reused_from`` names the entry whose timing it shares.

The table (``format: gxnet.calibration/1``) is plain JSON that ``gxnet.calibration`` reads.
"""

from __future__ import annotations

import platform as host_platform

from collectives.errors import SpecError
from gxnet.calibration import TABLE_FORMAT, deployment_key
from gxnet.deployment import Deployment
from pipelines.hardware.calibration_shapes import KernelShape, kernel_shapes, n_tracks
from pipelines.hardware.kernels import alloc_bytes, build_kernel, time_kernel

def device_info(torch, device) -> dict:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {"type": "cuda", "name": props.name, "memory_bytes": int(props.total_memory),
                "torch": torch.__version__, "cuda": torch.version.cuda}
    return {"type": "cpu", "name": host_platform.processor() or host_platform.machine(),
            "threads": torch.get_num_threads(), "torch": torch.__version__}


def _key(ks: KernelShape) -> tuple:
    # shapes, and the values of the symbols the kernel depends on (the expert GEMM's active experts
    # are a value, not a tensor shape); tracks differing only elsewhere share one measurement
    used = {s for op in ks.ops for s in op.symbols} | ({"T_exp"} if ks.depends_on("E_loc") else set())
    return (ks.kernel, tuple((k, v) for k, v in ks.values if k in used),
            tuple((op.op, tuple(t.shape for t in op.inputs + op.outputs)) for op in ks.ops))


def _scaled_point(torch, d: Deployment, ks: KernelShape, symbol: str, value: int, dtype, device, timing) -> dict:
    small = next(k for k in kernel_shapes(d, ks.track, **{symbol: value}) if k.name == ks.name and k.section == ks.section)
    fn, env = build_kernel(torch, small, dtype, device)
    t = time_kernel(torch, fn, device, **timing)
    del fn, env
    return {symbol: value, "hbm_bytes": small.hbm_bytes, "measured_s": t["median_s"], "method": t["method"]}


def _fit_value(torch, d, ks: KernelShape, symbol: str, dtype, cap: int) -> int | None:
    """Largest value of ``symbol`` (halving from the deployment's) at which the kernel fits ``cap``."""
    full = ks.value(symbol)
    floor = d.parallel.kvp * 2 if symbol == "S" else 2  # the half point must stay >= 1 token / expert per rank
    v = full
    while v >= floor:
        v //= 2
        small = next(k for k in kernel_shapes(d, ks.track, **{symbol: v}) if k.name == ks.name and k.section == ks.section)
        if alloc_bytes(torch, small, dtype) <= cap:
            return v
    return None


def kernel_identity(ks: KernelShape) -> dict:
    """What names a table entry and what gxnet predicts for it: everything but the timing."""
    return {"section": ks.section, "name": ks.name, "kernel": ks.kernel, "region": ks.region, "track": ks.track,
            "repeat": ks.repeat, "flops": ks.flops, "hbm_bytes": ks.hbm_bytes, "roofline_s": ks.roofline_s,
            "shapes": {op.node: {t.name: list(t.shape) for t in op.inputs + op.outputs} for op in ks.ops}}


def measure_kernel(torch, d: Deployment, ks: KernelShape, dtype, device, cap: int, timing: dict) -> dict:
    entry = kernel_identity(ks)
    need = alloc_bytes(torch, ks, dtype)
    entry["alloc_bytes"] = need
    if need <= cap:
        fn, env = build_kernel(torch, ks, dtype, device)
        t = time_kernel(torch, fn, device, **timing)
        del fn, env
        return {**entry, "measured_s": t["median_s"], "min_s": t["min_s"], "method": t["method"],
                "calls_per_sample": t["calls_per_sample"], "scaled": False, "scale_factor": 1.0}
    symbol = "S" if ks.depends_on("S") else "E_loc" if ks.depends_on("E_loc") else None
    v1 = _fit_value(torch, d, ks, symbol, dtype, cap) if symbol else None
    if v1 is None:
        raise SpecError(f"kernel {ks.name} ({ks.kernel}) needs {need} B > max_kernel_bytes={cap} and has no context "
                        f"or expert dimension to scale down; raise max_kernel_bytes (device memory permitting)")
    p1 = _scaled_point(torch, d, ks, symbol, v1, dtype, device, timing)
    p2 = _scaled_point(torch, d, ks, symbol, v1 // 2, dtype, device, timing)
    db = p1["hbm_bytes"] - p2["hbm_bytes"]
    slope = (p1["measured_s"] - p2["measured_s"]) / db if db > 0 else 0.0
    if slope > 0:
        t_full = p1["measured_s"] + slope * (ks.hbm_bytes - p1["hbm_bytes"])
        how = "linear in HBM bytes through two scaled points"
    else:  # timing noise made the smaller point slower: scale proportionally from the larger one
        t_full = p1["measured_s"] * ks.hbm_bytes / p1["hbm_bytes"]
        how = "proportional to HBM bytes from the larger scaled point (two-point slope was not positive)"
    return {**entry, "measured_s": t_full, "method": p1["method"], "scaled": True, "scaled_symbol": symbol,
            "scale_factor": v1 / ks.value(symbol), "scaled_points": [p1, p2], "extrapolation": how}


def calibrate(torch, d: Deployment, *, dtype, device, max_kernel_bytes: int, warmup: int, repeats: int,
              use_graphs: bool = True, log=print) -> dict:
    timing = {"warmup": warmup, "repeats": repeats, "use_graphs": use_graphs}
    entries, done = [], {}
    for track in range(n_tracks(d)):
        for ks in kernel_shapes(d, track):
            key = _key(ks)
            if key in done:  # the same shapes measured before (another layer or track): its timing, this name
                first = done[key]
                m = {**first, **kernel_identity(ks), "reused_from": {"name": first["name"], "track": first["track"]}}
            else:
                m = measure_kernel(torch, d, ks, dtype, device, max_kernel_bytes, timing)
                done[key] = m
            m["measured_over_roofline"] = m["measured_s"] / ks.roofline_s if ks.roofline_s > 0 else None
            entries.append(m)
            log(f"  track {track} {ks.name:<16} {ks.kernel:<15} measured {m['measured_s'] * 1e6:10.2f} us  "
                f"roofline {ks.roofline_s * 1e6:9.4f} us{'  (scaled x%.3g)' % m['scale_factor'] if m['scaled'] else ''}")
    return {
        "format": TABLE_FORMAT,
        "deployment": deployment_key(d),
        "device": device_info(torch, device),
        "dtype": str(dtype).replace("torch.", ""),
        "model_precision": d.precision.name,
        "timing": {"warmup": warmup, "repeats": repeats, "max_kernel_bytes": max_kernel_bytes,
                   "statistic": "median seconds per call"},
        "kernels": entries,
    }
