"""The channel/path abstraction every AlltoAllv scheduler consumes (paper 000, Section 3).

Schedulers live in ``collectives`` and may not import ``fabrics``; ``fabrics.pcie`` builds a
``ChannelTopology`` from the physical server/cluster model and hands it over.

- A ``PathOption`` is one concrete path p in P_ij: its kind (PIX, PXB, PHB, NODE, SYS, NIC), its
  full directed physical footprint (``resources``, for the flow-level evaluator and the replay),
  the subset ``shared`` that the channel model checks for contention (the set U of Section 3:
  directed shared PCIe and NIC-facing resources; endpoint-local GPU attachments and the
  non-blocking network core are excluded) and its rate bw(p).
- A ``ChannelTopology`` holds the ranks, the switch-local rank groups V_a of Section 4.1 and the
  path options of every ordered pair.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from collectives.errors import SpecError

# nvidia-smi topo -m vocabulary, nearest first; NIC = GPU -> switch -> NIC -> network -> NIC -> switch -> GPU.
PATH_KINDS = ("PIX", "PXB", "PHB", "NODE", "SYS", "NIC")
KIND_RANK = _KIND_ORDER = {k: n for n, k in enumerate(PATH_KINDS)}


@dataclass(frozen=True, slots=True, kw_only=True)
class PathOption:
    src: int
    dst: int
    kind: str
    resources: tuple[str, ...]  # every directed physical resource on the path, in order
    shared: tuple[str, ...]  # the modelled resources U (subset of ``resources``)
    rate_Bps: float  # bw(p): the slowest resource on the path

    def __post_init__(self) -> None:
        if self.kind not in _KIND_ORDER:
            raise SpecError(f"path kind {self.kind!r} of {self.src}->{self.dst} is unknown; use one of {', '.join(PATH_KINDS)}")
        if self.src == self.dst:
            raise SpecError(f"path {self.src}->{self.dst} is a self-transfer; AlltoAllv handles self traffic locally")
        if not self.rate_Bps > 0:
            raise SpecError(f"path {self.src}->{self.dst} ({self.kind}) has rate {self.rate_Bps}; rates must be positive")
        if not set(self.shared) <= set(self.resources):
            raise SpecError(f"path {self.src}->{self.dst}: shared resources must be a subset of its resources")

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        """What identifies the path independent of its endpoints' attachments."""
        return (self.kind, self.shared)

    def to_json(self) -> dict:
        return {"kind": self.kind, "resources": list(self.resources), "shared": list(self.shared), "rate_Bps": self.rate_Bps}

    @staticmethod
    def from_json(src: int, dst: int, obj: dict) -> "PathOption":
        return PathOption(src=src, dst=dst, kind=obj["kind"], resources=tuple(obj["resources"]),
                          shared=tuple(obj["shared"]), rate_Bps=float(obj["rate_Bps"]))


def nearest_first(options: tuple[PathOption, ...]) -> tuple[PathOption, ...]:
    """NCCL-like preference: nearest kind first (PIX before PXB ... before NIC), then faster, then shorter."""
    return tuple(sorted(options, key=lambda p: (_KIND_ORDER[p.kind], -p.rate_Bps, len(p.resources), p.resources)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelTopology:
    name: str  # platform name (recorded in schedule.json)
    n_ranks: int
    groups: tuple[tuple[int, ...], ...]  # switch-local rank groups V_a (Section 4.1)
    paths: dict = field(compare=False)  # (i, j) -> tuple[PathOption, ...], nearest first
    capacity_Bps: dict = field(compare=False, default_factory=dict)  # resource id -> rate (for the evaluator)
    nodes: tuple[int, ...] = ()  # node of each rank (empty: one node)
    # Interchangeable NIC ports: shared resource id -> (class, index). Ports of one class (same
    # node, same attachment, same rates, one direction) can be relabelled without changing any
    # channel's feasibility or rates; the catalog uses this to keep one family per relabelling.
    port_class: dict = field(compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        n = self.n_ranks
        if n < 2:
            raise SpecError(f"n_ranks={n} must be at least 2 for an AlltoAllv")
        flat = sorted(r for g in self.groups for r in g)
        if flat != list(range(n)):
            raise SpecError(f"rank groups {self.groups} must partition ranks 0..{n - 1} exactly once")
        sizes = {len(g) for g in self.groups}
        if len(sizes) != 1:
            raise SpecError(f"rank groups have sizes {sorted(sizes)}; VarioPath needs equal group sizes g (Section 4.1)")
        for i in range(n):
            for j in range(n):
                if i != j and not self.paths.get((i, j)):
                    raise SpecError(f"no path from rank {i} to rank {j}; every ordered pair needs at least one path")

    # --- views -----------------------------------------------------------------------------
    @property
    def g(self) -> int:
        return len(self.groups[0])

    @property
    def n_groups(self) -> int:
        return len(self.groups)

    def group_of(self) -> np.ndarray:
        out = np.empty(self.n_ranks, dtype=np.int64)
        for a, grp in enumerate(self.groups):
            out[list(grp)] = a
        return out

    def options(self, i: int, j: int) -> tuple[PathOption, ...]:
        return self.paths[(i, j)]

    def nearest(self, i: int, j: int) -> PathOption:
        return self.paths[(i, j)][0]

    def topology_hash(self) -> str:
        """Keys the on-disk catalog cache: groups and every path's kind, footprint and rate."""
        h = hashlib.sha256()
        h.update(json.dumps([list(g) for g in self.groups]).encode())
        for (i, j) in sorted(self.paths):
            for p in self.paths[(i, j)]:
                h.update(f"{i},{j},{p.kind},{'|'.join(p.shared)},{p.rate_Bps!r};".encode())
        return h.hexdigest()[:20]

    def max_rate_Bps(self) -> float:
        return max(p.rate_Bps for opts in self.paths.values() for p in opts)
