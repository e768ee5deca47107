"""Structured-config validation at entry (dataclass schemas, OmegaConf.to_object, field kinds).

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
    """Register ``cls`` as the schema of a config group. Not stored in Hydra's ConfigStore: a
    stored node would show up as an option of the group (``fabric=fabric_schema``)."""
    def deco(cls):
        SCHEMAS[group] = cls
        return cls

    return deco


@schema("tracking")
@dataclass
class TrackingSchema:
    enabled: bool = True
    uri: Optional[str] = None
    experiment: str = "gxnet"
    sweep_name: Optional[str] = None
    report: bool = True  # attach the report's table and figures to a sweep's parent run
    sqlite_wal: bool = True  # a local SQLite store logs in WAL mode (pipelines/sqlite_journal.py)
    sqlite_direct: bool = True  # logging writes a local SQLite store without importing MLflow (pipelines/mlflow_direct.py)
    max_child_runs: int = 2000  # a child run per point up to this many points (docs/sweeps.md)
    top_k: int = 20  # above it: the table on the parent run and the top_k best points as children
    top_k_by: Optional[str] = None  # the metric that ranks them (null: the pipeline's first main metric)


@schema("ray")
@dataclass
class RaySchema:
    enabled: bool = True
    address: Optional[str] = "local"
    num_cpus: Optional[int] = None
    batch_size: Any = "auto"
    log_to_driver: bool = False
    colocate: List[str] = field(default_factory=list)
    affinity: List[str] = field(default_factory=list)


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
    peak_flops_bf16: Optional[float] = None
    peak_flops_fp8: Optional[float] = None
    peak_flops_fp4: Optional[float] = None
    nvlink_ports: int = 0
    nvlink_rate_Bps: float = 0.0
    nvlink_domain_max: int = 0
    nvls: bool = False
    gpus_per_tray: Optional[int] = None
    board_power_W: Optional[float] = None
    host_power_W: Optional[float] = None
    kernel_latency_s: Optional[float] = None
    hbm_efficiency: Optional[float] = None
    gemm_efficiency_bf16: Optional[float] = None
    gemm_efficiency_fp8: Optional[float] = None
    gemm_efficiency_fp4: Optional[float] = None


@schema("engine")
@dataclass
class EngineSchema:
    """conf/engine/*.yaml (gxnet.kernels.EngineSpec): auto | roofline | cuda_graph | eager | persistent."""

    name: str = "auto"
    fusion: Optional[str] = None  # op | kernel | window
    kernel_gap: Any = None  # a time, or kernel_launch | in_graph_launch (the accelerator's)
    window_launch: Any = None


@schema("parallel")
@dataclass
class ParallelSchema:
    scheme: str = "helix"
    kvp: Optional[int] = None
    tpa: Optional[int] = None
    ep: Optional[int] = None
    tpe: Optional[int] = None
    tp: Optional[int] = None
    dpa: Optional[int] = None


@schema("precision")
@dataclass
class PrecisionSchema:
    name: str = "fp4"
    weights_bits: Optional[int] = None
    activations_bits: Optional[int] = None
    kv_bits: Optional[int] = None
    comm_bits: Optional[int] = None
    softmax_stat_bits: Optional[int] = None
    weights_scale_bits: Optional[int] = None
    scale_block: Optional[int] = None


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
    algorithm: Optional[str] = None  # nccl: auto | ring | tree | nvls | nvls_tree | collnet_* (NCCL_ALGO)
    protocol: Optional[str] = None  # nccl: auto | ll | ll128 | simple (NCCL_PROTO)
    generations: Any = None  # nccl: fitted parameters per system generation (pipelines.nccl_params)
    collnet: Any = None  # nccl: CollNet / SHARP constants per generation (pipelines.nccl_params.collnet_spec)
    nccl_version: Any = None  # nccl: the NCCL release priced (a key of versions; default the newest measured)
    versions: Any = None  # nccl: what each NCCL release does differently (conf/network/nccl.yaml)
    cuda_graph: Any = None  # nccl: auto | true | false (auto: true where engine resolves to cuda_graph)


@schema("fabric")
@dataclass
class FabricSchema:
    """Scale-up fabrics (conf/fabric/{single_eps,single_ocs,all_eps,hybrid,all_ocs}), pcie and the GPU
    fabrics (nvswitch, gpu_cluster)."""

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
    # fabric=nvswitch | gpu_cluster (NVLink domains; scale-out NICs on a rail-optimised leaf-spine)
    gpus_per_node: Optional[int] = None
    nics_per_node: Optional[int] = None
    nic_rate: Any = None
    nodes_per_leaf: Optional[int] = None
    oversubscription: Optional[float] = None
    nic_latency: Any = None
    spine_latency: Any = None
    sharp: Optional[bool] = None  # gpu_cluster: the scale-out switches reduce (InfiniBand SHARP)


# Which kind of number each numeric config field is (pipelines.units.KINDS has the rule of each
# kind). A path names a field of the composed config; list elements share their list's path
# (``meshes.payloads`` is every payload of every mesh). Fields absent from a pipeline's config
# are skipped; null means "the default" and is never checked. Any other number anywhere in the
# config must still be finite (``check_numbers``).
_COUNT = (
    "world", "batch", "context", "requests", "prompt_tokens", "ep", "nodes", "ports", "multiplicity",
    "group_size", "repeats", "iterations", "threads", "threads_per_rank", "points.ep", "points.nodes",
    "predict.nodes",
    "model.layers", "model.hidden", "model.q_heads", "model.kv_heads", "model.head_dim", "model.experts",
    "model.expert_width", "model.top_k", "model.vocab",
    "accelerator.scaleup_ports", "accelerator.nvlink_ports", "accelerator.nvlink_domain_max",
    "accelerator.gpus_per_tray", "parallel.kvp", "parallel.tpa", "parallel.ep", "parallel.tpe", "parallel.tp",
    "precision.weights_bits", "precision.activations_bits", "precision.kv_bits", "precision.comm_bits",
    "precision.softmax_stat_bits",
    "fabric.accelerators", "fabric.ports", "fabric.switch_radix", "fabric.world", "fabric.group_size",
    "fabric.down_ports", "fabric.up_ports", "fabric.nodes", "fabric.gpus_per_node", "fabric.nodes_per_leaf",
    "network.ocs_multiplicity", "topology.n", "topology.ranks", "topology.dims", "topology.blocks",
    "platform.gpus_per_node", "platform.network.nodes_per_leaf",
    "workload.tokens_per_rank", "workload.experts", "workload.top_k", "workload.hidden", "workload.dtype_bytes",
    "scheduler.n_start", "scheduler.aa_sweeps", "scheduler.shape_beam", "scheduler.reuse",
    "scheduler.synth_min_groups", "scheduler.max_aa_rows", "scheduler.max_quanta", "scheduler.max_nodes",
    "scheduler.max_families_per_shape", "scheduler.max_shapes", "scheduler.max_ranks", "scheduler.max_iterations",
    "ray.num_cpus",
)
_INDEX = (
    "warmup", "fault.rank", "fault.plan", "fault.iteration", "fault.activation", "model.window_tokens",
    "workload.seed", "scheduler.seed", "routing.seed", "topology.offsets", "fabric.nics_per_node",
    # (fold masks, topology.folds and network.ocs_folds, are bit strings like 0b1111: their parser checks them)
)
_SIZE = ("size", "meshes.payloads", "max_kernel_bytes", "accelerator.hbm_bytes", "workload.bytes_per_rank",
         "network.buffer")
_RATE = ("link_rate", "fabric.link_rate", "fabric.nic_rate", "accelerator.hbm_bandwidth_Bps", "accelerator.port_rate_Bps",
         "accelerator.peak_flops", "accelerator.peak_flops_bf16", "accelerator.peak_flops_fp8",
         "accelerator.peak_flops_fp4", "accelerator.nvlink_rate_Bps", "platform.pcie_rate", "platform.nic_rate", "platform.gpu_link_rate")
_TIME = ("hop_latency", "activation_overhead", "predict.activation_overhead", "fabric.hop_latency",
         "fabric.ocs_pass_through", "fabric.cable_latency", "fabric.level2_cable_latency", "fabric.switch_core",
         "fabric.activation_overhead", "fabric.planning_cost_per_activation", "fabric.nic_latency",
         "fabric.spine_latency",
         "accelerator.kernel_launch_s", "accelerator.in_graph_launch_s", "accelerator.kernel_latency_s",
         "engine.kernel_gap", "engine.window_launch")
_TIMEOUT = ("timeout", "startup_timeout", "scheduler.time_limit_s")
_FRACTION = ("search.within", "scheduler.reuse_floor", "scheduler.gap_tolerance", "accelerator.eta_memory.values",
             "accelerator.eta_compute.values", "accelerator.hbm_efficiency", "accelerator.gemm_efficiency_bf16",
             "accelerator.gemm_efficiency_fp8", "accelerator.gemm_efficiency_fp4")
_POSITIVE = ("accelerator.board_power_W", "accelerator.host_power_W",
             "platform.network.oversubscription", "fabric.oversubscription", "routing.zipf_s", "routing.capacity_factor",
             "accelerator.eta_memory.upper", "accelerator.eta_compute.upper", "scheduler.k_target_per_rank")
_NONNEGATIVE = ("workload.skew", "scheduler.rank_pressure", "scheduler.pair_pressure",
                "scheduler.coarse_rounds_per_rank")

FIELD_KINDS: dict[str, str] = {
    path: kind
    for kind, paths in (("count", _COUNT), ("index", _INDEX), ("size_bytes", _SIZE), ("rate_Bps", _RATE),
                        ("time_s", _TIME), ("timeout_s", _TIMEOUT), ("fraction", _FRACTION),
                        ("positive", _POSITIVE), ("nonnegative", _NONNEGATIVE))
    for path in paths
}
# words a numeric field also takes (the config's comments say what each means)
FIELD_WORDS: dict[str, frozenset] = {
    "max_kernel_bytes": frozenset({"auto"}), "predict.nodes": frozenset({"auto"}),
    "network.buffer": frozenset({"unlimited"}),
    "engine.kernel_gap": frozenset({"kernel_launch", "in_graph_launch"}),
    "engine.window_launch": frozenset({"kernel_launch", "in_graph_launch"}),
}


def _leaves(node: Any, path: str = ""):
    """(path, value) of every scalar under ``node``; list elements share the list's path."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, (list, tuple)):
        for value in node:
            yield from _leaves(value, path)
    else:
        yield path, node


def check_numbers(cfg: dict) -> None:
    """The one numeric rule of the config edge: every field of ``FIELD_KINDS`` holds a number of
    its kind, and every other number is finite. Raises SpecError naming field, value and rule."""
    import math

    from collectives.errors import SpecError
    from pipelines.units import KINDS

    for path, value in _leaves({k: v for k, v in cfg.items() if k != "hydra"}):
        if value is None:
            continue
        kind = FIELD_KINDS.get(path)
        if kind is None:
            if isinstance(value, float) and not math.isfinite(value):
                raise SpecError(f"{path}={value!r} is not a finite number; give a finite value")
            continue
        if isinstance(value, str) and value in FIELD_WORDS.get(path, ()):
            continue
        if kind == "size_bytes" and isinstance(value, str) and ".." in value:  # a range LO..HI[*F]
            lo, hi = value.split("..", 1)
            for end in (lo, hi.split("*", 1)[0]):
                KINDS[kind].check(end.strip(), path)
            continue
        KINDS[kind].check(value, path)


_VALID: set[tuple[str, str]] = set()  # (group, node as JSON) already checked in this process


def validate(pipeline: str, cfg: dict) -> None:
    """Raise OmegaConf's ValidationError/ConfigKeyError on unknown keys or wrong types, and
    SpecError on a number outside its field's kind (``check_numbers``)."""
    from omegaconf import OmegaConf

    for group, cls in SCHEMAS.items():
        node = cfg.get(group)
        if group == "model" and isinstance(node, dict) and (node.get("config") is not None or node.get("name") == "hf"):
            continue  # an imported config.json: its fields come from the file (pipelines.hf_config)
        if isinstance(node, dict):
            # the points of a sweep share most group nodes: check each distinct node once
            key = (group, json.dumps(node, sort_keys=True, default=repr))
            if key not in _VALID:
                OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), node))
                _VALID.add(key)
    check_numbers(cfg)
    if isinstance(cfg.get("fabric"), dict) and isinstance(cfg.get("network"), dict):
        from pipelines.network import check_network_supported

        check_network_supported(cfg)  # network=analytical on fabric=pcie: refused at entry, sweeps included
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
