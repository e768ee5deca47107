"""Fabric and network config -> typed specs -> a network model (the one place this happens).

``cluster_spec(cfg, accelerator, world)`` turns ``cfg.fabric`` (and, for ``fabric=pcie``, the
``platform`` group, ``nodes`` and ``scheduler``) into a frozen ``fabrics.spec.ClusterSpec``:
human units parsed once, one set of defaults, unknown keys and keys of the other fabric family
refused with one line. ``network_spec(cfg)`` does the same for ``cfg.network``. ``build_network``
hands both to the registry of network models (``fabrics.network.registry``), which refuses a
model on a fabric it does not declare (``network=analytical`` on ``fabric=pcie``, say).

The fabric's defaults live here and in ``conf/fabric/*.yaml`` only; the core rooms accept specs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from collectives.errors import SpecError
from pipelines.specs import GPU_FABRICS, plain, positive_int
from pipelines.units import parse_bytes, parse_rate, parse_time

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"

# --- scale-up fabrics -----------------------------------------------------------------------------

SCALEUP_KEYS = {
    "name": "fabric kind: single_eps | single_ocs | all_eps | hybrid | all_ocs (alias: kind)",
    "accelerators": "accelerators in the system (null: = world); 576 for Appendix C.7",
    "ports": "L, ports per accelerator (null: the accelerator's scale-up ports)",
    "link_rate": "R per port and direction, e.g. 400Gb/s",
    "switch_radix": "ports per switching chip (72); null for a single level means one device per rail",
    "down_ports": "level-1 ports towards accelerators = rack size (32)",
    "up_ports": "level-1 ports towards level 2 (8 for 4:1; 32 for non-blocking all-OCS)",
    "latency_case": "Table 9 attribution: low | nominal | high",
    "switch_core": "time, overrides the case's switch core latency",
    "ocs_pass_through": "time (10ns)",
    "cable_latency": "time, accelerator-level-1 cable (10ns)",
    "level2_cable_latency": "time, level-1-level-2 fiber (10ns)",
    "hop_latency": "time: λ of the single-level model; on OCS fabrics the planner's λ",
    "schedule": "auto or a schedule name forced on every call",
    "allocation": "OCS planner allocation (shared_host)",
}
# time keys and the LatencyBudget field each sets
SCALEUP_LATENCY_KEYS = {"switch_core": "switch_core_s", "ocs_pass_through": "ocs_pass_through_s",
                        "cable_latency": "cable_s", "level2_cable_latency": "level2_cable_s"}
PCIE_KEYS = {
    "name": "pcie",
    "platform": "conf/platform/<name>.yaml (the top-level platform group wins)",
    "nodes": "PCIe servers joined by the leaf-spine network (the top-level nodes wins)",
    "scheduler": "AlltoAllv scheduler (the top-level scheduler group wins)",
    "scheduler_params": "the scheduler's parameters",
    "activation_overhead": "time λ per activation",
    "planning": "per_activation | measured | none",
    "planning_cost_per_activation": "time per emitted activation (20.6us)",
    "catalog_dir": "VarioPath catalog cache directory (null: off)",
    "validate": "validity-check every AlltoAllv schedule before timing it",
}
# GPU systems: one NVLink/NVSwitch domain (nvswitch) or several joined by NICs (gpu_cluster)
NVSWITCH_KEYS = {
    "name": "nvswitch | gpu_cluster",
    "world": "GPUs in the NVLink domain (null: the pipeline's world; 1 = a single GPU)",
    "hop_latency": "time: λ of one NVSwitch hop for the ideal models (network=analytical)",
}
GPU_CLUSTER_KEYS = {
    **NVSWITCH_KEYS,
    "world": "ranks the collective pipeline spans (null: nodes x gpus_per_node)",
    "gpus_per_node": "GPUs per NVLink domain (null: the accelerator's nvlink_domain_max)",
    "nodes": "NVLink domains (null: world / gpus_per_node)",
    "nics_per_node": "NICs per node (8), 0 only for nodes=1",
    "nic_rate": "rate of one NIC port, one direction, e.g. 400Gb/s",
    "nodes_per_leaf": "nodes on one leaf switch per rail (rail-optimised leaf-spine)",
    "oversubscription": "leaf down : up capacity (1 = non-blocking)",
    "nic_latency": "time: one NIC-to-NIC transfer through one leaf, ideal models",
    "spine_latency": "time added when a transfer goes leaf -> spine -> leaf, ideal models",
    "sharp": "true: the leaf/spine switches reduce in the network (InfiniBand SHARP; network=nccl CollNet)",
}
# keys of the fabric group that pipelines read (the collective pipeline's ranks), in every family
PIPELINE_KEYS = ("world", "group_size")


def _number_or_unit(value: Any, parser, what: str) -> float:
    if isinstance(value, bool):
        raise SpecError(f"{what}={value!r} must be a number or a value with a unit")
    if isinstance(value, (int, float)):
        return float(value)
    return parser(value, what)


def _as_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise SpecError(f"fabric.{name}={value!r} must be an integer")
    return int(value)


def _family_keys(fab: Mapping[str, Any], kind: str, allowed: Mapping[str, str], other: Mapping[str, str]) -> None:
    unknown = sorted(set(fab) - set(allowed) - set(PIPELINE_KEYS) - {"kind"})
    if not unknown:
        return
    key = unknown[0]
    if key in other:
        owner = "fabric=gpu_cluster" if kind == "nvswitch" and key in GPU_CLUSTER_KEYS else "the other fabric family"
        raise SpecError(f"fabric.{key} belongs to {owner}, not to fabric={kind}; "
                        f"{kind} takes: {', '.join(allowed)}")
    raise SpecError(f"unknown fabric key fabric.{key} for fabric={kind}; known keys: {', '.join(allowed)}")


def _canonical(d: Mapping[str, Any]) -> dict:
    """Hydra's private keys dropped, ``kind`` as an alias of ``name``, parsed duplicates
    (``link_rate_Bps``, ``switch_core_s``, ...; numbers in the unit of the suffix) folded in."""
    d = {k: v for k, v in dict(d).items() if not str(k).startswith("_")}
    if "name" not in d and "kind" in d:
        d["name"] = d["kind"]
    d.pop("kind", None)
    for key in ("link_rate", "hop_latency", *SCALEUP_LATENCY_KEYS):
        suffix = "_Bps" if key == "link_rate" else "_s"
        if key + suffix in d:
            value = d.pop(key + suffix)
            if value is not None:
                d[key] = value
    for seconds_name, key in (("cable_s", "cable_latency"), ("level2_cable_s", "level2_cable_latency")):
        if seconds_name in d:  # the LatencyBudget field names, accepted as the same keys
            value = d.pop(seconds_name)
            if value is not None:
                d[key] = value
    return d


def fabric_spec_from_dict(d: Mapping[str, Any], *, world: int, default_ports: int | None = None):
    """``fabrics.scaleup.physical.FabricSpec`` of a scale-up fabric from its config mapping.

    ``world`` is the number of ranks the deployment uses; the fabric may be larger (512 of 576).
    Rates and times are numbers (bytes/s, seconds) or strings with units (``400Gb/s``, ``10ns``).
    """
    from fabrics.scaleup.latency import LatencyBudget
    from fabrics.scaleup.physical import FABRIC_KINDS, FABRICS, FabricSpec

    d = _canonical(d)
    kind = d.get("name")
    if kind is None:
        raise SpecError(f"fabric.name is missing; choose one of: {', '.join(FABRIC_KINDS)}")
    kind = FABRICS.get(str(kind))
    _family_keys(d, kind, SCALEUP_KEYS, {**PCIE_KEYS, **GPU_CLUSTER_KEYS})
    ports = d.get("ports") if d.get("ports") is not None else default_ports
    if ports is None:
        raise SpecError("fabric.ports is not set and the accelerator names no scale-up ports; give e.g. fabric.ports=36")
    if d.get("link_rate") is None:
        raise SpecError("fabric.link_rate is required (e.g. fabric.link_rate=400Gb/s)")
    latency_kw = {"case": str(d.get("latency_case") or "nominal")}
    for key, field_name in SCALEUP_LATENCY_KEYS.items():
        if d.get(key) is not None:
            latency_kw[field_name] = _number_or_unit(d[key], parse_time, f"fabric.{key}")
    levels = FABRIC_KINDS[kind][0]
    radix = d.get("switch_radix", None if levels == 1 else 72)
    up = d.get("up_ports")
    accelerators = d.get("accelerators")
    spec = FabricSpec(
        kind=kind,
        accelerators=_as_int("accelerators", world if accelerators is None else accelerators),
        ports=_as_int("ports", ports),
        link_rate_Bps=_number_or_unit(d["link_rate"], parse_rate, "fabric.link_rate"),
        switch_radix=None if radix is None else _as_int("switch_radix", radix),
        down_ports=_as_int("down_ports", d.get("down_ports") or 32),
        up_ports=_as_int("up_ports", up if up is not None else (32 if kind == "all_ocs" else 8)),
        latency=LatencyBudget(**latency_kw),
    )
    if isinstance(world, bool) or not isinstance(world, int) or world < 1 or world > spec.accelerators:
        raise SpecError(f"world={world} ranks do not fit fabric.accelerators={spec.accelerators}; "
                        "raise fabric.accelerators or lower world")
    return spec


def scaleup_options(d: Mapping[str, Any], kind: str):
    from fabrics.scaleup.physical import FABRIC_KINDS, OCS
    from fabrics.spec import ScaleUpOptions

    d = _canonical(d)
    lam = d.get("hop_latency")
    lam_s = None if lam is None else _number_or_unit(lam, parse_time, "fabric.hop_latency")
    return ScaleUpOptions(schedule=str(d.get("schedule") or "auto"), allocation=str(d.get("allocation") or "shared_host"),
                          planner_hop_latency_s=lam_s if FABRIC_KINDS[kind][1] == OCS else None,
                          hop_latency_s=lam_s)


def fabric_from_dict(d: Mapping[str, Any], *, world: int):
    """The ``PhysicalFabric`` of a scale-up fabric config mapping."""
    from fabrics.scaleup.physical import build_fabric

    return build_fabric(fabric_spec_from_dict(d, world=world))


# --- PCIe servers --------------------------------------------------------------------------------

def platform_dict(cfg: Any) -> dict:
    """The platform mapping: the top-level ``platform`` group, else ``fabric.platform`` by name."""
    top = config_get(cfg, "platform")
    if isinstance(top, str) or top is None:
        name = top or plain(cfg["fabric"]).get("platform") or "r5080_bf3"
        path = CONF_DIR / "platform" / f"{name}.yaml"
        if not path.exists():
            raise SpecError(f"platform={name!r} is not in conf/platform/; choose one of: "
                            f"{', '.join(sorted(p.stem for p in path.parent.glob('*.yaml')))}")
        import yaml

        return yaml.safe_load(path.read_text())
    return dict(plain(top))


def pcie_server_spec(cfg: Mapping[str, Any]):
    """A platform mapping (conf/platform/*.yaml) -> validated ``PcieServer``; one line per error."""
    from fabrics.pcie.platform import PcieLink, PcieServer

    if not isinstance(cfg, Mapping):
        raise SpecError(f"platform must be a mapping, got {type(cfg).__name__}")
    name = str(cfg.get("name", "platform"))
    for key in ("gpus_per_node", "pcie_rate", "nic_rate", "vertices", "gpus"):
        if key not in cfg:
            raise SpecError(f"platform {name}: missing key {key!r} (see conf/platform/fig1.yaml for the format)")

    def rate(value, what: str) -> float:
        return _number_or_unit(value, parse_rate, what)

    pcie = rate(cfg["pcie_rate"], f"platform {name} pcie_rate")
    n = _platform_int(cfg["gpus_per_node"], f"platform {name} gpus_per_node")
    gpu_vertex = _gpu_vertices(name, dict(cfg["gpus"]), n)
    nics = {}
    for nic, spec in dict(cfg.get("nics") or {}).items():
        if isinstance(spec, Mapping):
            nics[str(nic)] = (str(spec["at"]), rate(spec.get("link_rate", cfg["pcie_rate"]), f"nic {nic} link_rate"))
        else:
            nics[str(nic)] = (str(spec), pcie)
    links = []
    for item in cfg.get("links") or []:
        if isinstance(item, Mapping):
            a, b, r = item["a"], item["b"], item.get("rate", cfg["pcie_rate"])
        else:
            if len(item) not in (2, 3):
                raise SpecError(f"platform {name}: link {item!r} must be [a, b] or [a, b, rate]")
            a, b, r = item[0], item[1], (item[2] if len(item) == 3 else cfg["pcie_rate"])
        links.append(PcieLink(a=str(a), b=str(b), rate_Bps=rate(r, f"link {a}-{b} rate")))
    net = dict(cfg.get("network") or {})
    gpu_rate = cfg.get("gpu_link_rate", cfg["pcie_rate"])
    overrides: tuple = ()
    if isinstance(gpu_rate, (list, tuple)):
        if len(gpu_rate) != n:
            raise SpecError(f"platform {name}: gpu_link_rate lists {len(gpu_rate)} rates for {n} GPUs; "
                            "give one per GPU or one for all")
        overrides = tuple(rate(r, f"gpu_link_rate[{k}]") for k, r in enumerate(gpu_rate))
        gpu_rate = cfg["pcie_rate"]
    return PcieServer(name=name, gpus_per_node=n, gpu_link_Bps=rate(gpu_rate, "gpu_link_rate"),
                      gpu_link_overrides=overrides, nic_rate_Bps=rate(cfg["nic_rate"], f"platform {name} nic_rate"),
                      vertices={str(k): str(v) for k, v in dict(cfg["vertices"]).items()},
                      gpu_vertex=tuple(gpu_vertex), nics=nics, links=tuple(links),
                      nodes_per_leaf=_platform_int(net.get("nodes_per_leaf", 8), f"platform {name} network.nodes_per_leaf"),
                      oversubscription=float(net.get("oversubscription", 1.0)))


def _platform_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise SpecError(f"{what}={value!r} must be a whole number")
    return int(value)


def _gpu_vertices(name: str, gpus: dict, n: int) -> list[str]:
    gpu_vertex: list[str | None] = [None] * max(n, 0)
    for vertex, ids in gpus.items():
        for k in ids:
            if not 0 <= int(k) < n:
                raise SpecError(f"platform {name}: GPU {k} under {vertex} is outside 0..{n - 1} (gpus_per_node={n})")
            if gpu_vertex[int(k)] is not None:
                raise SpecError(f"platform {name}: GPU {k} is listed under two vertices")
            gpu_vertex[int(k)] = str(vertex)
    missing = [k for k, v in enumerate(gpu_vertex) if v is None]
    if missing:
        raise SpecError(f"platform {name}: GPUs {missing} are not attached to any vertex under 'gpus'")
    return gpu_vertex


def pcie_cluster(platform: Mapping[str, Any], nodes: int):
    """A platform mapping and a node count -> ``PcieCluster`` (what planners and evaluators take)."""
    from fabrics.pcie.platform import PcieCluster

    if isinstance(nodes, bool) or not isinstance(nodes, int):
        raise SpecError(f"nodes={nodes!r} must be a whole number >= 1")
    return PcieCluster(server=pcie_server_spec(platform), nodes=nodes)


def scheduler_choice(cfg: Any, name: str | None = None) -> tuple[str, dict]:
    """(scheduler name, its parameters): the ``scheduler`` group (conf/scheduler/<name>.yaml),
    a plain name, or ``fabric.scheduler``; ``name`` picks another scheduler's own config file."""
    fab = dict(plain(cfg["fabric"]))
    chosen = plain(config_get(cfg, "scheduler", fab.get("scheduler", "variopath")))
    if isinstance(chosen, dict):
        params = dict(chosen)
        chosen = str(params.pop("name"))
    else:
        chosen, params = str(chosen), dict(fab.get("scheduler_params") or {})
    if name is None or name == chosen:
        return chosen, params
    path = CONF_DIR / "scheduler" / f"{name}.yaml"
    if not path.exists():
        return str(name), {}
    import yaml

    params = dict(yaml.safe_load(path.read_text()) or {})
    params.pop("name", None)
    return str(name), params


def pcie_nccl_generation(accelerator: str | None):
    """The NCCL-like parameters of the PCIe nccl baseline: the generation of conf/network/nccl.yaml
    listing ``accelerator`` if it has PCIe transport rows, else its ``pcie_server`` generation."""
    from pipelines.nccl_params import nccl_spec

    spec = nccl_spec({})
    for gen in spec.generations:
        if accelerator in gen.accelerators and "shm" in gen.efficiency:
            return gen
    return next(g for g in spec.generations if g.name == "pcie_server")


def pcie_options(cfg: Any, scheduler: str | None = None, accelerator: str | None = None):
    from fabrics.network.pcie import PcieNetworkParams
    from pipelines.catalog_cache import catalog_source

    fab = dict(plain(cfg["fabric"]))
    sched, sparams = scheduler_choice(cfg, scheduler)
    return PcieNetworkParams(
        nccl=pcie_nccl_generation(accelerator),
        scheduler=str(sched), scheduler_params=sparams,
        activation_overhead_s=_number_or_unit(fab.get("activation_overhead", 0), parse_time, "fabric.activation_overhead"),
        planning=str(fab.get("planning", "per_activation")),
        planning_cost_per_activation_s=_number_or_unit(fab.get("planning_cost_per_activation", "20.6us"), parse_time,
                                                       "fabric.planning_cost_per_activation"),
        catalog_dir=fab.get("catalog_dir"), catalogs=catalog_source(fab.get("catalog_dir")),
        validate=bool(fab.get("validate", True)))


# --- the cluster, the network and the model -------------------------------------------------------

def config_get(cfg: Any, key: str, default=None):
    """``cfg[key]``, or ``default`` when missing or null (DictConfig or plain dict)."""
    try:
        v = cfg.get(key, default) if hasattr(cfg, "get") else default
    except Exception:  # pragma: no cover - omegaconf missing-value errors
        return default
    return default if v is None else v


def fabric_name(cfg: Any) -> str:
    fab = dict(plain(cfg["fabric"]))
    return str(fab.get("name", fab.get("kind")))


def cluster_spec(cfg: Any, accelerator, world: int, *, scheduler: str | None = None, nodes: int | None = None):
    """The configured fabric as a ``ClusterSpec`` for a deployment of ``world`` ranks."""
    from fabrics.spec import ClusterSpec, ScaleOutSpec

    fab = dict(plain(cfg["fabric"]))
    if fabric_name(cfg) == "pcie":
        _family_keys(_canonical(fab), "pcie", PCIE_KEYS, {**SCALEUP_KEYS, **GPU_CLUSTER_KEYS})
        n_nodes = nodes if nodes is not None else positive_int(config_get(cfg, "nodes", fab.get("nodes", 1)), "nodes")
        server = pcie_server_spec(platform_dict(cfg))
        scale_out = ScaleOutSpec(nics_per_node=len(server.nics), nic_rate_Bps=server.nic_rate_Bps,
                                 nodes_per_leaf=server.nodes_per_leaf, oversubscription=server.oversubscription)
        cluster = ClusterSpec(name="pcie", nodes=n_nodes, node=server, scale_out=scale_out,
                              options=pcie_options(cfg, scheduler, getattr(accelerator, "name", None)))
        if world > cluster.accelerators:
            per = server.gpus_per_node
            raise SpecError(f"{world} ranks need {world} GPUs but {n_nodes} {server.name} node(s) have "
                            f"{cluster.accelerators}; set nodes={-(-world // per)}")
        return cluster
    if fabric_name(cfg) in GPU_FABRICS:
        return gpu_cluster_spec(fab, accelerator, world)
    spec = fabric_spec_from_dict(fab, world=world, default_ports=getattr(accelerator, "scaleup_ports", None))
    return ClusterSpec(name=spec.kind, nodes=1, node=spec, options=scaleup_options(fab, spec.kind))


# --- GPU systems: NVSwitch domains, joined by a rail-optimised NIC network -------------------------

def nvlink_accelerators() -> list[str]:
    """conf/accelerator/ entries with NVLink (what fabric=nvswitch | gpu_cluster can hold)."""
    import yaml

    names = []
    for path in sorted((CONF_DIR / "accelerator").glob("*.yaml")):
        if (yaml.safe_load(path.read_text()) or {}).get("nvlink_ports"):
            names.append(path.stem)
    return names


def _nvswitch_domain(kind: str, accelerator, gpus: int):
    from fabrics.nvswitch import NvSwitchDomain

    if accelerator is None or not getattr(accelerator, "has_nvlink", False):
        name = getattr(accelerator, "name", None)
        raise SpecError(f"fabric={kind} needs an NVLink GPU but accelerator={name} has no NVLink "
                        f"(nvlink_ports=0); choose accelerator={' | '.join(nvlink_accelerators())}, "
                        "or fabric=pcie for PCIe GPUs")
    if gpus > accelerator.nvlink_domain_max:
        most = accelerator.nvlink_domain_max
        hint = (f"use fabric=gpu_cluster ({-(-gpus // most)} NVLink domains of {most} joined by NICs)"
                if kind == "nvswitch" else "lower fabric.gpus_per_node")
        raise SpecError(f"{gpus} GPUs do not fit one NVLink domain of {accelerator.name} (at most "
                        f"{accelerator.nvlink_domain_max}, accelerator.nvlink_domain_max); {hint}")
    # the NVLink ports and rate are the accelerator's (conf/accelerator/<name>.yaml), never a fabric default
    return NvSwitchDomain(name=str(accelerator.name), gpus=gpus, max_gpus=accelerator.nvlink_domain_max,
                          nvlink_ports=accelerator.nvlink_ports, nvlink_rate_Bps=accelerator.nvlink_rate_Bps,
                          nvls=bool(accelerator.nvls), gpus_per_tray=accelerator.gpus_per_tray)


def gpu_fabric_world(fab: Mapping[str, Any], accelerator) -> int:
    """The GPUs a collective on a GPU fabric spans when ``fabric.world`` is null: the whole NVLink
    domain (``fabric=nvswitch``; 8 on HGX, 72 on NVL72) or every GPU of ``fabric.nodes``."""
    d = _canonical(fab)
    kind = str(d["name"])
    if d.get("world") is not None:
        return _as_int("world", d["world"])
    domain = _nvswitch_domain(kind, accelerator, 1)  # refuses a GPU without NVLink
    if kind == "nvswitch":
        return domain.max_gpus
    nodes = _optional_count(d, "nodes")
    if nodes is None:
        raise SpecError("fabric=gpu_cluster needs its size here: give fabric.nodes (e.g. fabric.nodes=2) "
                        "or fabric.world")
    return nodes * (_optional_count(d, "gpus_per_node") or domain.max_gpus)


def _time_key(d: Mapping[str, Any], key: str, default: str) -> float:
    value = d.get(key)
    return _number_or_unit(default if value is None else value, parse_time, f"fabric.{key}")


def _gpu_options(d: Mapping[str, Any]):
    from fabrics.gpu_cluster import GpuFabricOptions

    return GpuFabricOptions(hop_latency_s=_time_key(d, "hop_latency", "0.81us"),
                            nic_latency_s=_time_key(d, "nic_latency", "2us"),
                            spine_latency_s=_time_key(d, "spine_latency", "1us"),
                            sharp=_sharp(d.get("sharp")))


def _sharp(value: Any) -> bool:
    """``fabric.sharp`` (gpu_cluster only; nvswitch refuses the key): true / false, default false."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise SpecError(f"fabric.sharp={value!r} must be true or false (true: the scale-out switches reduce, "
                        "InfiniBand SHARP)")
    return value


def _optional_count(d: Mapping[str, Any], key: str, low: int = 1) -> int | None:
    value = d.get(key)
    if value is None:
        return None
    n = _as_int(key, value)
    if n < low:
        raise SpecError(f"fabric.{key}={n} must be a whole number >= {low}")
    return n


def gpu_cluster_spec(fab: Mapping[str, Any], accelerator, world: int):
    """``fabric=nvswitch | gpu_cluster`` -> ``ClusterSpec`` (family gpu) for ``world`` ranks."""
    from fabrics.spec import ClusterSpec

    d = _canonical(fab)
    kind = str(d["name"])
    if kind == "nvswitch":
        _family_keys(d, kind, NVSWITCH_KEYS, {**GPU_CLUSTER_KEYS, **SCALEUP_KEYS, **PCIE_KEYS})
        gpus = _optional_count(d, "world") or world
        if world > gpus:
            raise SpecError(f"world={world} ranks do not fit fabric.world={gpus} GPUs of fabric=nvswitch; "
                            "raise fabric.world or lower world")
        domain = _nvswitch_domain(kind, accelerator, gpus)
        return ClusterSpec(name=kind, nodes=1, node=domain, scale_out=None, options=_gpu_options(d))
    _family_keys(d, kind, GPU_CLUSTER_KEYS, {**SCALEUP_KEYS, **PCIE_KEYS})
    if accelerator is not None and not getattr(accelerator, "has_nvlink", False):
        _nvswitch_domain(kind, accelerator, 1)  # the one-line refusal of a GPU without NVLink
    per_node = _optional_count(d, "gpus_per_node") or getattr(accelerator, "nvlink_domain_max", 0) or 1
    nodes = _optional_count(d, "nodes")
    if world % per_node:
        fits = max(k for k in range(1, per_node + 1) if world % k == 0)
        raise SpecError(f"world={world} does not fill whole nodes of fabric.gpus_per_node={per_node} GPUs; "
                        f"use world={max(per_node, world - world % per_node)} (a multiple of {per_node}), "
                        f"fabric.gpus_per_node={fits}, or fabric=nvswitch for one node")
    if nodes is None:
        nodes = world // per_node
    if world > nodes * per_node:
        raise SpecError(f"world={world} GPUs need {world // per_node} nodes of {per_node} but fabric.nodes={nodes}; "
                        f"set fabric.nodes={world // per_node}")
    return ClusterSpec(name=kind, nodes=nodes, node=_nvswitch_domain(kind, accelerator, per_node),
                       scale_out=_rail_network(d), options=_gpu_options(d))


def _rail_network(d: Mapping[str, Any]):
    from fabrics.spec import ScaleOutSpec

    nics = d.get("nics_per_node")
    return ScaleOutSpec(
        topology="rail_optimized", nics_per_node=8 if nics is None else _as_int("nics_per_node", nics),
        nic_rate_Bps=_number_or_unit(d.get("nic_rate") or "400Gb/s", parse_rate, "fabric.nic_rate"),
        nodes_per_leaf=_optional_count(d, "nodes_per_leaf") or 32,
        oversubscription=_ratio(d.get("oversubscription"), "fabric.oversubscription"))


def _ratio(value: Any, what: str) -> float:
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"{what}={value!r} must be a number >= 1 (leaf down : up capacity; 1 = non-blocking)")
    return float(value)


def network_name(cfg: Any) -> str:
    """The network model that runs: ``cfg.network.name``, with ``auto`` resolved to the fabric
    family's default (analytical on the scale-up fabrics, flow on PCIe)."""
    net = dict(plain(config_get(cfg, "network", {"name": "auto"})))
    name = str(net.get("name") or "auto")
    if name == "auto":
        fabric = fabric_name(cfg)
        if fabric in GPU_FABRICS:
            return _gpu_default_network()
        return "flow" if fabric == "pcie" else "analytical"
    return name


def _gpu_default_network() -> str:
    """nccl on GPU fabrics; the ideal analytical model in a build without the nccl model."""
    from fabrics.network.registry import NETWORK_MODELS

    return "nccl" if "nccl" in NETWORK_MODELS.names() else "analytical"


def fabric_family(name: str) -> str:
    """The family a fabric option belongs to (``fabrics.spec.FAMILIES``)."""
    if name == "pcie":
        return "pcie"
    return "gpu" if name in GPU_FABRICS else "scaleup"


def check_network_supported(cfg: Any) -> None:
    """Refuse, before anything runs, a network model on a fabric family it does not declare, and
    a GPU fabric its accelerator or world cannot make (a GPU without NVLink, more GPUs than a
    domain holds, a world that does not fill whole nodes): sweeps check every point here."""
    from fabrics.network.registry import check_family

    fabric = fabric_name(cfg)
    check_family(network_name(cfg), fabric, fabric_family(fabric))
    if fabric in GPU_FABRICS:
        check_gpu_pairing(cfg)


def check_gpu_pairing(cfg: Any) -> None:
    """``fabric=nvswitch | gpu_cluster`` with the configured accelerator and world (decode's
    ``world``, else the collective pipeline's fabric.world / whole fabric), as the run builds it."""
    from gxnet.accelerators import accelerator_from_dict

    acc = plain(config_get(cfg, "accelerator"))
    if not isinstance(acc, Mapping):
        return  # no accelerator group (gx collective without accelerator=): the pipeline says so
    accelerator = accelerator_from_dict(acc)
    fab = dict(plain(cfg["fabric"]))
    world = config_get(cfg, "world")
    world = gpu_fabric_world(fab, accelerator) if world is None else positive_int(world, "world")
    cluster_spec(cfg, accelerator, world)


def network_spec(cfg: Any):
    """(registry name, typed spec) of ``cfg.network``."""
    from fabrics.network.registry import AnalyticalSpec, FlowSpec

    net = dict(plain(config_get(cfg, "network", {"name": "auto"})))
    name = network_name(cfg)
    if name == "analytical":
        return name, AnalyticalSpec(model=str(net.get("model") or "fabric"))
    if name == "flow":
        return name, FlowSpec()
    if name == "simlette":
        return name, simlette_spec(net)
    if name == "nccl":
        return name, _nccl_spec(nccl_with_graph_flag(cfg, net))
    from fabrics.network.registry import NETWORK_MODELS

    raise SpecError(f"network={name!r} is not available; choose one of: {', '.join(NETWORK_MODELS.names())}")


def nccl_with_graph_flag(cfg: Any, net: Mapping[str, Any]) -> dict:
    """``net`` with ``cuda_graph`` a plain boolean: ``auto`` is true where the engine that runs is
    ``cuda_graph`` (pipelines.specs.engine_name; gx collective has no engine: graph off, as nccl-tests)."""
    from pipelines.specs import engine_name

    net = dict(net)
    flag = net.get("cuda_graph")
    if flag is None or str(flag).lower() == "auto":
        net["cuda_graph"] = engine_name(cfg) == "cuda_graph"
    return net


def _nccl_spec(net: Mapping[str, Any]):
    try:  # pipelines/nccl_params.py comes with the NCCL-like model (fabrics/network/nccl/)
        from pipelines.nccl_params import nccl_spec
    except ImportError:
        raise SpecError("network=nccl is not available in this build; use network=analytical") from None
    return nccl_spec(net)


def simlette_spec(net: Mapping[str, Any]):
    from fabrics.network.simlette.build import SimletteSpec
    from fabrics.network.simlette.params import SimletteParams

    buf = net.get("buffer_bytes", net.get("buffer", "unlimited"))
    buffer_bytes = None if buf in (None, "unlimited") else int(_number_or_unit(buf, parse_bytes, "network.buffer"))
    kw = dict(mode=str(net.get("mode") or "optimized"), buffer_bytes=buffer_bytes,
              write_responses=bool(net.get("write_responses", False)), spray=str(net.get("spray") or "source"),
              phase_sync=str(net.get("phase_sync") or "auto"))
    if net.get("credit_protocol_s") is not None:
        kw["credit_protocol_s"] = float(net["credit_protocol_s"])
    mult = net.get("ocs_multiplicity")
    return SimletteSpec(params=SimletteParams(**kw), schedule=net.get("schedule") or None,
                        ocs_folds=tuple(str(m) for m in (net.get("ocs_folds") or ())),
                        ocs_multiplicity=None if mult is None else positive_int(mult, "network.ocs_multiplicity"))


def build_network(cfg: Any, accelerator, world: int, *, scheduler: str | None = None, nodes: int | None = None,
                  topology=None):
    """The configured network model on the configured fabric (ready for ``prepare``)."""
    from fabrics.network.registry import build_network_model

    cluster = cluster_spec(cfg, accelerator, world, scheduler=scheduler, nodes=nodes)
    name, spec = network_spec(cfg)
    return build_network_model(name, cluster, spec, world, topology=topology)


def simlette_from_config(fabric: Mapping[str, Any], network: Mapping[str, Any], *, world: int | None = None,
                         topology=None):
    """Simlette on a scale-up fabric given as mappings (tests, benchmarks): the same parser and
    builder as ``build_network``; ``fabric.world`` / ``fabric.accelerators`` set the size."""
    fab = dict(fabric)
    n = fab.pop("world", None) or fab.get("accelerators") or world
    if n is None:
        raise SpecError("fabric.world (number of accelerators) is not set; give e.g. fabric.world=256")
    cfg = {"fabric": fab, "network": {**dict(network), "name": "simlette"}}
    return build_network(cfg, None, int(world or n), topology=topology)


def simlette_params(network: Mapping[str, Any], latency):
    """Simulator parameters of a ``network=simlette`` mapping with the endpoint split of ``latency``."""
    from fabrics.network.simlette.build import endpoint_split

    return endpoint_split(simlette_spec(network).params, latency)
