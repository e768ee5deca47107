"""Analytical cost of one schedule phase on a routed fabric (paper 003, Eq. 10 generalised).

A phase costs the latency of its slowest path plus the bytes on its most loaded shared capacity
over that capacity's bandwidth (rack uplinks at 4:1, hybrid rack circuits, OCS circuits,
accelerator injection). The routed fabric says which capacities each transfer crosses
(``RoutedFabric.crossings``, ``capacity_Bps``) and its hop counts (``RoutedFabric.hops``);
``fabrics.scaleup.phase_pricing`` is the vectorised twin of ``phase_cost``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Protocol

from collectives.errors import SpecError
from fabrics.scaleup.physical import FabricSpec


class SharedCapacities(Protocol):
    """What ``phase_cost`` reads from a routed fabric (``fabrics.scaleup.paths.RoutedFabric``)."""

    @property
    def spec(self) -> FabricSpec: ...

    def hops(self, src_rank: int, dst_rank: int) -> tuple[int, int, int] | None: ...

    def crossings(self, src_rank: int, dst_rank: int) -> tuple[tuple[tuple, float], ...]: ...

    def capacity_Bps(self, key: tuple) -> float: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseCost:
    latency_s: float
    serialization_s: float
    bottleneck: tuple | None

    @property
    def time_s(self) -> float:
        return self.latency_s + self.serialization_s


def phase_cost(routed: SharedCapacities, transfers: Iterable[tuple[int, int, float]]) -> PhaseCost:
    """Analytical cost of one schedule phase (Eq. 10 generalised to shared capacities):
    latency of its slowest path plus the most loaded capacity's bytes over its bandwidth."""
    load: dict[tuple, float] = defaultdict(float)
    latency = 0.0
    lat_cache: dict[tuple[int, int], float] = {}
    for src, dst, nbytes in transfers:
        if src == dst:
            continue
        hops = routed.hops(src, dst)
        if hops is None:
            raise SpecError(f"no path from rank {src} to rank {dst} on {routed.spec.kind}")
        if hops not in lat_cache:
            lat_cache[hops] = routed.spec.latency.path_latency_s(eps_hops=hops[0], ocs_passes=hops[1],
                                                                 level2_cables=hops[2])
        latency = max(latency, lat_cache[hops])
        for key, share in routed.crossings(src, dst):
            load[key] += share * nbytes
    worst_key, worst_s = None, 0.0
    for key, nbytes in load.items():
        t = nbytes / routed.capacity_Bps(key)
        if t > worst_s:
            worst_key, worst_s = key, t
    return PhaseCost(latency_s=latency, serialization_s=worst_s, bottleneck=worst_key)
