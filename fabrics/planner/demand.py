"""From the deployment-time demand table (paper 003, Table 1) to planner and placement inputs.

Convention (as ``gxnet.parallel``): each region's mesh is row-major with its axes in demand
order, the last axis minor — attention (KVP, TPA), FFN (EP, TPE) or (EP, TP); rank =
major_index · minor_size + minor_index. Rows whose groups span the world (the attention
all-reduce, the LM-head all-gather) become 1-D meshes. A region axis carrying several
collectives gets one extra mesh per extra collective (its other axis logical-only).

``request_from_demand`` returns the plan request and, for every demand row, the (mesh, axis)
of the request that prices it; ``traffic_from_demand`` gives the hybrid fabric's placement the
rank groups and bytes per ordered pair and step (native schedules: two-shot all-reduce sends
2σ/n to each peer, the others σ/n).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from collectives.errors import SpecError
from fabrics.network.protocol import DemandEntry
from fabrics.planner.request import NO_COLLECTIVE, MeshRequest, PlanRequest
from fabrics.scaleup.allocation import TrafficGroups


def _region_meshes(demand: Sequence[DemandEntry], world: int):
    """[(shape, [(row or None) per axis])] in demand order."""
    meshes: list[tuple[tuple[int, ...], list[DemandEntry | None]]] = []
    by_region: dict[str, list[DemandEntry]] = {}
    for row in demand:
        if row.ranks * row.groups != world:
            raise SpecError(f"demand row {row.region}/{row.axis}: {row.groups}×{row.ranks} ranks do not cover world={world}")
        if row.ranks == world:
            if row.collective != NO_COLLECTIVE and row.ranks > 1:
                meshes.append(((world,), [row]))
            continue
        by_region.setdefault(row.region, []).append(row)
    for region, rows in by_region.items():
        axes: dict[str, list[DemandEntry]] = {}
        for row in rows:
            axes.setdefault(row.axis, []).append(row)
        names = list(axes)
        if len(names) == 1:
            (name,) = names
            n = axes[name][0].ranks
            shape, slot = (world // n, n), 1
            for row in axes[name]:
                cells: list[DemandEntry | None] = [None, None]
                cells[slot] = row
                meshes.append((shape, cells))
            continue
        if len(names) != 2:
            raise SpecError(f"region {region} has mesh axes {names}; the planner supports 1-D and 2-D meshes")
        sizes = tuple(axes[a][0].ranks for a in names)
        if sizes[0] * sizes[1] != world:
            raise SpecError(f"region {region}: axes {names} of sizes {sizes} do not multiply to world={world}")
        depth = max(len(axes[a]) for a in names)
        for level in range(depth):
            cells = [axes[a][level] if level < len(axes[a]) else None for a in names]
            meshes.append((sizes, cells))
    return meshes


def request_from_demand(demand: Sequence[DemandEntry], *, world: int, ports: int, link_rate_Bps: float,
                        hop_latency_s: float, allocation: str = "shared_host"
                        ) -> tuple[PlanRequest, dict[tuple[str, str, str], tuple[int, int]]]:
    meshes, where = [], {}
    for shape, cells in _region_meshes(demand, world):
        colls, pays, weights = [], [], []
        for i, row in enumerate(cells):
            active = row is not None and row.collective != NO_COLLECTIVE and row.payload_bytes > 0 and row.calls_per_step > 0
            colls.append(row.collective if active else NO_COLLECTIVE)
            pays.append(row.payload_bytes if active else 0)
            weights.append(float(row.calls_per_step) if active else 0.0)
            if active:
                where[row.key()] = (len(meshes), i)
        if any(c != NO_COLLECTIVE for c in colls):
            meshes.append(MeshRequest(shape=tuple(shape), collectives=tuple(colls), payloads_bytes=tuple(pays),
                                      weights=tuple(weights), schedules=("auto",) * len(shape)))
    if not meshes:
        raise SpecError("the demand has no collective to plan circuits for")
    return PlanRequest(world=world, ports=ports, link_rate_Bps=link_rate_Bps, hop_latency_s=hop_latency_s,
                       meshes=tuple(meshes), allocation=allocation), where


def mesh_axis_groups(shape: tuple[int, ...], axis: int) -> tuple[tuple[int, ...], ...]:
    """Row-major groups of one mesh axis (last axis minor)."""
    ranks = np.arange(int(np.prod(shape))).reshape(shape)
    moved = np.moveaxis(ranks, axis, -1).reshape(-1, shape[axis])
    return tuple(map(tuple, moved.tolist()))


def traffic_from_demand(demand: Sequence[DemandEntry], world: int) -> list[TrafficGroups]:
    out = []
    for shape, cells in _region_meshes(demand, world):
        for i, row in enumerate(cells):
            if row is None or row.collective == NO_COLLECTIVE or row.payload_bytes == 0:
                continue
            factor = 2.0 if row.collective == "allreduce" else 1.0
            out.append(TrafficGroups(groups=mesh_axis_groups(shape, i),
                                     pair_bytes=factor * row.payload_bytes * row.calls_per_step / row.ranks))
    return out
