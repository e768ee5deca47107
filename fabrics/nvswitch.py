"""One NVLink/NVSwitch domain of GPUs, as plain data (built once at the config edge).

An HGX baseboard (8 x H100/H200/B200) or an NVL72 rack (72 x GB200/GB300) is one domain: every
GPU has ``nvlink_ports`` NVLinks of ``nvlink_rate_Bps`` per direction to the domain's NVSwitches,
so any two GPUs of the domain meet through one switch hop at the GPU's whole NVLink bandwidth;
``nvls`` says whether the switches can reduce in the switch (NVLink SHARP, NCCL's NVLS algorithm).
Multi-node GPU clusters are ``fabrics.spec.ClusterSpec(nodes=n, node=NvSwitchDomain, scale_out=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from collectives.errors import SpecError


def _whole(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SpecError(f"{name}={value!r} must be a whole number >= {low}")


@dataclass(frozen=True, slots=True, kw_only=True)
class NvSwitchDomain:
    """``gpus`` GPUs of one NVLink domain (``fabric=nvswitch``; one node of ``fabric=gpu_cluster``)."""

    name: str  # the accelerator (conf/accelerator/<name>.yaml)
    gpus: int  # GPUs in the domain (1 = a single GPU, no NVLink traffic)
    max_gpus: int  # the most GPUs the product's domain holds (8: HGX baseboard, 72: NVL72)
    nvlink_ports: int  # NVLinks per GPU
    nvlink_rate_Bps: float  # one NVLink, one direction
    nvls: bool = False  # in-switch reduction (NVLink SHARP)
    gpus_per_tray: int | None = None  # NVL72: 4 GPUs per compute tray

    def __post_init__(self) -> None:
        _whole("fabric.world", self.gpus, 1)
        _whole(f"accelerator {self.name}: nvlink_domain_max", self.max_gpus, 1)
        _whole(f"accelerator {self.name}: nvlink_ports", self.nvlink_ports, 1)
        if not self.nvlink_rate_Bps > 0:
            raise SpecError(f"accelerator {self.name}: nvlink_rate_Bps={self.nvlink_rate_Bps!r} must be positive")
        if self.gpus > self.max_gpus:
            raise SpecError(f"fabric.world={self.gpus} GPUs do not fit one NVLink domain of {self.name} "
                            f"(at most {self.max_gpus}); use fabric=gpu_cluster with nodes of <= {self.max_gpus}")
        if self.gpus_per_tray is not None:
            _whole(f"accelerator {self.name}: gpus_per_tray", self.gpus_per_tray, 1)

    @property
    def accelerators(self) -> int:
        return self.gpus

    @property
    def nvlink_bandwidth_Bps(self) -> float:
        """One GPU's whole NVLink bandwidth, one direction (H100: 18 x 25 GB/s = 450 GB/s)."""
        return self.nvlink_ports * self.nvlink_rate_Bps


__all__ = ["NvSwitchDomain"]
