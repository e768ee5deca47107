"""``network=nccl`` config -> ``NcclSpec`` (the one place its units and keys are parsed).

``nccl_spec(network_mapping)`` takes the ``network`` group (conf/network/nccl.yaml, with any
``network.algorithm=...`` / ``network.protocol=...`` override) and returns the frozen spec. A
mapping without ``generations`` takes them from conf/network/nccl.yaml. Times are strings with a
unit (``0.6us``) or numbers in seconds; every error is one line naming the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from collectives.errors import SpecError
from pipelines.specs import plain
from pipelines.units import parse_time

PARAMS_FILE = Path(__file__).resolve().parent.parent / "conf" / "network" / "nccl.yaml"
TOP_KEYS = ("name", "algorithm", "protocol", "nccl_version", "versions", "cuda_graph", "generations", "collnet")
VERSION_KEYS = ("nvls_partition", "nvls_align_bytes")
GENERATION_KEYS = ("accelerators", "channels", "protocols", "nvls_chunk_bytes", "nvls_overlap_chunks", "nvls_channel_Bps",
                   "nvls_rank_latency", "cuda_graph_saving",
                   "p2p_ll_threshold_bytes", "p2p_level",
                   "base_latency", "hop_latency", "efficiency", "tuning")
TUNING_KEYS = ("link_GBps", "ll_max_GBps", "ring_ll128_per_channel_GBps", "nvls_efficiency", "base_latency", "hop_latency")


# Explicit keyed caches (safe to clear): the parameter file by (mtime, size), parsed generations by their
# canonical JSON text -- a decode point builds its network model once per run, and YAML parsing would
# otherwise dominate it.
_FILE_CACHE: dict[tuple, dict] = {}
_GENERATIONS_CACHE: dict[str, tuple] = {}
_CACHE_KEEP = 8


def clear_caches() -> None:
    _FILE_CACHE.clear()
    _GENERATIONS_CACHE.clear()


def default_mapping() -> dict:
    """conf/network/nccl.yaml as a plain mapping (a fresh copy)."""
    import copy

    return copy.deepcopy(_file_mapping())


def _file_mapping() -> dict:
    """The cached parse of conf/network/nccl.yaml (read-only: callers must not change it)."""
    import yaml

    stat = PARAMS_FILE.stat()
    key = (str(PARAMS_FILE), stat.st_mtime_ns, stat.st_size)
    if key not in _FILE_CACHE:
        if len(_FILE_CACHE) >= _CACHE_KEEP:
            _FILE_CACHE.clear()
        _FILE_CACHE[key] = yaml.safe_load(PARAMS_FILE.read_text())
    return _FILE_CACHE[key]


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, Mapping):
        raise SpecError(f"{where} must be a mapping, got {type(value).__name__} {value!r}")
    return {str(k): v for k, v in value.items()}


def _unknown(d: Mapping, allowed: tuple[str, ...], where: str) -> None:
    extra = sorted(set(d) - set(allowed))
    if extra:
        raise SpecError(f"{where}.{extra[0]} is not a known key; known keys: {', '.join(allowed)}")


def _table(value: Any, where: str, convert) -> dict:
    """row -> protocol -> converted value."""
    return {row: {proto: convert(v, f"{where}.{row}.{proto}") for proto, v in _mapping(per, f"{where}.{row}").items()}
            for row, per in _mapping(value, where).items()}


def _time(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise SpecError(f"{where}={value!r} must be a time such as 0.6us")
    return float(value) if isinstance(value, (int, float)) else parse_time(value, where)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"{where}={value!r} must be a number")
    return float(value)


def _whole(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where}={value!r} must be a whole number")
    return value


def generation_spec(name: str, d: Mapping[str, Any]):
    from fabrics.network.nccl.params import Generation, ProtocolShape

    where = f"network.generations.{name}"
    d = _mapping(d, where)
    _unknown(d, GENERATION_KEYS, where)
    for key in ("accelerators", "channels", "protocols", "base_latency", "hop_latency", "efficiency"):
        if key not in d:
            raise SpecError(f"{where}.{key} is missing (see conf/network/nccl.yaml)")
    accs = d["accelerators"]
    if not isinstance(accs, (list, tuple)) or not all(isinstance(a, str) for a in accs):
        raise SpecError(f"{where}.accelerators={accs!r} must be a list of accelerator names")
    protocols = {}
    for proto, shape in _mapping(d["protocols"], f"{where}.protocols").items():
        shape = _mapping(shape, f"{where}.protocols.{proto}")
        _unknown(shape, ("threads", "thread_threshold_bytes"), f"{where}.protocols.{proto}")
        protocols[proto] = ProtocolShape(**{k: _whole(v, f"{where}.protocols.{proto}.{k}") for k, v in shape.items()})
    kw = {}
    for key in ("nvls_chunk_bytes", "p2p_ll_threshold_bytes"):
        if key in d:
            kw[key] = _whole(d[key], f"{where}.{key}")
    if "p2p_level" in d:
        kw["p2p_level"] = str(d["p2p_level"]).lower()
    for key in ("nvls_overlap_chunks", "nvls_channel_Bps"):
        if key in d:
            kw[key] = _number(d[key], f"{where}.{key}")
    for key in ("nvls_rank_latency", "cuda_graph_saving"):
        if key in d:
            kw[f"{key}_s"] = _time(d[key], f"{where}.{key}")
    if "tuning" in d:
        kw["tuning"] = {str(v): tuning_spec(t, f"{where}.tuning.{v}")
                        for v, t in _mapping(d["tuning"], f"{where}.tuning").items()}
    return Generation(
        name=name, accelerators=tuple(accs),
        channels={k: _whole(v, f"{where}.channels.{k}") for k, v in _mapping(d["channels"], f"{where}.channels").items()},
        protocols=protocols,
        base_latency_s=_table(d["base_latency"], f"{where}.base_latency", _time),
        hop_latency_s={t: _table(rows, f"{where}.hop_latency.{t}", _time)
                       for t, rows in _mapping(d["hop_latency"], f"{where}.hop_latency").items()},
        efficiency={t: _table(rows, f"{where}.efficiency.{t}", _number)
                    for t, rows in _mapping(d["efficiency"], f"{where}.efficiency").items()},
        **kw)


def tuning_spec(value: Any, where: str):
    """One release's NCCL tuner table (numbers as tuning.cc writes them: GB/s, us)."""
    from fabrics.network.nccl.params import TuningTable

    d = _mapping(value, where)
    _unknown(d, TUNING_KEYS, where)
    for key in TUNING_KEYS:
        if key not in d:
            raise SpecError(f"{where}.{key} is missing (src/graph/tuning.cc)")
    return TuningTable(**{k: _number(d[k], f"{where}.{k}") for k in TUNING_KEYS[:4]},
                       base_latency_us=_table(d["base_latency"], f"{where}.base_latency", _number),
                       hop_latency_us=_table(d["hop_latency"], f"{where}.hop_latency", _number))


