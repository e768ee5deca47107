"""Kernel durations on today's GPUs: measured efficiency, a per-kernel floor, engine profiles.

Paper 003's roofline (B.3, ``gxnet.passes.roofline``) stays the model of projected hardware
(RX00) and of every paper analysis. For existing GPUs, Appendix D.3 reports what it misses:
traced GPT-OSS-120B decode kernels on B200 reach 12-53 % of peak HBM bandwidth and take
1.4-5x their roofline, none under about 3 us. A kernel here lasts

    t = latency_s + max(D / (eta_D W), F / (eta_F P_q))

-- a fixed per-kernel latency (setup, ramp-up, tail) plus its bytes over an achievable HBM
bandwidth and its FLOPs over an achievable tensor-core rate at the deployment's operand
precision q. The bandwidth it reaches, D / t, saturates with size towards eta_D W; the
smallest kernel lasts ``latency_s`` (the kernel floor). ``latency_s``, ``eta_D`` and ``eta_F``
per precision are accelerator data fitted to the calibration set by ``pipelines.fit_kernels``.

An engine profile (``conf/engine/``) says how a step's fused kernels are launched:
``fusion="kernel"`` (CUDA-graph replay: the fusion pass's kernels, each paying the floor and
the graph's per-kernel gap), ``"op"`` (eager: every graph operator its own kernel, each paying
the floor and the host launch overhead) or ``"window"`` (persistent: one kernel per execution
window between collectives, paying floor and launch once per window).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from collectives.errors import SpecError
from gxnet.accelerators import AcceleratorSpec
from gxnet.precision import PrecisionSpec

FUSIONS = ("op", "kernel", "window")
# Accelerator fields an engine reads; references an engine YAML may use instead of a time.
_ACCELERATOR_TIMES = {"kernel_launch": "kernel_launch_s", "in_graph_launch": "in_graph_launch_s"}
# Tensor-core operand precisions, narrowest first: a format without its own tensor cores runs on
# the next wider one (Hopper has no FP4 MMA: FP4 weights are multiplied as FP8, W4A8).
_MMA_ORDER = ("fp4", "fp8", "bf16")


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSpec:
    name: str
    fusion: str  # op | kernel | window (see the module docstring)
    kernel_gap_s: float  # between two launched kernels (CUDA-graph gap, eager host launch)
    window_launch_s: float  # once per execution window (the launch of a persistent kernel)

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise SpecError(f"engine {self.name}: fusion={self.fusion!r}; choose one of {', '.join(FUSIONS)}")
        for f in ("kernel_gap_s", "window_launch_s"):
            v = getattr(self, f)
            if not (isinstance(v, (int, float)) and v >= 0):
                raise SpecError(f"engine {self.name}: {f}={v!r} must be seconds >= 0")


def _engine_time(name: str, key: str, value: Any, acc: AcceleratorSpec) -> float:
    if isinstance(value, str) and value in _ACCELERATOR_TIMES:
        return float(getattr(acc, _ACCELERATOR_TIMES[value]))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise SpecError(f"engine {name}: {key}={value!r} must be seconds or one of {', '.join(_ACCELERATOR_TIMES)} "
                    "(the accelerator's launch overheads)")


def engine_from_dict(d: Mapping[str, Any], acc: AcceleratorSpec) -> EngineSpec:
    """An ``EngineSpec`` from ``conf/engine/X.yaml`` (times already in seconds, or a reference to the
    accelerator's ``kernel_launch`` / ``in_graph_launch``)."""
    d = dict(d)
    name = str(d.get("name", "?"))
    unknown = sorted(set(d) - {"name", "fusion", "kernel_gap", "window_launch", "description"})
    if unknown:
        raise SpecError(f"engine {name}: unknown field(s) {', '.join(unknown)}; use fusion, kernel_gap, window_launch")
    return EngineSpec(name=name, fusion=str(d.get("fusion", "kernel")),
                      kernel_gap_s=_engine_time(name, "kernel_gap", d.get("kernel_gap", 0.0), acc),
                      window_launch_s=_engine_time(name, "window_launch", d.get("window_launch", 0.0), acc))


def mma_precision(precision: PrecisionSpec, acc: AcceleratorSpec) -> str:
    """Tensor-core operand format of the deployment's GEMMs: the weights' format (fp4/fp8/bf16 from
    the preset's bits; activations are quantized to it, as FP8 and NVFP4 serving does), or the
    next wider one this accelerator has a peak for."""
    bits = precision.weights_bits
    want = "fp4" if bits <= 4 else "fp8" if bits <= 8 else "bf16"
    for q in _MMA_ORDER[_MMA_ORDER.index(want):]:
        if getattr(acc, f"peak_flops_{q}") is not None and getattr(acc, f"gemm_efficiency_{q}") is not None:
            return q
    raise SpecError(f"accelerator {acc.name} has no tensor-core peak with a fitted gemm_efficiency for "
                    f"{want} or wider; add peak_flops_{want} and gemm_efficiency_{want} (pipelines.fit_kernels)")


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelModel:
    """Device duration of one kernel on one accelerator at one operand precision."""

    latency_s: float  # the kernel floor: a kernel with no work still lasts this long
    hbm_Bps: float  # achievable stream bandwidth, eta_D W
    flops_per_s: float  # achievable tensor-core rate, eta_F P_q
    precision: str  # q: fp4 | fp8 | bf16

    def work_s(self, flops: float, nbytes: float) -> float:
        return max(nbytes / self.hbm_Bps, flops / self.flops_per_s)

    def kernel_s(self, flops: float, nbytes: float) -> float:
        return self.latency_s + self.work_s(flops, nbytes)


def kernel_model(acc: AcceleratorSpec, precision: PrecisionSpec) -> KernelModel:
    """The fitted kernel model of ``acc``; a SpecError when the accelerator carries none (projected
    hardware such as RX00 keeps the paper's roofline: ``engine=roofline``)."""
    if acc.kernel_latency_s is None or acc.hbm_efficiency is None:
        raise SpecError(f"accelerator {acc.name} has no fitted kernel model (kernel_latency_s, hbm_efficiency); "
                        "use engine=roofline (paper 003, B.3) or fit one with python -m pipelines.fit_kernels")
    q = mma_precision(precision, acc)
    return KernelModel(latency_s=acc.kernel_latency_s, hbm_Bps=acc.hbm_efficiency * acc.hbm_bandwidth_Bps,
                       flops_per_s=getattr(acc, f"gemm_efficiency_{q}") * getattr(acc, f"peak_flops_{q}"),
                       precision=q)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineTiming:
    """An engine applied to a kernel model: what a plan's compute entries and windows cost."""

    engine: EngineSpec
    model: KernelModel

    @property
    def window_launch_s(self) -> float:
        return self.engine.window_launch_s

    @property
    def window_floor_s(self) -> float:
        """Floor paid once per execution window (persistent: the window is one kernel)."""
        return self.model.latency_s if self.engine.fusion == "window" else 0.0

    def entry_s(self, flops: float, nbytes: float, ops: int) -> tuple[float, float]:
        """(duration, floor part) of one fused kernel of ``ops`` graph operators. Eager launches
        every operator (their bytes and FLOPs add; decode kernels are memory-bound, so the sum of
        their work is the work of their sum)."""
        work = self.model.work_s(flops, nbytes)
        if self.engine.fusion == "window":
            return work, 0.0
        launched = ops if self.engine.fusion == "op" else 1
        floor = launched * (self.model.latency_s + self.engine.kernel_gap_s)
        return work + floor, floor


def engine_timing(engine: EngineSpec | None, acc: AcceleratorSpec, precision: PrecisionSpec) -> EngineTiming | None:
    """None on the paper's roofline path (no engine)."""
    return None if engine is None else EngineTiming(engine=engine, model=kernel_model(acc, precision))
