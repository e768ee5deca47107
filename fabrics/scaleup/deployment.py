"""A fabric prepared for one deployment: allocation, circuits and schedules from its demand
(paper 003, Section 3.3, Appendix A.1-A.2, C.7; the network model's ``prepare``, B.4).

``prepare_fabric(fabric, demand, world)`` does what happens before serving starts:

* **EPS** (``single_eps``, ``all_eps``): ranks on accelerators in order (racks hold consecutive
  ranks, the all-EPS baseline); nothing to configure — dynamic routing sprays over rails and
  uplinks. Collectives run the native schedules (``fabrics.scaleup.native``).
* **hybrid**: workers are placed to balance the level-2 demand (``balanced_hybrid_allocation``
  over ``traffic_from_demand``), then the level-2 OCS gets rack-to-rack circuits sized to that
  demand, identical on every rail (``hybrid_for_demand``, C.7). Collectives run the same native
  schedules as all-EPS ("otherwise relies on the same collective operations as implemented by
  current inference frameworks", C.7).
* **OCS** (``single_ocs``, ``all_ocs``): the shared-host planner turns the demand into a plan
  (``request_from_demand`` → ``plan``, cached by request hash); its generators become circuits on
  every port (``configure_ocs``); each demand row runs the schedule the plan chose for its axis on
  the axis's planned topology. The planner assigns rank-label bits to mesh axes (A.1): an axis's
  groups are the cosets of its bit block, and rank r sits on accelerator r (label = rank).

The result is a value (``DeploymentFabric``) with the routed fabric, its vectorised pricer, the
plan and the JSON written as ``plan.json``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Sequence

import numpy as np

from collectives.errors import SpecError
from fabrics.scaleup.native import canonical_collective
from fabrics.network.protocol import DemandEntry
from fabrics.scaleup.phase_pricing import PhasePricer
from fabrics.scaleup.physical import OCS, PhysicalFabric
from fabrics.scaleup.allocation import balanced_hybrid_allocation, linear_allocation, rack_demand_bytes
from fabrics.scaleup.ocs_configuration import configure_ocs, hybrid_configuration
from fabrics.scaleup.paths import RoutedFabric, route


@dataclass(frozen=True, slots=True, kw_only=True)
class AxisSchedule:
    """How an OCS plan runs one demand row: the axis's label bits, host generators and schedule."""

    key: tuple[str, str, str]  # (region, axis, collective) of the demand row
    bits: tuple[int, ...]
    generators: tuple[int, ...]  # host masks
    schedule: str
    topology: str
    multiplicity: int

    def local_generators(self) -> tuple[int, ...]:
        from fabrics.planner.axis_cost import compress

        return tuple(sorted({compress(g, self.bits) for g in self.generators}))

    def groups(self, world: int) -> np.ndarray:
        """Cosets of the axis's bit block, one row per group, columns in local label order."""
        from fabrics.planner.axis_cost import expanded_masks

        block = sum(1 << b for b in self.bits)
        offsets = np.array(expanded_masks(self.bits), dtype=np.int64)  # every local label, in order
        labels = np.arange(world, dtype=np.int64)
        bases = labels[(labels & block) == 0]
        return bases[:, None] | offsets[None, :]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class DeploymentFabric:
    routed: RoutedFabric
    pricer: PhasePricer
    world: int
    plan: object | None = None  # fabrics.planner.Plan (OCS fabrics)
    axes: dict = field(default_factory=dict)  # demand key -> AxisSchedule (OCS fabrics)
    plan_json: dict | None = None  # hybrid and OCS fabrics

    @property
    def kind(self) -> str:
        return self.routed.spec.kind

    @property
    def uses_native_schedules(self) -> bool:
        return self.routed.spec.level1_kind != OCS


# (fabric, world, circuit configuration) -> (RoutedFabric, PhasePricer): what a deployment prices
# on depends only on these, not on its demand rows, so the splits of a search that are planned to
# the same port permutations (OCS; ~28 distinct in 72 Megatron 5T splits), that get the same
# placement and rack circuits (hybrid) or that share an EPS fabric reuse one routed fabric and
# its memoised schedule prices. Explicit, keyed, LRU; clear_routed_cache() is always safe.
# Memory: ≈ 10 MB an entry at 512 accelerators (measured: +0.3 GB RSS with 32 entries full).
_ROUTED: OrderedDict = OrderedDict()
_ROUTED_KEEP = 32


def _keyed(cache: OrderedDict, keep: int, fabric: PhysicalFabric, key: tuple, build):
    """``cache[(id(fabric), *key)]``, built by ``build()`` when absent (holding ``fabric`` keeps
    its id from being reused while it is a key); oldest out beyond ``keep``."""
    full = (id(fabric), *key)
    hit = cache.get(full)
    if hit is not None and hit[0] is fabric:
        cache.move_to_end(full)
        return hit[1]
    value = build()
    cache[full] = (fabric, value)
    while len(cache) > keep:
        cache.popitem(last=False)
    return value