def nccl_spec(network_mapping: Any):
    """The ``network`` group of ``network=nccl`` as a validated ``fabrics.network.nccl.NcclSpec``."""
    from fabrics.network.nccl.params import NcclSpec

    net = _mapping(plain(network_mapping), "network")
    net = {k: v for k, v in net.items() if not k.startswith("_")}
    _unknown(net, TOP_KEYS, "network")
    if net.get("name", "nccl") not in ("nccl", "auto"):  # auto: resolved to nccl on GPU fabrics
        raise SpecError(f"network.name={net.get('name')!r}: nccl_spec parses network=nccl only")
    gens = net.get("generations")
    if gens is None:
        gens = _file_mapping()["generations"]
    versions = versions_spec(net["versions"] if "versions" in net else _file_mapping().get("versions", {}))
    version = str(net.get("nccl_version") or _file_mapping().get("nccl_version") or "default")
    if versions and version not in versions:
        raise SpecError(f"network.nccl_version={version!r} is not a known NCCL release; choose one of: "
                        f"{', '.join(versions)} (conf/network/nccl.yaml versions)")
    generations = _generations(_mapping(gens, "network.generations"), versions.get(version))
    return NcclSpec(algorithm=str(net.get("algorithm") or "auto").lower(),
                    protocol=str(net.get("protocol") or "auto").lower(),
                    nccl_version=version, versions=versions, cuda_graph=cuda_graph_flag(net.get("cuda_graph")),
                    generations=generations,
                    collnet=collnet_spec(net.get("collnet", _file_mapping().get("collnet")), generations))


