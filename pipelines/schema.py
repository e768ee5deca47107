"""Structured-config validation at entry (Hydra ConfigStore schemas, OmegaConf.to_object).

Each config group that users override has a dataclass schema; ``validate`` merges the composed
group node into its schema so an unknown key or a value of the wrong type fails before anything
runs, with OmegaConf's own message. Values that carry human units stay strings here and are
parsed at the edge by ``pipelines.units``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, List, Optional

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
    address: Optional[str] = "local"
    num_cpus: Optional[int] = None
    batch_size: Any = "auto"
    log_to_driver: bool = False
    colocate: List[str] = field(default_factory=list)


def mirror_spec(spec_cls: type, *, extra: tuple = ()) -> type:
    """A structured-config schema with the fields, types and defaults of a frozen spec dataclass
    (tuples become lists, which YAML gives), so the spec stays the one place a field is declared
    and the entry check can never lag behind it. ``extra``: (name, type, default) the YAML may
    carry beside the spec's fields (e.g. a description)."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(spec_cls)
    fields_ = []
    for f in dataclasses.fields(spec_cls):
        t = hints[f.name]
        if typing.get_origin(t) is tuple:
            t = List[typing.get_args(t)[0]]
        if f.default is dataclasses.MISSING:
            fields_.append((f.name, t))
        elif isinstance(f.default, tuple):
            fields_.append((f.name, t, field(default_factory=lambda d=f.default: list(d))))
        else:
            fields_.append((f.name, t, field(default=f.default)))
    fields_ += [(name, t, field(default=default)) for name, t, default in extra]
    return dataclasses.make_dataclass(f"{spec_cls.__name__.removesuffix('Spec')}Schema", fields_)


def _model_schema() -> type:
    from gxnet.models import ModelSpec

    return mirror_spec(ModelSpec, extra=(("description", Optional[str], None), ("source", Optional[str], None)))


ModelSchema = schema("model")(_model_schema())


@schema("accelerator")
@dataclass
class AcceleratorSchema:
    name: str
    peak_flops: float
    hbm_bytes: int
    hbm_bandwidth_Bps: float
    scaleup_ports: int
    port_rate_Bps: float
    kernel_launch_s: float
    in_graph_launch_s: float
    eta_memory: Any = None
    eta_compute: Any = None
    efficiency_basis: str = "step"
    peak_flops_note: Optional[str] = None


@schema("parallel")
@dataclass
class ParallelSchema:
    scheme: str = "helix"
    kvp: Optional[int] = None
    tpa: Optional[int] = None
    ep: Optional[int] = None
    tpe: Optional[int] = None
    tp: Optional[int] = None


@schema("precision")
@dataclass
class PrecisionSchema:
    name: str = "fp4"
    weights_bits: Optional[int] = None
    activations_bits: Optional[int] = None
    kv_bits: Optional[int] = None
    comm_bits: Optional[int] = None
    softmax_stat_bits: Optional[int] = None


@schema("network")
@dataclass
class NetworkSchema:
    name: str = "analytical"
    model: Optional[str] = None  # analytical: fabric (default) | single_level
    mode: Optional[str] = None  # simlette: optimized | flit
    buffer: Any = None  # simlette: unlimited | a size
    schedule: Optional[str] = None
    spray: Optional[str] = None
    phase_sync: Optional[str] = None
    write_responses: Optional[bool] = None
    ocs_folds: Any = None
    ocs_multiplicity: Any = None


@schema("fabric")
@dataclass
class FabricSchema:
    """Scale-up fabrics (conf/fabric/{single_eps,single_ocs,all_eps,hybrid,all_ocs}) and pcie."""

    name: str
    accelerators: Optional[int] = None
    ports: Optional[int] = None
    link_rate: Any = "400Gb/s"  # a rate with its unit
    switch_radix: Optional[int] = None
    latency_case: str = "nominal"
    ocs_pass_through: Any = None
    hop_latency: Any = None
    schedule: Optional[str] = None
    allocation: Optional[str] = None
    world: Optional[int] = None
    group_size: Optional[int] = None
    down_ports: Optional[int] = None
    up_ports: Optional[int] = None
    cable_latency: Any = None
    level2_cable_latency: Any = None
    switch_core: Any = None
    # fabric=pcie (issue #9)
    platform: Optional[str] = None
    nodes: Optional[int] = None
    scheduler: Optional[str] = None
    scheduler_params: Any = None
    activation_overhead: Any = None
    planning: Optional[str] = None
    planning_cost_per_activation: Any = None
    catalog_dir: Optional[str] = None
    validate: Optional[bool] = None


_VALID: set[tuple[str, str]] = set()  # (group, node as JSON) already checked in this process


def validate(pipeline: str, cfg: dict) -> None:
    """Raise OmegaConf's ValidationError/ConfigKeyError on unknown keys or wrong types."""
    from omegaconf import OmegaConf

    for group, cls in SCHEMAS.items():
        node = cfg.get(group)
        if isinstance(node, dict):
            # the points of a sweep share most group nodes: check each distinct node once
            key = (group, json.dumps(node, sort_keys=True, default=repr))
            if key not in _VALID:
                OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), node))
                _VALID.add(key)
    ray = cfg.get("ray")
    if isinstance(ray, dict):  # "auto" or an int: a union OmegaConf cannot type
        from pipelines.sweep import BatchSizer

        BatchSizer.parse(ray.get("batch_size", "auto"))
        from pipelines.ray_cluster import target_of

        target_of(ray.get("address"))
    sweep = cfg.get("sweep")
    if isinstance(sweep, dict):  # a dict in a pipeline's config; report's sweep= is a run id
        from pipelines.sweep import check_sweep_keys

        check_sweep_keys(sweep)
