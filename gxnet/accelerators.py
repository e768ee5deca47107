"""Accelerator specifications (paper 003, Table 11 and Appendix B.3) loaded from plain dicts.

An accelerator is data (``conf/accelerator/*.yaml``): peak FP4 throughput, HBM capacity and
bandwidth, scale-up ports, launch overheads and the size-dependent efficiency step functions
of B.3 (eta_D over bytes moved, eta_F over FLOPs). Values are plain numbers in SI base units
(bytes, bytes/s, FLOP/s, s); human units are parsed by the pipelines before they reach here.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Mapping

from collectives.errors import SpecError

EFFICIENCY_BASES = ("step", "kernel")


@dataclass(frozen=True, slots=True, kw_only=True)
class EfficiencySteps:
    """Step function: efficiency ``values[i]`` for sizes up to ``upper[i]``; ``values[-1]`` above."""

    upper: tuple[float, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.values) != len(self.upper) + 1:
            raise SpecError(
                f"efficiency steps need one more value than thresholds (got {len(self.values)} "
                f"values for {len(self.upper)} thresholds)")
        if list(self.upper) != sorted(self.upper):
            raise SpecError(f"efficiency thresholds {list(self.upper)} must be increasing")
        if any(not 0 < v <= 1 for v in self.values):
            raise SpecError(f"efficiencies {list(self.values)} must lie in (0, 1]")

    def __call__(self, size: float) -> float:
        # "eta = 0.3 for transfers *up to* 1 MB": a size equal to a threshold is in the lower step.
        return self.values[bisect_left(self.upper, size)]


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceleratorSpec:
    name: str
    peak_flops: float  # FP4 tensor-core peak, FLOP/s (Table 11)
    hbm_bytes: int
    hbm_bandwidth_Bps: float
    scaleup_ports: int
    port_rate_Bps: float  # per port, unidirectional
    kernel_launch_s: float
    in_graph_launch_s: float  # charged once per execution window (B.3)
    eta_memory: EfficiencySteps
    eta_compute: EfficiencySteps
    # Which size selects eta (see README.md, "attention time"): "step" = the kernel's bytes /
    # FLOPs summed over its repetitions in one decode step (a persistent kernel streaming every
    # layer), which reproduces the paper's 0.53 ms / 8.3 ms; "kernel" = one instance, literal B.3.
    efficiency_basis: str = "step"
    peak_flops_note: str = ""
    # Dense tensor-core peaks per operand precision, FLOP/s (datasheets; None: not given / no such
    # tensor cores). ``peak_flops`` above stays the roofline peak of the paper-003 analyses.
    peak_flops_bf16: float | None = None
    peak_flops_fp8: float | None = None
    peak_flops_fp4: float | None = None
    # NVLink: ports per GPU, rate of one port in one direction, the most GPUs one NVLink/NVSwitch
    # domain of this product holds (8: HGX baseboard, 72: NVL72 rack; 0: no NVLink), whether its
    # NVSwitches reduce in the switch (NVLS / SHARP), and GPUs per compute tray (NVL72: 4).
    nvlink_ports: int = 0
    nvlink_rate_Bps: float = 0.0
    nvlink_domain_max: int = 0
    nvls: bool = False
    gpus_per_tray: int | None = None
    # Power: board TDP of one GPU and the per-GPU share of its host (CPU, memory, NICs, fans,
    # PSU losses), W. None: not given (deployments then report no power with a note).
    board_power_W: float | None = None
    host_power_W: float | None = None
    # Measured kernel model of today's GPUs (gxnet.kernels; fitted by pipelines.fit_kernels to the
    # calibration set, None: not fitted -- projected hardware keeps the paper's roofline):
    # per-kernel latency (the kernel floor), achievable fraction of hbm_bandwidth_Bps for large
    # streams, and achievable fraction of each tensor-core peak for large GEMMs.
    kernel_latency_s: float | None = None
    hbm_efficiency: float | None = None
    gemm_efficiency_bf16: float | None = None
    gemm_efficiency_fp8: float | None = None
    gemm_efficiency_fp4: float | None = None

    def __post_init__(self) -> None:
        for f in ("peak_flops", "hbm_bytes", "hbm_bandwidth_Bps", "scaleup_ports", "port_rate_Bps"):
            if not getattr(self, f) > 0:
                raise SpecError(f"accelerator {self.name}: {f}={getattr(self, f)!r} must be positive")
        for f in ("kernel_launch_s", "in_graph_launch_s"):
            if getattr(self, f) < 0:
                raise SpecError(f"accelerator {self.name}: {f}={getattr(self, f)!r} must be >= 0")
        for f in ("peak_flops_bf16", "peak_flops_fp8", "peak_flops_fp4", "board_power_W", "host_power_W"):
            value = getattr(self, f)
            if value is not None and not value > 0:
                raise SpecError(f"accelerator {self.name}: {f}={value!r} must be positive (or absent)")
        if self.nvlink_ports < 0 or self.nvlink_rate_Bps < 0 or self.nvlink_domain_max < 0:
            raise SpecError(f"accelerator {self.name}: nvlink_ports, nvlink_rate_Bps and nvlink_domain_max "
                            "must be >= 0")
        if (self.nvlink_ports > 0) != (self.nvlink_rate_Bps > 0) or (self.nvlink_ports > 0) != (self.nvlink_domain_max > 0):
            raise SpecError(f"accelerator {self.name}: give nvlink_ports, nvlink_rate_Bps and nvlink_domain_max "
                            "together (all > 0 for an NVLink GPU, all 0 without NVLink)")
        if self.kernel_latency_s is not None and not self.kernel_latency_s >= 0:
            raise SpecError(f"accelerator {self.name}: kernel_latency_s={self.kernel_latency_s!r} must be >= 0")
        for f in ("hbm_efficiency", "gemm_efficiency_bf16", "gemm_efficiency_fp8", "gemm_efficiency_fp4"):
            value = getattr(self, f)
            if value is not None and not 0 < value <= 1:
                raise SpecError(f"accelerator {self.name}: {f}={value!r} must lie in (0, 1] (or be absent)")
        if self.efficiency_basis not in EFFICIENCY_BASES:
            raise SpecError(
                f"accelerator {self.name}: efficiency_basis={self.efficiency_basis!r}; choose one of "
                f"{', '.join(EFFICIENCY_BASES)}")

    @property
    def has_nvlink(self) -> bool:
        return self.nvlink_ports > 0

    def kernel_time_s(self, flops: float, bytes_moved: float, flops_basis: float | None = None,
                      bytes_basis: float | None = None) -> float:
        """Roofline of Eq. 9: max(F / (P eta_F), D / (W eta_D)); eta chosen on the basis sizes."""
        fb = flops if flops_basis is None else flops_basis
        db = bytes_moved if bytes_basis is None else bytes_basis
        t_f = flops / (self.peak_flops * self.eta_compute(fb)) if flops else 0.0
        t_d = bytes_moved / (self.hbm_bandwidth_Bps * self.eta_memory(db)) if bytes_moved else 0.0
        return max(t_f, t_d)


_NUM_FIELDS = {
    "peak_flops": float, "hbm_bytes": int, "hbm_bandwidth_Bps": float, "scaleup_ports": int,
    "port_rate_Bps": float, "kernel_launch_s": float, "in_graph_launch_s": float,
}
# Optional numbers (absent: the dataclass default).
_OPTIONAL_NUM_FIELDS = {
    "peak_flops_bf16": float, "peak_flops_fp8": float, "peak_flops_fp4": float,
    "nvlink_ports": int, "nvlink_rate_Bps": float, "nvlink_domain_max": int, "gpus_per_tray": int,
    "board_power_W": float, "host_power_W": float,
    "kernel_latency_s": float, "hbm_efficiency": float, "gemm_efficiency_bf16": float,
    "gemm_efficiency_fp8": float, "gemm_efficiency_fp4": float,
}


def accelerator_from_dict(d: Mapping[str, Any]) -> AcceleratorSpec:
    """Build an ``AcceleratorSpec`` from the content of ``conf/accelerator/X.yaml``."""
    d = dict(d)
    name = str(d.get("name", "?"))
    known = set(_NUM_FIELDS) | set(_OPTIONAL_NUM_FIELDS) | {
        "name", "eta_memory", "eta_compute", "efficiency_basis", "peak_flops_note", "nvls", "description",
        "source"}
    unknown = sorted(set(d) - known)
    if unknown:
        raise SpecError(f"accelerator {name}: unknown field(s) {', '.join(unknown)}")
    kwargs: dict[str, Any] = {"name": name}
    for f, typ in _NUM_FIELDS.items():
        if f not in d:
            raise SpecError(f"accelerator {name}: missing field {f}")
        try:
            kwargs[f] = typ(float(d[f]))
        except (TypeError, ValueError):
            raise SpecError(f"accelerator {name}: {f}={d[f]!r} must be a number in SI base units") from None
    for f, typ in _OPTIONAL_NUM_FIELDS.items():
        if d.get(f) is not None:
            try:
                kwargs[f] = typ(float(d[f]))
            except (TypeError, ValueError):
                raise SpecError(f"accelerator {name}: {f}={d[f]!r} must be a number in SI base units") from None
    if "nvls" in d:
        if not isinstance(d["nvls"], bool):
            raise SpecError(f"accelerator {name}: nvls={d['nvls']!r} must be true or false")
        kwargs["nvls"] = d["nvls"]
    for f in ("eta_memory", "eta_compute"):
        steps = d.get(f)
        if not isinstance(steps, Mapping) or "upper" not in steps or "values" not in steps:
            raise SpecError(f"accelerator {name}: {f} must be a mapping with 'upper' and 'values' lists")
        kwargs[f] = EfficiencySteps(upper=tuple(float(x) for x in steps["upper"]),
                                    values=tuple(float(x) for x in steps["values"]))
    if "efficiency_basis" in d:
        kwargs["efficiency_basis"] = str(d["efficiency_basis"])
    if "peak_flops_note" in d:
        kwargs["peak_flops_note"] = str(d["peak_flops_note"])
    return AcceleratorSpec(**kwargs)


def load_accelerator_file(path) -> AcceleratorSpec:
    """Test/tool helper: read one accelerator YAML file (PyYAML) and build its spec."""
    import yaml

    with open(path) as f:
        return accelerator_from_dict(yaml.safe_load(f))