def cuda_graph_flag(value: Any) -> bool:
    """``network.cuda_graph`` as a boolean: true / false; ``auto`` (or absent) reads as false here, graph off
    as nccl-tests runs -- ``pipelines.network`` resolves auto from the engine before it gets here."""
    if isinstance(value, bool):
        return value
    text = "auto" if value is None else str(value).lower()
    if text in ("auto", "false", "off", "no"):
        return False
    if text in ("true", "on", "yes"):
        return True
    raise SpecError(f"network.cuda_graph={value!r} is not one of auto, true, false")


def versions_spec(value: Any) -> dict:
    """The ``versions`` table: NCCL release -> ``NcclVersion`` (what that release does differently)."""
    from fabrics.network.nccl.params import NcclVersion

    out = {}
    for name, d in _mapping(value, "network.versions").items():
        where = f"network.versions.{name}"
        d = _mapping(d, where)
        _unknown(d, VERSION_KEYS, where)
        kw = {}
        if "nvls_partition" in d:
            kw["nvls_partition"] = str(d["nvls_partition"]).lower()
        if "nvls_align_bytes" in d:
            kw["nvls_align_bytes"] = _whole(d["nvls_align_bytes"], f"{where}.nvls_align_bytes")
        out[name] = NcclVersion(name=name, **kw)
    return out


def _generations(gens: dict, version=None) -> tuple:
    import json
    from dataclasses import replace

    key = json.dumps([gens, None if version is None else repr(version)], sort_keys=True, default=repr)
    hit = _GENERATIONS_CACHE.get(key)
    if hit is None:
        hit = tuple(generation_spec(name, g) for name, g in gens.items())
        if version is not None:
            hit = tuple(replace(g, version=version) for g in hit)
        if len(_GENERATIONS_CACHE) >= _CACHE_KEEP:
            _GENERATIONS_CACHE.clear()
        _GENERATIONS_CACHE[key] = hit
    return hit


# --- CollNet / SHARP constants (``network.collnet``; fabrics/network/nccl/collnet.py) -------------

COLLNET_KEYS = ("max_local_ranks", "base_latency", "intra_hop_latency",
                "net_hop_latency", "arity_latency", "nvlink_factor", "net_efficiency", "allgather_reducescatter")
COLLNET_TIME_TABLES = ("base_latency", "intra_hop_latency", "net_hop_latency")


def collnet_generation(name: str, d: Any):
    from fabrics.network.nccl.collnet import CollNetParams

    where = f"network.collnet.{name}"
    d = _mapping(d, where)
    _unknown(d, COLLNET_KEYS, where)
    missing = [k for k in COLLNET_KEYS if k not in d and k != "allgather_reducescatter"]
    if missing:
        raise SpecError(f"{where}.{missing[0]} is missing (see conf/network/nccl.yaml collnet)")
    kw: dict = {"max_local_ranks": d["max_local_ranks"]}
    for key in COLLNET_TIME_TABLES:
        kw[key + "_s"] = {r: _time(v, f"{where}.{key}.{r}") for r, v in _mapping(d[key], f"{where}.{key}").items()}
    for key in ("nvlink_factor", "net_efficiency"):
        kw[key] = {r: _number(v, f"{where}.{key}.{r}") for r, v in _mapping(d[key], f"{where}.{key}").items()}
    kw["arity_latency_s"] = _time(d["arity_latency"], f"{where}.arity_latency")
    if "allgather_reducescatter" in d:
        kw["allgather_reducescatter"] = d["allgather_reducescatter"]
    return CollNetParams(generation=name, **kw)


def collnet_spec(value: Any, generations: tuple) -> tuple:
    """Every generation's ``CollNetParams``; a block naming no known generation is refused."""
    if value is None:
        return ()
    blocks = _mapping(value, "network.collnet")
    known = {g.name for g in generations}
    for name in blocks:
        if name not in known:
            raise SpecError(f"network.collnet.{name} names no generation; use one of: {', '.join(sorted(known))}")
    return tuple(collnet_generation(name, d) for name, d in blocks.items())


__all__ = ["nccl_spec", "generation_spec", "versions_spec", "cuda_graph_flag", "collnet_spec", "default_mapping", "clear_caches", "PARAMS_FILE"]
