"""Config → frozen specs, at the config edge (the only place human units are parsed).

Every function takes the composed Hydra config (a DictConfig or plain dict) and returns
validated frozen specs from the core rooms; invalid values raise ``SpecError``.
"""

from __future__ import annotations

from typing import Any

from collectives.errors import SpecError
from pipelines.units import KINDS, parse_bytes, parse_rate, parse_time


def plain(node: Any) -> Any:
    """A DictConfig/ListConfig as plain Python containers (resolved)."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        return node
    if isinstance(node, (DictConfig, ListConfig)):
        return OmegaConf.to_container(node, resolve=True)
    return node


def model_spec(cfg: Any):
    from gxnet.models import model_from_dict

    return model_from_dict(plain(cfg["model"]))


def accelerator_spec(cfg: Any):
    from gxnet.accelerators import accelerator_from_dict

    return accelerator_from_dict(plain(cfg["accelerator"]))


def positive_int(value: Any, what: str) -> int:
    """A count (``pipelines.units.KINDS['count']``: whole, >= 1, K/M/G suffixes allowed)."""
    return int(KINDS["count"].check(value, what))


def parallel_spec(cfg: Any):
    from gxnet.parallel import ParallelSpec

    par = dict(plain(cfg["parallel"]))
    known = {"scheme", "kvp", "tpa", "ep", "tpe", "tp"}
    unknown = sorted(set(par) - known)
    if unknown:
        raise SpecError(f"parallel.{unknown[0]} is not a parallelization option; use {', '.join(sorted(known))}")
    for key, val in list(par.items()):
        if key != "scheme" and val is not None:
            par[key] = positive_int(val, f"parallel.{key}")
    return ParallelSpec(**par)


def deployment_spec(cfg: Any, *, batch: int | None = None, parallel=None):
    from gxnet.deployment import Deployment

    kwargs = dict(
        model=model_spec(cfg),
        accelerator=accelerator_spec(cfg),
        world=positive_int(cfg["world"], "world"),
        parallel=parallel if parallel is not None else parallel_spec(cfg),
        batch=batch if batch is not None else positive_int(cfg["batch"], "batch"),
        context_tokens=positive_int(cfg["context"], "context"),
    )
    precision = cfg.get("precision") if hasattr(cfg, "get") else None
    if precision is not None:
        from gxnet.precision import precision_from_dict

        kwargs["precision"] = precision_from_dict(plain(precision))
    return Deployment(**kwargs)


def fabric_numbers(cfg: Any, accelerator) -> dict:
    """The fabric config with human units parsed: link_rate_Bps, hop_latency_s, ports."""
    fab = dict(plain(cfg["fabric"]))
    out = dict(fab)
    out["link_rate_Bps"] = parse_rate(fab.get("link_rate", "400Gb/s"), "fabric.link_rate")
    if fab.get("hop_latency") is not None:
        out["hop_latency_s"] = parse_time(fab["hop_latency"], "fabric.hop_latency")
    ports = fab.get("ports")
    out["ports"] = positive_int(ports, "fabric.ports") if ports is not None else accelerator.scaleup_ports
    return out


__all__ = [
    "plain", "model_spec", "accelerator_spec", "parallel_spec", "deployment_spec",
    "fabric_numbers", "positive_int", "parse_bytes",
]
