"""Analytical (Hockney) network models: single-level (``AnalyticalSingleLevel``) and on any
physical fabric (``FabricAnalytical``, Section 5.4 — see its docstring and README.md).

Single-level packet-switched fabric (``AnalyticalSingleLevel``, ``network.model=single_level``):

This is the first network model of the spine (paper 003, Eq. 1 and Appendix C.2): a phase
costs one switched-hop latency λ plus its bottleneck bytes over the bandwidth available to
them, T = Σ_k (λ + max_e b_{k,e} / (p·R)). On a single-level EPS every accelerator reaches
every other through one switch hop and sprays its traffic over all of its L ports, so the
bottleneck of a phase is the per-rank egress bytes over L·R.

Schedules are the *native* ones of current frameworks (Section 3.1: TensorRT-LLM chooses
between one-shot and two-shot all-reduce; its MoE all-to-all is one-shot):
- all-reduce: one-shot (1 phase, each rank sends its whole buffer σ to the N-1 others) or
  two-shot (reduce-scatter then all-gather, 2 phases of (N-1)/N·σ each); the cheaper one is
  used, which is what the size-keyed tables of TensorRT-LLM approximate;
- all-to-all, all-gather, reduce-scatter: one-shot (1 phase, (N-1)/N·σ out of each rank,
  σ being the full per-rank buffer: the gathered result for all-gather, the input for
  reduce-scatter and all-to-all).

Each collective is priced independently (no contention between concurrent groups), as the
paper's analytical backend does (B.4); Simlette is the model that captures contention.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from collectives.errors import SpecError
from fabrics.network.protocol import (CollectiveCall, Completion, DemandEntry, IndependentCalls, NetworkReport,
                                      check_in_demand, schedules_by_row)


@dataclass(frozen=True, slots=True, kw_only=True)
class SingleLevelParams:
    hop_latency_s: float  # λ per switched hop (0.81 µs through one EPS switch, Table 9)
    link_rate_Bps: float  # R per port, one direction
    ports: int  # L ports per accelerator

    def __post_init__(self) -> None:
        if self.hop_latency_s < 0:
            raise SpecError(f"hop_latency={self.hop_latency_s} s must be non-negative")
        if self.link_rate_Bps <= 0:
            raise SpecError(f"link_rate={self.link_rate_Bps} B/s must be positive")
        if self.ports < 1:
            raise SpecError(f"ports={self.ports} must be at least 1")


def native_phase_bytes(collective: str, schedule: str, n_ranks: int, sigma_bytes: int) -> tuple[float, ...]:
    """Per-rank egress bytes of each phase of a native schedule on a full crossbar."""
    n = n_ranks
    if n <= 1 or collective == "none":
        return ()
    share = (n - 1) / n * sigma_bytes
    if collective == "allreduce":
        if schedule == "one_shot":
            return ((n - 1) * float(sigma_bytes),)
        if schedule == "two_shot":
            return (share, share)
    elif collective in ("alltoall", "allgather", "reducescatter", "alltoallv") and schedule in ("one_shot", "direct"):
        return (share,)
    raise SpecError(f"schedule {schedule!r} is not a native schedule for {collective}")


NATIVE_SCHEDULES = {
    "allreduce": ("one_shot", "two_shot"),
    "alltoall": ("one_shot",),
    "alltoallv": ("one_shot",),
    "allgather": ("one_shot",),
    "reducescatter": ("one_shot",),
}


def native_time_s(params: SingleLevelParams, collective: str, n_ranks: int, sigma_bytes: int) -> tuple[float, str]:
    """Best native schedule's Hockney time (Eq. 1); ties keep the first listed schedule."""
    if n_ranks <= 1 or collective == "none":
        return 0.0, "none"
    if collective not in NATIVE_SCHEDULES:
        raise SpecError(f"collective {collective!r} has no native schedule; choose one of {sorted(NATIVE_SCHEDULES)}")
    best: tuple[float, str] | None = None
    bandwidth = params.ports * params.link_rate_Bps
    for name in NATIVE_SCHEDULES[collective]:
        phases = native_phase_bytes(collective, name, n_ranks, sigma_bytes)
        t = sum(params.hop_latency_s + b / bandwidth for b in phases)
        if best is None or t < best[0]:
            best = (t, name)
    assert best is not None
    return best


