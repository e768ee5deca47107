"""Simlette as a network model (paper 003, Section 4.3, B.4): ``network=simlette``.

``SimletteNetwork`` implements ``fabrics.network.protocol.NetworkModel``. Every collective in
flight shares one engine (ports, buffers, credits), so concurrent groups and concurrent calls
contend for links and credits. ``advance()`` runs the simulation to the next completion of a
registered call and returns it (and any other call that finished at that instant).

Reuse of repeated collective sets ("episodes"). An *episode* starts when a call is registered
while the network is idle: every earlier call has completed and every credit is back at its
sender, so no packet, queue entry or outstanding credit exists and port state is irrelevant
(all ports are free). The state of the simulator at that instant is therefore the initial
state, up to a shift of time. The episode is then fully described by the sequence of calls
registered during it - collective, groups, payload, schedule - with start times relative to
the episode's start, and by the points where ``advance()`` was called. Simulation is
deterministic, so the completions of an identical sequence are identical (relative to the
start). Completions are cached under that prefix key; a later episode whose registrations
repeat a cached prefix gets its completions without simulating (the 128 identical layers of a
decode step cost one simulation). If the sequence diverges from every cached one, the episode
is re-simulated from its start with all its registrations so far (time-relative simulation
makes the replayed prefix bit-identical) and continues live. Simulation runs in episode-
relative time, so cached and freshly simulated results are the same floats.
Spray pointers start from zero in every episode (part of the initial state).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from collectives.errors import SpecError
from fabrics.network.analytical import SingleLevelParams, native_time_s
from fabrics.network.protocol import (CollectiveCall, Completion, DemandEntry, NetworkReport, check_in_demand,
                                      schedules_by_row)
from fabrics.network.simlette.compiled import engine_kind, make_engine
from fabrics.network.simlette.params import SimletteParams
from fabrics.network.simlette.routing import OcsFabric, RoutedSimFabric, SimFabric
from fabrics.network.simlette.runner import CallRun, Plan, plan_of, plan_of_arrays
from fabrics.network.simlette.selection import (EPS_NATIVE, best_on_topology, build_named, complete_topology,
                                        group_subtopology, native_eps_phases)


@dataclass(frozen=True, slots=True)
class _Reg:
    sig: tuple  # (region, axis, collective, groups, payload_bytes)
    rel_start_s: float


class _Live:
    """The engine of one episode and the calls running on it (episode-relative time)."""

    def __init__(self, net: "SimletteNetwork"):
        self.net = net
        self.engine = make_engine(net.fabric, net.params)
        self.done: list[CallRun] = []
        self.runs: list[CallRun] = []

    def add(self, idx: int, sig: tuple, rel_start_s: float) -> None:
        name, plan, groups, barrier = self.net.resolve(*sig)
        run = CallRun(self.engine, plan, groups, max(rel_start_s, self.engine.env.now), self._on_done, tag=(idx, name),
                      barrier=barrier)
        self.runs.append(run)

    def _on_done(self, run: CallRun) -> None:
        self.done.append(run)
        self.engine.stop = True

    def next_completions(self, skip: set[int]) -> list[CallRun]:
        while True:
            self.engine.run()
            new = [r for r in self.done if r.tag[0] not in skip]
            self.done = []
            if new:
                return new
            if not self.engine.pending():
                raise RuntimeError("simlette: pending collectives can make no progress (no events left)")

    def idle_rel_s(self) -> float:
        ends = [r.end_s for r in self.runs]
        return max(ends + [self.engine.last_credit_return_s])


class SimletteNetwork:
    """NetworkModel backed by the flit-level simulator.

    Two kinds of fabric:

    * **fixed** (``single_eps``, ``all_eps``, ``single_ocs`` with a given Cayley topology): the
      simulator fabric exists from the start; EPS runs the native one-/two-shot schedules on the
      complete graph (or a given logical overlay), OCS the cheapest valid library schedule on the
      group's sub-topology of the circuits.
    * **deployed** (``hybrid``, ``all_ocs``, and ``single_ocs`` without a given topology): the
      fabric depends on the deployment. ``prepare(demand, world)`` lets the fabric-aware
      analytical model (``fabrics.network.analytical.FabricAnalytical`` - ``planner``) place the workers
      and configure the circuits exactly as ``network=analytical`` does (hybrid: balanced placement
      + rack circuits sized to the demand; OCS: the shared-host plan); Simlette then simulates on
      that ``RoutedFabric``. Every call runs the schedule that model chooses for it (hybrid:
      the fastest native schedule; OCS: the plan's schedule for the call's axis, on the plan's
      topology and groups - the cosets of the axis's label bits, Appendix A.1).
    """

    def __init__(self, fabric: SimFabric | None, params: SimletteParams, *, ports: int, rate_Bps: float,
                 eps_hop_latency_s: float | None = None, schedule: str | None = None, logical_topology=None,
                 planner=None, n_accelerators: int | None = None):
        self.fabric = fabric
        self.planner = planner  # FabricAnalytical for deployed fabrics, else None
        self.n_accelerators = n_accelerators if n_accelerators is not None else fabric.n_accelerators
        self.logical_topology = logical_topology  # EPS only: the overlay groups of its size run on
        self.params = params
        self.ports = ports
        self.rate_Bps = rate_Bps
        self.forced_schedule = schedule
        self.hop_latency_s = None
        if fabric is not None:
            # lambda per hop for pricing schedules (Eq. 1): source + link + sink latencies of one path
            if isinstance(fabric, OcsFabric):
                g = fabric.topology.generators[0]
                self.hop_latency_s = params.source_latency_s + sum(fabric.after_s[l] for l in fabric.path(0, g, 0))
            else:
                self.hop_latency_s = eps_hop_latency_s if eps_hop_latency_s is not None else (
                    params.source_latency_s + sum(fabric.after_s[l] for l in fabric.path(0, 1, 0)))
        self._demand: tuple[DemandEntry, ...] | None = None
        self._world: int | None = None
        # explicit keyed caches, one set per deployment (the fixed fabric is deployment None):
        # call signature -> plan, and episode prefix -> (completions, idle_rel or None, stats)
        self._deployments: dict = {}
        self._use_deployment(None, fabric)
        self._plans_by_schedule: dict[tuple, Plan] = {}
        self.cache_hits = 0
        self.simulated_episodes = 0
        self.replayed_episodes = 0
        self.events = 0
        self.sim_wall_s = 0.0
        self._stat_objs: dict[int, tuple[dict, float]] = {}
        self._stat_counts: dict[int, int] = {}
        self._schedules: dict[tuple, object] = {}  # explicit keyed cache: (name, collective, n, topology) -> Schedule
        self.schedules_used: dict[tuple[str, str, str], str] = {}
        self._reset_episode()

    def _use_deployment(self, key, fabric) -> None:
        state = self._deployments.get(key)
        if state is None:
            state = self._deployments[key] = (fabric, {}, {})
        self.fabric, self._plans, self._cache = state

    # --- layer 3: schedules -------------------------------------------------------------------
    def resolve(self, region: str, axis: str, collective: str, groups: tuple[tuple[int, ...], ...],
                payload_bytes: int) -> tuple[str, Plan, tuple, bool]:
        """(schedule name, plan, groups it runs on, group barrier between phases) of a call."""
        key = (region, axis, collective, groups, payload_bytes)
        hit = self._plans.get(key)
        if hit is None:
            if self.planner is not None:
                name, plan, run_groups, native = self._resolve_deployed(region, axis, collective, groups, payload_bytes)
            else:
                name, plan, run_groups, native = self._resolve(collective, groups, payload_bytes)
            sync = self.params.phase_sync
            barrier = sync == "group" or (sync == "auto" and native)
            hit = self._plans[key] = (name, plan, run_groups, barrier)
        return hit

    def _resolve_deployed(self, region, axis, collective, groups, payload_bytes):
        """The schedule, plan and groups the fabric-aware analytical model uses for this call."""
        from fabrics.network.analytical import _planned_phases
        from fabrics.scaleup.native import canonical_collective, native_phases

        call = CollectiveCall(call_id=0, region=region, axis=axis, collective=collective, groups=groups,
                              payload_bytes=payload_bytes)
        _, name = self.planner.price(call)
        n = len(groups[0])
        if name == "none":
            return name, Plan(n_ranks=n, sends=(), incount=()), groups, False
        coll = canonical_collective(collective)
        dep = self.planner.deployment
        if dep.uses_native_schedules:
            skey = ("native", coll, name, n)
            phases = lambda: native_eps_phases(coll, name, n) or native_phases(coll, name, n)  # noqa: E731
        else:
            ax = dep.axes[(region, axis, coll)]
            gens = ax.local_generators()
            skey = ("planned", coll, name, len(ax.bits), gens)
            phases = lambda: _planned_phases(len(ax.bits), gens, name, coll)  # noqa: E731
            groups = tuple(map(tuple, ax.groups(dep.world).tolist()))
        pkey = (skey, payload_bytes)
        plan = self._plans_by_schedule.get(pkey)
        if plan is None:
            plan = self._plans_by_schedule[pkey] = plan_of_arrays(phases(), n, payload_bytes)
        return name, plan, groups, dep.uses_native_schedules

    def _resolve(self, collective, groups, payload_bytes):
        n = len(groups[0])
        if any(len(g) != n for g in groups):
            raise SpecError(f"{collective} groups must all have the same size, got {sorted({len(g) for g in groups})}")
        for g in groups:
            if max(g) >= self.fabric.n_accelerators or min(g) < 0:
                raise SpecError(
                    f"{collective} group uses accelerator {max(g)} but the fabric has {self.fabric.n_accelerators}; "
                    "raise fabric.accelerators or lower world"
                )
        native = False
        if isinstance(self.fabric, OcsFabric):
            topo, p = group_subtopology(self.fabric.topology, groups[0])
            for g in groups[1:]:
                other, _ = group_subtopology(self.fabric.topology, g)
                if other.generators != topo.generators:
                    raise SpecError("OCS groups of one call must see the same circuits; use an aligned mesh axis")
            name = self.forced_schedule or best_on_topology(collective, topo, payload_bytes, self.hop_latency_s,
                                                           self.rate_Bps, p)[0]
        elif self.logical_topology is not None and self.logical_topology.n_ranks == n:
            # EPS carrying a chosen logical topology (e.g. Figure 3's K8xK8xK8 for parallel RS+AG):
            # the schedule follows the topology, the switch routes every transfer in one hop
            topo = self.logical_topology
            name = self.forced_schedule or best_on_topology(collective, topo, payload_bytes, self.hop_latency_s,
                                                           self.ports * self.rate_Bps, 1)[0]
        else:
            topo = complete_topology(n)
            native = True  # the native kernels of the complete graph (Section 3.1)
            if self.forced_schedule:
                name = self.forced_schedule
            elif collective == "allreduce":
                name = native_time_s(SingleLevelParams(hop_latency_s=self.hop_latency_s, link_rate_Bps=self.rate_Bps,
                                                       ports=self.ports), collective, n, payload_bytes)[1]
            else:
                name = EPS_NATIVE.get(collective, "direct")
        if native:
            # the native kernels' send orders (Figures 20 and 21, see native_eps_phases)
            pkey = (("native", collective, name, n), payload_bytes)
            plan = self._plans_by_schedule.get(pkey)
            if plan is None:
                phases = native_eps_phases(collective, name, n)
                if phases is not None:
                    plan = self._plans_by_schedule[pkey] = plan_of_arrays(phases, n, payload_bytes)
            if plan is not None:
                return name, plan, groups, native
        skey = (name, collective, n, topo.describe(), getattr(topo, "multiplicity", 1))
        schedule = self._schedules.get(skey)
        if schedule is None:
            schedule = self._schedules[skey] = build_named(name, collective, topo)
        pkey = (skey, payload_bytes)
        plan = self._plans_by_schedule.get(pkey)
        if plan is None:
            plan = self._plans_by_schedule[pkey] = plan_of(schedule, payload_bytes)
        return name, plan, groups, native

    # --- NetworkModel ---------------------------------------------------------------------------
    def prepare(self, demand: tuple[DemandEntry, ...], world: int) -> None:
        if world > self.n_accelerators:
            raise SpecError(f"world={world} does not fit the fabric's {self.n_accelerators} accelerators")
        self._close_episode()  # keep the statistics of what ran before; the caches stay valid (same fabric)
        self._demand = tuple(demand)
        self._world = int(world)
        if self.planner is not None:
            self.planner.prepare(self._demand, self._world)
            key = (self._demand, self._world)
            state = self._deployments.get(key)
            fabric = state[0] if state is not None else RoutedSimFabric(self.planner.deployment.routed, self.params)
            self._use_deployment(key, fabric)

    # --- the deployment, for results (hybrid and OCS: what the circuits were configured from) ---
    def plan_summary(self) -> dict | None:
        return None if self.planner is None else self.planner.plan_summary()

    @property
    def plan_json(self) -> dict | None:
        return None if self.planner is None else self.planner.plan_json

    def _reset_episode(self) -> None:
        self._origin = 0.0
        self._regs: list[_Reg] = []
        self._calls: list[CollectiveCall] = []
        self._returned: set[int] = set()
        self._advances = 0
        self._live: _Live | None = None
        self._idle_at: float | None = None  # absolute time the current episode is idle (all done, credits back)
        self._ep_stats: tuple[dict, float] | None = None  # (per-link stats, span) once the episode is complete

    def register(self, call: CollectiveCall, earliest_start_s: float) -> None:
        if self.fabric is None:
            raise RuntimeError(f"Simlette on a deployed fabric needs prepare(demand, world) before register: "
                               f"the placement and circuits come from the demand (call {call.call_id})")
        if self._demand is not None:
            check_in_demand(call, self._demand)
        if self._regs and self._idle_at is not None and earliest_start_s >= self._idle_at:
            self._close_episode()
        if not self._regs:
            self._origin = earliest_start_s
        sig = (call.region, call.axis, call.collective, tuple(tuple(g) for g in call.groups), int(call.payload_bytes))
        # relative start on a femtosecond grid: absolute times carry rounding noise that would make
        # identical episodes look different; the simulation itself runs on the rounded value
        reg = _Reg(sig=sig, rel_start_s=round(earliest_start_s - self._origin, 15))
        self._regs.append(reg)
        self._calls.append(call)
        self._idle_at = None
        if self._live is not None:
            self._live.add(len(self._regs) - 1, sig, reg.rel_start_s)

    def advance(self) -> list[Completion]:
        if len(self._returned) == len(self._regs):
            return []
        key = (tuple(self._regs), self._advances)
        self._advances += 1
        hit = self._cache.get(key) if self._live is None else None
        if hit is not None:
            self.cache_hits += 1
            done, idle_rel, stats = hit
        else:
            done, idle_rel, stats = self._simulate_step()
            self._cache[key] = (done, idle_rel, stats)
        out = []
        for idx, name, rel_end in done:
            self._returned.add(idx)
            call = self._calls[idx]
            out.append(Completion(call_id=call.call_id, start_s=self._origin + self._regs[idx].rel_start_s,
                                  end_s=self._origin + rel_end, schedule=name))
            self.schedules_used[(call.region, call.axis, call.collective)] = name
        if idle_rel is not None:
            self._idle_at = self._origin + idle_rel
            self._ep_stats = (stats, idle_rel)
        return out

    def _simulate_step(self):
        t0 = time.perf_counter()
        if self._live is None:
            self._live = _Live(self)
            for idx, reg in enumerate(self._regs):
                self._live.add(idx, reg.sig, reg.rel_start_s)
        live = self._live
        ev0 = live.engine.events
        runs = live.next_completions(self._returned)
        self.events += live.engine.events - ev0
        done = tuple((r.tag[0], r.tag[1], r.end_s) for r in runs)
        finished = {i for i, _, _ in done} | self._returned
        idle_rel, stats = None, None
        if len(finished) == len(self._regs):
            idle_rel = live.idle_rel_s()
            st = live.engine.stats()
            stats = {l: (st["bytes"][l], st["busy_s"][l], st["stall_s"][l]) for l in range(len(st["bytes"]))
                     if st["bytes"][l]}
        self.sim_wall_s += time.perf_counter() - t0
        return done, idle_rel, stats

    def _close_episode(self) -> None:
        if self._regs:
            if self._live is not None:
                self.simulated_episodes += 1
            else:
                self.replayed_episodes += 1
        if self._ep_stats is not None:
            # count identical (cached) episodes instead of summing their per-link stats every time
            key = id(self._ep_stats[0])
            self._stat_objs[key] = self._ep_stats
            self._stat_counts[key] = self._stat_counts.get(key, 0) + 1
        self._reset_episode()

    # --- reporting ------------------------------------------------------------------------------
    def report(self) -> NetworkReport:
        return NetworkReport(model="simlette", schedules=schedules_by_row(self.schedules_used),
                             plan_summary=self.plan_summary(), plan_json=self.plan_json,
                             details=self.simulation_report())

    def simulation_report(self, top: int = 8) -> dict:
        """What results.json carries: events, wall time, reuse, link utilisation, credit stalls."""
        acc = _Totals()
        for key, count in self._stat_counts.items():
            _add_stats(acc, *self._stat_objs[key], count=count)
        if self._ep_stats is not None:
            _add_stats(acc, *self._ep_stats)
        span = acc.span_s
        util = {l: (busy / span if span > 0 else 0.0) for l, busy in acc.link_busy_s.items()}
        busiest = sorted(util, key=lambda l: (-util[l], l))[:top]
        stalls = {l: s for l, s in acc.link_stall_s.items() if s > 0}
        worst = sorted(stalls, key=lambda l: (-stalls[l], l))[:top]
        return {
            "mode": self.params.mode,
            "buffer_bytes": self.params.buffer_bytes,
            "engine": engine_kind(),
            "events": self.events,
            "sim_wall_s": self.sim_wall_s,
            "episodes_simulated": self.simulated_episodes + (1 if self._regs and self._live is not None else 0),
            "episodes_reused": self.replayed_episodes + (1 if self._regs and self._live is None else 0),
            "cache_hits": self.cache_hits,
            "simulated_span_s": span,
            "link_utilisation": {
                "links_used": len(util),
                "max": max(util.values(), default=0.0),
                "mean_over_used": (sum(util.values()) / len(util)) if util else 0.0,
                "busiest": [{"link": self.fabric.names[l], "utilisation": util[l], "bytes": acc.link_bytes[l]}
                            for l in busiest],
            },
            "credit_stall_s": {
                "total": sum(stalls.values()),
                "max_per_port": max(stalls.values(), default=0.0),
                "ports_stalled": len(stalls),
                "worst": [{"link": self.fabric.names[l], "stall_s": stalls[l]} for l in worst],
            },
            "schedules": {"/".join(k): v for k, v in self.schedules_used.items()},
        }


class _Totals:
    def __init__(self):
        self.span_s = 0.0
        self.link_bytes: dict[int, int] = {}
        self.link_busy_s: dict[int, float] = {}
        self.link_stall_s: dict[int, float] = {}


def _add_stats(acc, stats: dict, span_s: float, count: int = 1) -> None:
    acc.span_s += span_s * count
    for l, (b, busy, stall) in stats.items():
        acc.link_bytes[l] = acc.link_bytes.get(l, 0) + b * count
        acc.link_busy_s[l] = acc.link_busy_s.get(l, 0.0) + busy * count
        acc.link_stall_s[l] = acc.link_stall_s.get(l, 0.0) + stall * count
