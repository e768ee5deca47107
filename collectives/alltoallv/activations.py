"""AlltoAllv schedules as data: ordered activations of lanes (paper 000, Section 3).

An activation E = (C, x) is one stage: its lanes run concurrently, stages run one after another.
A lane moves ``bytes`` from ``src`` to ``dst`` on one concrete path. Relaying schedulers (FAST,
DeepEP) forward data through intermediate GPUs; such a lane names the commodity it carries with
``origin``/``final`` (the original source and final destination), which the validity checker
follows. ``to_json`` is the self-contained ``schedule.json`` a later issue replays with
torch.distributed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from collectives.alltoallv.channels import PathOption


@dataclass(frozen=True, slots=True, kw_only=True)
class Lane:
    src: int
    dst: int
    path: PathOption
    bytes: int
    origin: int = -1  # original source of the data carried; -1: ``src``
    final: int = -1  # final destination of the data carried; -1: ``dst``

    @property
    def commodity(self) -> tuple[int, int]:
        return (self.src if self.origin < 0 else self.origin, self.dst if self.final < 0 else self.final)


@dataclass(frozen=True, slots=True, kw_only=True)
class Activation:
    lanes: tuple[Lane, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlltoallvSchedule:
    scheduler: str
    platform: str
    n_ranks: int
    demand: np.ndarray = field(compare=False)  # N x N int64 bytes, zero diagonal
    activations: tuple[Activation, ...]
    channels: bool  # True: every activation claims to be a contention-free channel (VarioPath, ablations, MILP)
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def n_activations(self) -> int:
        return len(self.activations)

    def to_json(self) -> dict:
        """Self-contained replay input: world size, demand, platform and every lane with its path."""
        return {
            "format": "gxnet.alltoallv.schedule/1",
            "scheduler": self.scheduler,
            "platform": self.platform,
            "world_size": self.n_ranks,
            "demand_bytes": np.asarray(self.demand, dtype=np.int64).tolist(),
            "contention_free_channels": self.channels,
            "activations": [
                {"lanes": [
                    {"src": l.src, "dst": l.dst, "origin": l.commodity[0], "final": l.commodity[1],
                     "bytes": int(l.bytes), "path": {"kind": l.path.kind, "resources": list(l.path.resources),
                                                     "rate_Bps": l.path.rate_Bps}}
                    for l in act.lanes]}
                for act in self.activations
            ],
            "meta": self.meta,
        }

    def as_phases(self):
        """The shared ``collectives.schedule.Schedule`` view (one phase per activation).

        sigma = the largest per-rank send volume, so each transfer's fraction is bytes/sigma;
        ``edge`` is the path kind's index in PATH_KINDS.
        """
        from collectives.alltoallv.channels import PATH_KINDS
        from collectives.schedule import Phase, Schedule, Transfer

        sigma = max(1, int(np.asarray(self.demand).sum(axis=1).max()))
        phases = tuple(
            Phase(transfers=tuple(Transfer(src=l.src, dst=l.dst, edge=PATH_KINDS.index(l.path.kind),
                                           fraction=Fraction(int(l.bytes), sigma)) for l in act.lanes))
            for act in self.activations)
        return Schedule(name=self.scheduler, collective="alltoallv", n_ranks=self.n_ranks, n_chunks=1,
                        phases=phases, meta={"sigma_bytes": sigma, "platform": self.platform})