class AnalyticalSingleLevel(IndependentCalls):
    """NetworkModel: each registered collective completes at start + its Hockney time."""

    def __init__(self, params: SingleLevelParams):
        self.params = params
        self._demand: tuple[DemandEntry, ...] = ()
        self._pending: list[Completion] = []
        self._price_cache: dict[tuple[str, int, int], tuple[float, str]] = {}
        self.schedules_used: dict[tuple[str, str, str], str] = {}

    def prepare(self, demand: tuple[DemandEntry, ...], world: int) -> None:
        self._demand = tuple(demand)
        self._pending = []
        self.schedules_used = {}

    def price(self, collective: str, n_ranks: int, sigma_bytes: int) -> tuple[float, str]:
        key = (collective, n_ranks, sigma_bytes)
        hit = self._price_cache.get(key)
        if hit is None:
            hit = self._price_cache[key] = native_time_s(self.params, collective, n_ranks, sigma_bytes)
        return hit

    def call_price(self, call: CollectiveCall) -> tuple[float, str]:
        check_in_demand(call, self._demand)
        return self.price(call.collective, len(call.groups[0]), call.payload_bytes)


# ---------------------------------------------------------------------------------------------
# Fabric-aware analytical model (paper 003, Section 5.4, Appendix C.2, C.7)
# ---------------------------------------------------------------------------------------------

_PREPARED_KEEP = 4  # deployments whose prepared fabric (routing, circuits, prices) is kept


@lru_cache(maxsize=128)  # explicit keyed cache: (n_bits, local generators, schedule, collective) -> arrays
def _planned_phases(n_bits: int, generators: tuple[int, ...], schedule: str, collective: str):
    from collectives.schedules import SCHEDULES
    from collectives.schedules.arrays import schedule_arrays
    from collectives.topology import CayleyTopology
    from fabrics.scaleup.native import PhaseArrays, library_phases

    topo = CayleyTopology(n_bits=n_bits, generators=generators)
    entry = SCHEDULES.get(schedule)
    reason = entry.why_invalid(topo, collective)
    if reason is not None:
        raise SpecError(f"schedule={schedule} cannot run {collective} on the planned topology {topo.describe()}: "
                        f"{reason}; use schedule=auto")
    arrays = schedule_arrays(schedule, collective, topo)  # the same arrays, without Transfer objects
    if arrays is not None:
        return tuple(PhaseArrays(src=src, dst=dst, fraction=fraction) for src, dst, fraction in arrays)
    return library_phases(entry.build(topo, collective))


def planned_schedule_names(n_bits: int, generators: tuple[int, ...], collective: str) -> list[str]:
    """Every library schedule valid for ``collective`` on a planned axis topology."""
    from collectives.schedules import SCHEDULES, schedules_for
    from collectives.topology import CayleyTopology

    topo = CayleyTopology(n_bits=n_bits, generators=generators)
    return [n for n in schedules_for(collective) if SCHEDULES.get(n).valid(topo, collective)]


def clear_fabric_caches() -> None:
    """Empty the keyed caches of the fabric model (schedule arrays); always safe."""
    from fabrics.scaleup.native import native_phases

    _planned_phases.cache_clear()
    native_phases.cache_clear()


