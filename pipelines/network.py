"""Network model construction from config (``network=analytical|simlette``).

``network=analytical`` on a scale-up fabric (``fabric=single_eps|single_ocs|all_eps|hybrid|all_ocs``)
builds ``fabrics.analytical.FabricAnalytical`` on the physical fabric of ``conf/fabric/<name>.yaml``
(paper 003, Section 5.4): native schedules on EPS, planned circuits and schedules on OCS.
``network.model=single_level`` keeps the earlier single-level Hockney model (λ = fabric.hop_latency).
"""

from __future__ import annotations

from typing import Any

from collectives.errors import SpecError
from pipelines.specs import fabric_numbers, plain
from pipelines.units import parse_bytes, parse_rate, parse_time


def build_network(cfg: Any, accelerator, world: int):
    """The configured network model for ``cfg.fabric`` (ready for ``prepare``)."""
    # --- fabric=pcie (issue #9): flow-level PCIe model, built in pipelines/prefill.py ---------
    if dict(plain(cfg["fabric"])).get("name") == "pcie":
        from pipelines.prefill import pcie_network_from_cfg

        return pcie_network_from_cfg(cfg, world)
    # ------------------------------------------------------------------------------------------
    net = dict(plain(cfg["network"]))
    kind = net.get("name", "analytical")
    if kind == "analytical":
        if net.get("model", "fabric") == "single_level":
            return single_level_network(cfg, accelerator)
        return fabric_network(cfg, accelerator, world)
    if kind == "simlette":
        return simlette_network(cfg, accelerator, world)
    raise SpecError(f"network={kind!r} is not available; choose one of: analytical, simlette")


def single_level_network(cfg: Any, accelerator):
    from fabrics.analytical import AnalyticalSingleLevel, SingleLevelParams

    fab = fabric_numbers(cfg, accelerator)
    if fab.get("hop_latency_s") is None:
        raise SpecError("fabric.hop_latency is not set; give e.g. fabric.hop_latency=0.81us")
    return AnalyticalSingleLevel(
        SingleLevelParams(hop_latency_s=fab["hop_latency_s"], link_rate_Bps=fab["link_rate_Bps"], ports=fab["ports"])
    )


# --- scale-up fabrics (issue #4): physical fabric + fabric-aware analytical model ------------

# Keys of conf/fabric/*.yaml read by the network model or the pipelines, not by the physical fabric.
FABRIC_MODEL_KEYS = ("world", "group_size", "schedule", "allocation")


def fabric_dict(cfg: Any, accelerator) -> dict:
    """``cfg.fabric`` with every human unit parsed (the physical fabric's keys only)."""
    from fabrics.physical import FABRIC_UNIT_KEYS

    fab = fabric_numbers(cfg, accelerator)
    d = {k: v for k, v in fab.items() if k not in FABRIC_MODEL_KEYS}
    parsers = {"rate": parse_rate, "time": parse_time}
    for key, (unit, suffix) in FABRIC_UNIT_KEYS.items():
        if key + suffix in d and d[key + suffix] is not None:
            d.pop(key, None)
            continue
        if isinstance(d.get(key), str):
            d[key] = parsers[unit](d[key], f"fabric.{key}")
    return d


def physical_fabric(cfg: Any, accelerator, world: int):
    """The ``PhysicalFabric`` of ``cfg.fabric`` for a deployment of ``world`` ranks."""
    from fabrics.physical import fabric_from_dict

    return fabric_from_dict(fabric_dict(cfg, accelerator), world=world)


def fabric_network(cfg: Any, accelerator, world: int):
    """``FabricAnalytical`` on the configured fabric; ``fabric.schedule`` (auto | a schedule name)
    forces a schedule, ``fabric.allocation`` the OCS planner's allocation, ``fabric.hop_latency``
    the planner's λ on OCS fabrics (default: one OCS hop of Table 9, 0.52 µs)."""
    from fabrics.analytical import FabricAnalytical

    raw = dict(plain(cfg["fabric"]))
    fabric = physical_fabric(cfg, accelerator, world)
    lam = raw.get("hop_latency")
    planner_lam = None
    if lam is not None and fabric.spec.level1_kind == "ocs":
        planner_lam = parse_time(lam, "fabric.hop_latency")
    return FabricAnalytical(fabric, schedule=str(raw.get("schedule") or "auto"), planner_hop_latency_s=planner_lam,
                            allocation=str(raw.get("allocation") or "shared_host"))


def accelerator_power_W(cfg: Any, accelerator) -> float | None:
    """Per-accelerator power incl. host share (Table 12): ``accelerator_power`` in the config, else
    the table's figure for the accelerator's name; None when neither exists."""
    from fabrics.power import ACCELERATOR_W

    given = cfg.get("accelerator_power") if hasattr(cfg, "get") else None
    if given is not None:
        try:
            value = float(given)
        except (TypeError, ValueError):
            raise SpecError(f"accelerator_power={given!r} must be a number of watts (RX00: 2631)") from None
        if not value > 0:
            raise SpecError(f"accelerator_power={value} must be positive watts (RX00: 2631)")
        return value
    return ACCELERATOR_W.get(str(accelerator.name).upper())


def fabric_power(cfg: Any, accelerator, world: int) -> dict | None:
    """System power of the configured fabric (Table 12 column from ``fabric.link_rate``):
    ``system_power_W`` and ``power_breakdown_W``; None for fabrics without a power model."""
    from fabrics.physical import FABRIC_KINDS
    from fabrics.power import power_breakdown

    raw = dict(plain(cfg["fabric"]))
    if raw.get("name", raw.get("kind")) not in FABRIC_KINDS:
        return None
    watts = accelerator_power_W(cfg, accelerator)
    if watts is None:
        return None
    fabric = physical_fabric(cfg, accelerator, world)
    try:
        pb = power_breakdown(fabric, watts)
    except SpecError as exc:  # a link rate without a Table 12 column: timing is still valid
        return {"system_power_W": None, "accelerator_power_W": watts, "power_breakdown_W": None,
                "power_note": str(exc)}
    return {"system_power_W": pb.total_W, "accelerator_power_W": watts, "power_breakdown_W": pb.as_dict()}


# --- network=simlette (README.md, "how to wire") ---------------------------------------

def simlette_network(cfg: Any, accelerator, world: int, topology=None):
    from fabrics.simlette import simlette_from_config

    net = dict(plain(cfg["network"]))
    forced = dict(plain(cfg["fabric"])).get("schedule")  # schedule=<name> lands in cfg.fabric
    if not net.get("schedule") and forced not in (None, "auto"):
        net["schedule"] = forced
    buf = net.get("buffer", "unlimited")
    net["buffer_bytes"] = None if buf in (None, "unlimited") else parse_bytes(buf, "network.buffer")
    fab = fabric_dict(cfg, accelerator)
    # Simlette names the latency overrides by their seconds fields
    for key, name in (("switch_core", "switch_core_s"), ("ocs_pass_through", "ocs_pass_through_s"),
                      ("cable_latency", "cable_s"), ("level2_cable_latency", "level2_cable_s")):
        if fab.get(key) is not None:
            fab[name] = fab.pop(key)
    return simlette_from_config(fab, net, world=world, topology=topology)
