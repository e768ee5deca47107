"""Network model construction from config (``network=analytical|simlette``)."""

from __future__ import annotations

from typing import Any

from collectives.errors import SpecError
from pipelines.specs import fabric_numbers, plain


def build_network(cfg: Any, accelerator, world: int):
    """The configured network model for ``cfg.fabric`` (ready for ``prepare``)."""
    # --- fabric=pcie (issue #9): flow-level PCIe model, built in pipelines/prefill.py ---------
    if dict(plain(cfg["fabric"])).get("name") == "pcie":
        from pipelines.prefill import pcie_network_from_cfg

        return pcie_network_from_cfg(cfg, world)
    # ------------------------------------------------------------------------------------------
    net = dict(plain(cfg["network"]))
    kind = net.get("name", "analytical")
    fab = fabric_numbers(cfg, accelerator)
    if kind == "analytical":
        from fabrics.analytical import AnalyticalSingleLevel, SingleLevelParams

        if fab.get("hop_latency_s") is None:
            raise SpecError("fabric.hop_latency is not set; give e.g. fabric.hop_latency=0.81us")
        return AnalyticalSingleLevel(
            SingleLevelParams(hop_latency_s=fab["hop_latency_s"], link_rate_Bps=fab["link_rate_Bps"], ports=fab["ports"])
        )
    raise SpecError(f"network={kind!r} is not available; choose one of: analytical")
