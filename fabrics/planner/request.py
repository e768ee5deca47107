"""What the OCS planner is asked (paper 003, Appendix A.2, Figure 12 "Request").

Per mesh: its shape (power-of-two axis sizes whose product is the world), one collective per
axis (or one for the whole mesh), one payload σ per axis (bytes), optional weights w (calls per
decode step; default 1) and schedules (``auto`` = best valid schedule per axis). Plus the
deployment parameters the planner alone owns: world N, ports L, link rate R, per-phase latency λ.

A request is a frozen value; ``request_hash`` (SHA-256 of its canonical JSON) keys the plan cache.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence

from collectives.errors import SpecError

ALLOCATIONS = ("shared_host", "stacked_link")
NO_COLLECTIVE = "none"


def _pow2(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


@dataclass(frozen=True, slots=True, kw_only=True)
class MeshRequest:
    shape: tuple[int, ...]
    collectives: tuple[str, ...]  # one per axis; "none" for a logical-only axis
    payloads_bytes: tuple[int, ...]  # σ per axis
    weights: tuple[float, ...]  # w per axis (calls per step)
    schedules: tuple[str, ...]  # "auto" or a schedule name per axis

    def __post_init__(self) -> None:
        k = len(self.shape)
        if k == 0 or k > 2:
            raise SpecError(f"mesh shape {list(self.shape)} must have 1 or 2 axes (Appendix A.7 supports 1-D and 2-D meshes)")
        for name in ("collectives", "payloads_bytes", "weights", "schedules"):
            if len(getattr(self, name)) != k:
                raise SpecError(f"mesh {list(self.shape)}: give one {name.split('_')[0]} per axis ({k}), "
                                f"not {len(getattr(self, name))}")
        for s in self.shape:
            if not isinstance(s, int) or isinstance(s, bool) or not _pow2(s) or s < 2:
                raise SpecError(f"mesh axis size {s!r} must be a power of two ≥ 2 (Appendix A.1 restricts axes to 2^a)")
        for p in self.payloads_bytes:
            if not isinstance(p, int) or p < 0:
                raise SpecError(f"payload {p!r} must be a whole number of bytes ≥ 0")
        for w in self.weights:
            if not w >= 0:
                raise SpecError(f"axis weight {w!r} must be ≥ 0 (calls per decode step)")

    @property
    def world(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    world: int
    ports: int
    link_rate_Bps: float
    hop_latency_s: float
    meshes: tuple[MeshRequest, ...]
    allocation: str = "shared_host"

    def __post_init__(self) -> None:
        if not isinstance(self.world, int) or not _pow2(self.world) or self.world < 2:
            raise SpecError(f"world={self.world!r} must be a power of two ≥ 2 for the shared-host planner (A.7)")
        if not isinstance(self.ports, int) or self.ports < 1:
            raise SpecError(f"ports={self.ports!r} must be a positive integer")
        if not self.link_rate_Bps > 0:
            raise SpecError(f"link_rate={self.link_rate_Bps!r} must be a positive rate")
        if not self.hop_latency_s >= 0:
            raise SpecError(f"hop_latency={self.hop_latency_s!r} must be non-negative")
        if self.allocation not in ALLOCATIONS:
            raise SpecError(f"allocation={self.allocation!r} is unknown; choose one of: {', '.join(ALLOCATIONS)}")
        if not self.meshes:
            raise SpecError("meshes is empty; give at least one mesh, e.g. [{shape:[4,64],collective:allreduce,payloads:[4KiB,32KiB]}]")
        for m in self.meshes:
            if m.world != self.world:
                raise SpecError(f"mesh {list(m.shape)} spans {m.world} ranks but world={self.world}; "
                                "every mesh must span the whole world (A.7)")
        n_bits = self.world.bit_length() - 1
        if self.allocation == "shared_host" and self.ports < n_bits:
            raise SpecError(f"ports={self.ports} is below log2(world)={n_bits}: the shared-host base hypercube "
                            "needs one port per rank-label bit; raise ports or use allocation=stacked_link")

    @property
    def n_bits(self) -> int:
        return self.world.bit_length() - 1

    def canonical(self) -> dict:
        """The request as plain data (``dataclasses.asdict``'s fields and values, meshes as a list),
        built field by field: every plan lookup hashes it."""
        d = {f: getattr(self, f) for f in _REQUEST_FIELDS}
        d["meshes"] = [{f: getattr(m, f) for f in _MESH_FIELDS} for m in self.meshes]
        return d


_REQUEST_FIELDS = tuple(f.name for f in fields(PlanRequest))
_MESH_FIELDS = tuple(f.name for f in fields(MeshRequest))


def request_hash(request: PlanRequest) -> str:
    text = json.dumps(request.canonical(), sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(text.encode()).hexdigest()


def _listify(value: Any, k: int, what: str) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value] * k


def mesh_from_dict(d: Mapping[str, Any], *, default_schedule: str = "auto") -> MeshRequest:
    """A ``MeshRequest`` from plain data with numbers: shape, collective(s), payloads (bytes),
    optional weights and schedule(s)."""
    d = dict(d)
    known = {"shape", "collective", "collectives", "payloads", "weights", "schedule", "schedules"}
    unknown = sorted(set(d) - known)
    if unknown:
        raise SpecError(f"unknown mesh key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    if "shape" not in d or "payloads" not in d:
        raise SpecError("each mesh needs shape and payloads, e.g. {shape:[4,64],collective:allreduce,payloads:[4KiB,32KiB]}")
    shape = tuple(int(s) for s in d["shape"])
    k = len(shape)
    coll = d.get("collectives", d.get("collective", "allreduce"))
    from collectives.schedules import normalize_collective

    colls = tuple(NO_COLLECTIVE if c in (None, NO_COLLECTIVE) else normalize_collective(c)
                  for c in _listify(coll, k, "collective"))
    payloads = _listify(d["payloads"], k, "payloads")
    if any(isinstance(p, str) for p in payloads):
        raise SpecError("mesh payloads must be numbers here; parse units (4KiB) at the config edge first")
    scheds = tuple(str(s) for s in _listify(d.get("schedules", d.get("schedule", default_schedule)), k, "schedule"))
    weights = tuple(float(w) for w in _listify(d.get("weights", 1.0), k, "weights"))
    return MeshRequest(shape=shape, collectives=colls, payloads_bytes=tuple(int(p) for p in payloads),
                       weights=weights, schedules=scheds)


def request_from_dict(*, world: int, ports: int, link_rate_Bps: float, hop_latency_s: float,
                      meshes: Sequence[Mapping[str, Any]], allocation: str = "shared_host",
                      schedule: str = "auto") -> PlanRequest:
    return PlanRequest(world=int(world), ports=int(ports), link_rate_Bps=float(link_rate_Bps),
                       hop_latency_s=float(hop_latency_s),
                       meshes=tuple(mesh_from_dict(m, default_schedule=schedule) for m in meshes),
                       allocation=allocation)
