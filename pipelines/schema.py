"""Structured-config validation at entry (Hydra ConfigStore schemas, OmegaConf.to_object).

Each config group that users override has a dataclass schema; ``validate`` merges the composed
group node into its schema so an unknown key or a value of the wrong type fails before anything
runs, with OmegaConf's own message. Values that carry human units stay strings here and are
parsed at the edge by ``pipelines.units``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

SCHEMAS: dict[str, type] = {}


def schema(group: str):
    def deco(cls):
        SCHEMAS[group] = cls
        try:
            from hydra.core.config_store import ConfigStore

            ConfigStore.instance().store(group=group, name=f"{group}_schema", node=cls, provider="gxnet")
        except Exception:  # pragma: no cover - hydra is a dependency
            pass
        return cls

    return deco


@schema("tracking")
@dataclass
class TrackingSchema:
    enabled: bool = True
    uri: Optional[str] = None
    experiment: str = "gxnet"
    sweep_name: Optional[str] = None


@schema("ray")
@dataclass
class RaySchema:
    enabled: bool = True
    address: Optional[str] = None
    num_cpus: Optional[int] = None
    batch_size: Any = "auto"
    log_to_driver: bool = False


def validate(pipeline: str, cfg: dict) -> None:
    """Raise OmegaConf's ValidationError/ConfigKeyError on unknown keys or wrong types."""
    from omegaconf import OmegaConf

    for group, cls in SCHEMAS.items():
        node = cfg.get(group)
        if isinstance(node, dict):
            OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), node))