def _routed_pricer(fabric: PhysicalFabric, world: int, circuits, build):
    """The cached (routed, pricer) for ``fabric`` with ``world`` ranks and ``circuits`` (a hashable
    description of the OCS configuration ``build()`` makes the routed fabric from)."""
    def routed_and_pricer():
        routed = build()
        return routed, PhasePricer(routed)

    return _keyed(_ROUTED, _ROUTED_KEEP, fabric, (world, circuits), routed_and_pricer)


def clear_routed_cache() -> None:
    _ROUTED.clear()
    _mesh_axis_array.cache_clear()
    _HYBRID.clear()
    _HYBRID_OCS.clear()


def planning_demand(demand: Sequence[DemandEntry]) -> tuple[DemandEntry, ...]:
    """Demand rows as the planner sees them (alltoallv priced as its uniform all-to-all)."""
    return tuple(replace(r, collective=canonical_collective(r.collective)) for r in demand)


def _active(demand: Sequence[DemandEntry]) -> bool:
    return any(r.collective != "none" and r.ranks > 1 and r.payload_bytes > 0 and r.calls_per_step > 0
               for r in demand)


def prepare_fabric(fabric: PhysicalFabric, demand: Sequence[DemandEntry], world: int, *,
                   planner_hop_latency_s: float | None = None, allocation: str = "shared_host",
                   schedule: str = "auto") -> DeploymentFabric:
    """``schedule`` other than auto is forced on every axis whose collective it implements; on OCS
    fabrics the planner then plans the topology for that schedule (MeshRequest.schedules)."""
    spec = fabric.spec
    if world > spec.accelerators:
        raise SpecError(f"world={world} ranks do not fit the {spec.accelerators} accelerators of fabric "
                        f"{spec.kind}; raise fabric.accelerators or lower world")
    demand = planning_demand(demand)
    if spec.level1_kind == OCS:
        return _prepare_ocs(fabric, demand, world, planner_hop_latency_s, allocation, schedule)
    if spec.kind == "hybrid":
        return _prepare_hybrid(fabric, demand, world)
    routed, pricer = _routed_pricer(fabric, world, "eps", lambda: route(fabric, linear_allocation(world)))
    return DeploymentFabric(routed=routed, pricer=pricer, world=world)


def demand_step_time_s(pricer: PhasePricer, demand, world: int) -> float:
    """Σ calls·T over the demand rows with the best native schedule each (row-major region meshes,
    as ``gxnet.parallel`` numbers ranks): the predicted communication time of one step."""
    from fabrics.scaleup.native import native_phases, native_schedules
    from fabrics.planner.demand import _region_meshes

    total = 0.0
    for shape, cells in _region_meshes(demand, world):
        for i, row in enumerate(cells):
            if row is None or row.collective == "none" or row.ranks < 2 or row.calls_per_step == 0:
                continue
            groups = _mesh_axis_array(tuple(shape), i)
            best = min(pricer.schedule_line(native_phases(row.collective, name, row.ranks), groups)
                       .time_s(row.payload_bytes) for name in native_schedules(row.collective))
            total += row.calls_per_step * best
    return total


@lru_cache(maxsize=256)  # explicit keyed cache: (mesh shape, axis) -> its groups; the splits of a search share them
def _mesh_axis_array(shape: tuple[int, ...], axis: int) -> np.ndarray:
    """``mesh_axis_groups`` as a read-only (groups × ranks) array."""
    from fabrics.planner.demand import mesh_axis_groups

    groups = np.asarray(mesh_axis_groups(shape, axis), dtype=np.int64)
    groups.flags.writeable = False
    return groups


# Hybrid deployments, explicit and keyed, safe to clear (clear_routed_cache clears them too):
# (fabric, world, planning demand) -> DeploymentFabric: a search's cells that differ only in
# context have the same demand per split (the 32K and 5M cells run in one process);
# (fabric, circuit counts) -> OcsConfiguration: the candidates of a search land on a handful of
# distinct rack circuit sets (7 in the 5 × 72 Megatron 5T splits).
_HYBRID: OrderedDict = OrderedDict()
_HYBRID_KEEP = 512
_HYBRID_OCS: OrderedDict = OrderedDict()
_HYBRID_OCS_KEEP = 64


def _hybrid_candidate(fabric: PhysicalFabric, alloc, traffic, world: int):
    from fabrics.scaleup.circuit_sizing import rack_circuit_counts, rack_circuits

    rack_demand = rack_demand_bytes(alloc.rack_of_rank(fabric), traffic, fabric.spec.racks)
    counts = rack_circuit_counts(rack_demand, fabric.spec.up_ports)  # hybrid_for_demand, its configuration kept
    ocs = _keyed(_HYBRID_OCS, _HYBRID_OCS_KEEP, fabric, (counts.shape, counts.tobytes()),
                 lambda: hybrid_configuration(fabric, rack_circuits(counts, fabric.spec.up_ports)))
    routed, pricer = _routed_pricer(fabric, world, ("hybrid", alloc.accelerators, ocs.rack.targets),
                                    lambda: route(fabric, alloc, ocs))
    return routed, pricer, ocs, rack_demand