class FabricAnalytical(IndependentCalls):
    """NetworkModel on a physical fabric: every collective is a schedule priced phase by phase.

    A phase costs the latency of its slowest path plus its bottleneck bytes over the capacity they
    share (``RoutedFabric.phase_cost``, vectorised in ``fabrics.scaleup.phase_pricing``): accelerator
    injection over all L sprayed ports, a rack's level-2 capacity (4:1 on all-EPS and hybrid),
    hybrid rack circuits, OCS circuits with their multiplicity. All concurrent groups of a call are
    priced together, so groups that meet on the same rack uplinks slow each other down.

    * EPS fabrics (``single_eps``, ``all_eps``, ``hybrid``): native schedules
      (``fabrics.scaleup.native``), the one with the lowest predicted time at the call's size
      (``schedule="auto"``) or the forced one.
    * OCS fabrics (``single_ocs``, ``all_ocs``): ``prepare`` plans the circuits from the
      deployment demand (shared-host planner); each call runs the schedule the plan chose for its
      axis (or the forced one) on the planned topology.

    Prices are cached per (call structure, schedule) as a line T(σ) = Σλ + σ·Σs, and per payload,
    so the 128 identical layers of a decode step cost one pricing each. ``prepare`` keeps the last
    few deployments' prepared fabrics (keyed by demand), so re-evaluating a deployment is cheap.
    """

    name = "analytical"

    def __init__(self, fabric, *, schedule: str = "auto", planner_hop_latency_s: float | None = None,
                 allocation: str = "shared_host"):
        self.fabric = fabric
        self.schedule = str(schedule)
        self.planner_hop_latency_s = planner_hop_latency_s
        self.allocation = allocation
        self._prepared: OrderedDict = OrderedDict()  # (demand, world) -> (DeploymentFabric, lines, prices)
        self.deployment = None
        self._demand: tuple[DemandEntry, ...] = ()
        self._lines: dict = {}
        self._prices: dict = {}
        self._pending: list[Completion] = []
        self.schedules_used: dict[tuple[str, str, str], str] = {}

    # -- protocol ---------------------------------------------------------------------------
    def prepare(self, demand: tuple[DemandEntry, ...], world: int) -> None:
        from fabrics.scaleup.deployment import prepare_fabric

        key = (tuple(demand), int(world))
        state = self._prepared.get(key)
        if state is None:
            dep = prepare_fabric(self.fabric, demand, world, planner_hop_latency_s=self.planner_hop_latency_s,
                                 allocation=self.allocation, schedule=self.schedule)
            state = (dep, {}, {})
            self._prepared[key] = state
            while len(self._prepared) > _PREPARED_KEEP:
                self._prepared.popitem(last=False)
        else:
            self._prepared.move_to_end(key)
        self.deployment, self._lines, self._prices = state
        self._demand = key[0]
        self._pending = []
        self.schedules_used = {}

    def call_price(self, call: CollectiveCall) -> tuple[float, str]:
        return self.price(call)

    def report(self) -> NetworkReport:
        return NetworkReport(model=self.name, schedules=schedules_by_row(self.schedules_used),
                             plan_summary=self.plan_summary(), plan_json=self.plan_json)

    def pricer(self):
        """What prices this deployment's phases (the flow-level model substitutes its own)."""
        return self.deployment.pricer

    # -- pricing ----------------------------------------------------------------------------
    def price(self, call: CollectiveCall) -> tuple[float, str]:
        """(completion time, schedule) of one call; raises outside the declared demand (B.4)."""
        if self.deployment is None:
            raise RuntimeError("FabricAnalytical.prepare(demand, world) must run before register")
        skey = (call.region, call.axis, call.collective, len(call.groups), len(call.groups[0]))
        pkey = (skey, call.payload_bytes)
        hit = self._prices.get(pkey)
        if hit is not None and hit[0] is call.groups:
            return hit[1]
        lines = self.schedule_lines(call)
        if not lines:
            result = (0.0, "none")
        else:
            name = min(lines, key=lambda n: (lines[n].time_s(call.payload_bytes), _native_rank(n)))
            result = (lines[name].time_s(call.payload_bytes), name)
        self._prices[pkey] = (call.groups, result)
        return result

    def schedule_lines(self, call: CollectiveCall, *, every_schedule: bool = False) -> dict:
        """{schedule: ScheduleLine} the model chooses from for this call (auto: the native set on EPS,
        the plan's schedule on OCS; ``every_schedule``: every valid library schedule on OCS)."""
        from fabrics.scaleup.native import canonical_collective, native_phases, native_schedules

        skey = (call.region, call.axis, call.collective, len(call.groups), len(call.groups[0]), every_schedule)
        hit = self._lines.get(skey)
        if hit is not None and (hit[0] is call.groups or hit[0] == call.groups):
            return hit[1]
        check_in_demand(call, self._demand)
        dep = self.deployment
        collective = canonical_collective(call.collective)
        n = len(call.groups[0])
        lines: dict = {}
        if n > 1 and collective != "none":
            if dep.uses_native_schedules:
                names = native_schedules(collective) if self.schedule == "auto" else (self.schedule,)
                groups = np.asarray(call.groups, dtype=np.int64)
                for name in names:
                    lines[name] = self.pricer().schedule_line(native_phases(collective, name, n), groups)
            else:
                lines = self._planned_lines(call, collective, every_schedule)
        self._lines[skey] = (call.groups, lines)
        return lines

    def _planned_lines(self, call: CollectiveCall, collective: str, every_schedule: bool) -> dict:
        dep = self.deployment
        ax = dep.axes.get((call.region, call.axis, collective))
        if ax is None:
            if call.payload_bytes == 0:
                return {}
            raise SpecError(f"collective {call.collective} on axis {call.axis} in region {call.region} has no "
                            "circuits in the OCS plan (its demand row carries no payload)")
        if len(call.groups[0]) != 1 << len(ax.bits):
            raise SpecError(f"call on axis {call.axis} has groups of {len(call.groups[0])} ranks but the plan's axis "
                            f"has {1 << len(ax.bits)}")
        gens = ax.local_generators()
        if every_schedule:
            names = planned_schedule_names(len(ax.bits), gens, collective)
        else:
            names = [ax.schedule if self.schedule == "auto" else self.schedule]
        groups = ax.groups(dep.world)
        pricer = self.pricer()
        return {name: pricer.schedule_line(_planned_phases(len(ax.bits), gens, name, collective), groups)
                for name in names}

    # -- reporting --------------------------------------------------------------------------
    @property
    def plan_json(self) -> dict | None:
        return None if self.deployment is None else self.deployment.plan_json

    def plan_summary(self) -> dict | None:
        """A short view of the deployment's plan for results.json (hybrid and OCS fabrics)."""
        dep = self.deployment
        if dep is None or dep.plan_json is None:
            return None
        pj = dep.plan_json
        if dep.plan is not None:
            return {"fabric": dep.kind, "total_time_s": pj["total_time_s"], "host_degree": pj["host_degree"],
                    "ports_used": pj["ports_used"], "ports": pj["ports"], "request_hash": pj["request_hash"],
                    "axes": [{"region": k[0], "axis": k[1], "collective": k[2], "topology": a.topology,
                              "degree": len(a.generators), "multiplicity": a.multiplicity, "schedule": a.schedule}
                             for k, a in dep.axes.items()]}
        if "rack_circuits" in pj:
            counts = np.asarray(pj["rack_circuits"])
            return {"fabric": dep.kind, "allocation": pj["allocation"], "circuits": pj["circuits"],
                    "rack_pairs_connected": int((counts > 0).sum()), "max_circuits_per_rack_pair": int(counts.max())}
        return {"fabric": dep.kind}


def _native_rank(name: str) -> int:
    """Ties between equally fast schedules go to the simpler one (TensorRT-LLM's order)."""
    order = ("one_shot", "direct", "two_shot", "halving_doubling")
    return order.index(name) if name in order else len(order)
