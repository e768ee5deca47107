"""``network.collnet`` (conf/network/nccl.yaml) -> ``CollNetParams`` per generation.

The CollNet / SHARP constants of the NCCL-like model (fabrics/network/nccl/collnet.py): one block
per generation, times with a unit (``3.7us``) or numbers in seconds; every error is one line
naming the key. A ``network`` mapping without ``collnet`` takes conf/network/nccl.yaml's.
"""

from __future__ import annotations

from typing import Any, Mapping

from collectives.errors import SpecError
from pipelines.units import parse_time

KEYS = ("max_local_ranks", "base_latency", "intra_hop_latency",
        "net_hop_latency", "arity_latency", "nvlink_factor", "net_efficiency", "allgather_reducescatter")
TIME_TABLES = ("base_latency", "intra_hop_latency", "net_hop_latency")


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, Mapping):
        raise SpecError(f"{where} must be a mapping, got {type(value).__name__} {value!r}")
    return {str(k): v for k, v in value.items()}


def _time(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise SpecError(f"{where}={value!r} must be a time such as 3.7us")
    return float(value) if isinstance(value, (int, float)) else parse_time(value, where)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"{where}={value!r} must be a number")
    return float(value)


def collnet_generation(name: str, d: Any):
    from fabrics.network.nccl.collnet import CollNetParams

    where = f"network.collnet.{name}"
    d = _mapping(d, where)
    extra = sorted(set(d) - set(KEYS))
    if extra:
        raise SpecError(f"{where}.{extra[0]} is not a known key; known keys: {', '.join(KEYS)}")
    missing = [k for k in KEYS if k not in d and k != "allgather_reducescatter"]
    if missing:
        raise SpecError(f"{where}.{missing[0]} is missing (see conf/network/nccl.yaml collnet)")
    kw: dict = {"max_local_ranks": d["max_local_ranks"]}
    for key in TIME_TABLES:
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


__all__ = ["collnet_spec", "collnet_generation"]