def _prepare_hybrid(fabric: PhysicalFabric, demand, world: int) -> DeploymentFabric:
    return _keyed(_HYBRID, _HYBRID_KEEP, fabric, (world, tuple(demand)),
                  lambda: _place_hybrid(fabric, demand, world))


def _place_hybrid(fabric: PhysicalFabric, demand, world: int) -> DeploymentFabric:
    """C.7's placement balances level-2 bytes (``balanced_hybrid_allocation``); bytes alone ignore
    that a group moved off its rack pays two more switched stages per phase, so the balanced
    placement is compared with the rack-contiguous one by the model's own predicted step
    communication time and the faster is kept (ties: the balanced one, as in the paper)."""
    from fabrics.planner.demand import traffic_from_demand

    traffic = traffic_from_demand(demand, world) if _active(demand) else []
    candidates = []
    for alloc in (balanced_hybrid_allocation(fabric, world, traffic), linear_allocation(world)):
        if any(alloc.accelerators == c[0].accelerators for c in candidates):
            continue
        routed, pricer, ocs, rack_demand = _hybrid_candidate(fabric, alloc, traffic, world)
        t = demand_step_time_s(pricer, demand, world) if traffic else 0.0
        candidates.append((alloc, routed, ocs, rack_demand, pricer, t))
    alloc, routed, ocs, rack_demand, pricer, _ = min(candidates, key=lambda c: c[5])
    counts = ocs.rack.counts(fabric.spec.racks)
    plan_json = {
        "fabric": "hybrid",
        "world": world,
        "allocation": alloc.name,
        "placements": [{"allocation": c[0].name, "communication_s_per_step": c[5]} for c in candidates],
        "accelerators": list(alloc.accelerators),
        "rack_size": fabric.spec.rack_size,
        "up_ports": fabric.spec.up_ports,
        "rack_demand_bytes_per_step": rack_demand.tolist(),
        "rack_circuits": counts.tolist(),
        "uplink_targets": [list(row) for row in ocs.rack.targets],
        "circuits": int(counts.sum()) * fabric.spec.ports,
    }
    return DeploymentFabric(routed=routed, pricer=pricer, world=world, plan_json=plan_json)


def _forced(request, schedule: str):
    """The request with ``schedule`` on every active axis whose collective it implements."""
    from collectives.schedules import SCHEDULES

    served = set(SCHEDULES.get(schedule).collectives)
    meshes = tuple(replace(m, schedules=tuple(schedule if c in served else s for c, s in zip(m.collectives, m.schedules)))
                   for m in request.meshes)
    return replace(request, meshes=meshes)


def _prepare_ocs(fabric: PhysicalFabric, demand, world: int, hop_latency_s: float | None,
                 allocation: str, schedule: str = "auto") -> DeploymentFabric:
    from fabrics.planner import plan as make_plan
    from fabrics.planner import request_from_demand

    spec = fabric.spec
    alloc = linear_allocation(world)
    if not _active(demand):
        routed = route(fabric, alloc, configure_ocs(fabric, alloc, ()))
        return DeploymentFabric(routed=routed, pricer=PhasePricer(routed), world=world,
                                plan_json={"fabric": spec.kind, "world": world, "axes": [], "note": "no collectives"})
    if allocation != "shared_host":
        raise SpecError(f"fabric.allocation={allocation!r}: the network model configures circuits from a "
                        "shared-host plan only; use allocation=shared_host (stacked_link: gx plan)")
    lam = hop_latency_s if hop_latency_s is not None else spec.latency.path_latency_s(eps_hops=0, ocs_passes=1)
    request, where = request_from_demand(demand, world=world, ports=spec.ports, link_rate_Bps=spec.link_rate_Bps,
                                         hop_latency_s=lam, allocation="shared_host")
    if schedule != "auto":
        request = _forced(request, schedule)
    plan = make_plan(request)
    by_index = {(a.mesh, a.axis): a for a in plan.axes}
    axes = {}
    for key, (mesh, axis) in where.items():
        a = by_index[(mesh, axis)]
        axes[key] = AxisSchedule(key=key, bits=tuple(a.bits), generators=tuple(a.generators), schedule=a.schedule,
                                 topology=a.topology, multiplicity=a.multiplicity)
    routed, pricer = _routed_pricer(fabric, world, ("ocs", plan.port_masks),
                                    lambda: route(fabric, alloc, configure_ocs(fabric, alloc, plan.port_permutations())))
    plan_json = {"fabric": spec.kind, "world": world, "hop_latency_s": lam, **plan.to_json(),
                 "rows": [{"region": k[0], "axis": k[1], "collective": k[2], "mesh": m, "mesh_axis": i}
                          for k, (m, i) in where.items()]}
    return DeploymentFabric(routed=routed, pricer=pricer, world=world, plan=plan, axes=axes,
                            plan_json=plan_json)


__all__ = ["AxisSchedule", "DeploymentFabric", "planning_demand", "prepare_fabric"]
