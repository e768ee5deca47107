"""PCIe cluster as a GXNET fabric: a ``NetworkModel`` for ``fabric=pcie`` (papers 000 and 003).

Every collective a GXNET plan registers is turned into a schedule of activations of lanes on
concrete PCIe / NIC paths and timed by the contention-aware flow-level evaluator of
``fabrics/pcie`` (max-min sharing of every directed resource, activations one after another,
a fixed overhead λ per activation):

- ``alltoallv`` (expert dispatch / combine, per-call demand matrix on ``CollectiveCall.demand``):
  planned by the configured AlltoAllv scheduler (``variopath``, ``nccl``, ``fast``, ``deepep``,
  ...), checked by the validity checker (Σ X(E) = D, channels contention-free), then evaluated.
  The per-invocation planning cost is charged on the critical path before the data moves
  (paper 000, Section 6.4: online planning per invocation): either the scheduler's own
  wall-clock measurement (``planning=measured``, not bit-reproducible) or a configured cost per
  emitted activation (``planning=per_activation``, the default; paper 000 Table 4 reports
  3.2-78 µs per activation in C++) or nothing (``planning=none``). Static schedules (``nccl``,
  ``deepep``: fixed peer order computed once at communicator setup) pay no online planning.
- NCCL-like pricing (``PcieNetworkParams.nccl``: the ``pcie_server`` generation of
  conf/network/nccl.yaml, set by the config edge for every ``fabric=pcie`` run): the collectives
  NCCL runs -- every non-AlltoAllv collective whatever the scheduler (VarioPath replaces only the
  AlltoAllv, paper 000), and the AlltoAllv itself under ``scheduler=nccl`` (the PCIe NCCL
  baseline: the static pairwise exchange) -- are priced by ``fabrics.network.nccl.pcie``: the
  evaluator's completion with every lane at its NCCL transport's efficiency (P2P under a switch,
  SHM through host memory, NET), plus NCCL's base and per-step latency; their schedule is
  "<algorithm>/<protocol>" ("p2p/simple", "ring/ll"). Without it (``nccl=None``) they are ideal.
- the other collectives use NCCL's native schedules on each pair's nearest path (the path NCCL
  picks at setup): all-gather and reduce-scatter as a ring (N-1 steps of σ/N), all-reduce as a
  ring reduce-scatter + all-gather (2(N-1) steps), all-to-all as pairwise exchange (step k:
  i -> i+k). All concurrent groups of a call share one evaluation, so their contention shows.

Plans and evaluations are cached per demand (a uniform routing repeats one matrix per layer).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from collectives.alltoallv.activations import Activation, AlltoallvSchedule, Lane
from collectives.alltoallv.schedulers import SCHEDULERS, make_scheduler
from collectives.alltoallv.validity import check_schedule
from collectives.errors import SpecError
from fabrics.network.protocol import (CollectiveCall, Completion, DemandEntry, NetworkReport, check_in_demand,
                                      schedules_by_row)
from fabrics.pcie.evaluator import evaluate, run_stage
from fabrics.pcie.paths import channel_topology
from fabrics.pcie.platform import PcieCluster

PLANNING_MODES = ("per_activation", "measured", "none")
STATIC_SCHEDULERS = frozenset({"nccl", "deepep"})  # peer order fixed at setup, nothing to plan online


@dataclass(frozen=True, slots=True, kw_only=True)
class PcieNetworkParams:
    scheduler: str = "variopath"
    scheduler_params: dict = field(default_factory=dict, compare=False)
    activation_overhead_s: float = 0.0  # λ per activation (paper 000, Section 3 execution model)
    planning: str = "per_activation"
    planning_cost_per_activation_s: float = 20e-6  # paper 000 Table 4: 20.6 µs at 16 GPUs, 21.1 at 32
    catalog_dir: str | None = None  # VarioPath catalog cache directory, as configured (pipelines/network.py makes `catalogs` of it)
    catalogs: object = field(default=None, compare=False)  # VarioPath catalog source (pipelines/catalog_cache.py); None: built in memory
    validate: bool = True
    # the NCCL-like parameters (fabrics.network.nccl.params.Generation) of the collectives NCCL runs: the
    # non-AlltoAllv collectives, and the AlltoAllv under scheduler=nccl (None: the ideal flow evaluator)
    nccl: object = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.scheduler not in SCHEDULERS:
            raise SpecError(f"scheduler={self.scheduler!r} is not an AlltoAllv scheduler; choose one of: {', '.join(SCHEDULERS.names())}")
        if self.planning not in PLANNING_MODES:
            raise SpecError(f"fabric.planning={self.planning!r}; choose one of: {', '.join(PLANNING_MODES)}")
        for f in ("activation_overhead_s", "planning_cost_per_activation_s"):
            v = getattr(self, f)
            if not (isinstance(v, (int, float)) and v >= 0):
                raise SpecError(f"fabric.{f}={v!r} must be a non-negative number of seconds")


class PcieNetwork:
    """NetworkModel on a PCIe cluster: each registered call ends after planning + evaluated completion."""

    def __init__(self, cluster: PcieCluster, params: PcieNetworkParams = PcieNetworkParams()):
        self.cluster, self.params = cluster, params
        self.topology = channel_topology(cluster)
        self.capacity = cluster.capacities()
        self._planner = None
        self._demand: tuple[DemandEntry, ...] = ()
        self._world = 0
        self._pending: list[Completion] = []
        self._native_cache: dict = {}
        self._a2av_cache: dict = {}
        self.schedules_used: dict[tuple[str, str, str], str] = {}
        self._totals = dict.fromkeys(("calls", "activations", "bytes", "planning_s", "movement_s"), 0)
        self.nccl = None
        if params.nccl is not None:
            self.use_nccl(params.nccl)
        self._latency_s: dict[int, tuple[float, float]] = {}

    # -- protocol ------------------------------------------------------------------------------
    def prepare(self, demand: tuple[DemandEntry, ...], world: int) -> None:
        if world > self.cluster.n_ranks:
            per = self.cluster.server.gpus_per_node
            raise SpecError(f"world={world} needs {world} GPUs but platform {self.cluster.server.name} x "
                            f"{self.cluster.nodes} node(s) has {self.cluster.n_ranks}; set nodes={-(-world // per)}")
        self._demand, self._world = tuple(demand), world
        self._pending = []
        self.schedules_used = {}
        self._totals = dict.fromkeys(self._totals, 0)

    def register(self, call: CollectiveCall, earliest_start_s: float) -> None:
        check_in_demand(call, self._demand)
        if call.collective == "alltoallv":
            planning_s, completion_s, acts, sched, nbytes = self._alltoallv(call)
        else:
            planning_s, completion_s, acts, sched, nbytes = self._native(call)
        end = earliest_start_s + planning_s + completion_s
        self.schedules_used[(call.region, call.axis, call.collective)] = sched
        parts = {"planning": planning_s, "movement": completion_s}
        if call.call_id in self._latency_s:  # priced by the NCCL-like model: its split of the movement
            parts["latency_s"], parts["bandwidth_s"] = self._latency_s.pop(call.call_id)
        for key, value in (("calls", 1), ("activations", acts), ("bytes", nbytes), ("planning_s", planning_s),
                           ("movement_s", completion_s)):
            self._totals[key] += value
        self._pending.append(Completion(call_id=call.call_id, start_s=earliest_start_s, end_s=end, schedule=sched,
                                        planning_s=planning_s, parts=parts))

    def advance(self) -> list[Completion]:
        done, self._pending = self._pending, []
        return done

    def report(self) -> NetworkReport:
        p = self.params
        details = {"platform": self.cluster.server.name, "nodes": self.cluster.nodes,
                   "scheduler": p.scheduler, "planning_mode": p.planning, **self._totals}
        if self.nccl is not None:
            rows = schedules_by_row(self.schedules_used)  # the rows NCCL ran: "<algorithm>/<protocol>"
            details["nccl"] = {"generation": self.nccl.gen.name, "p2p_level": self.nccl.p2p_level,
                               "choices": {k: v for k, v in rows.items() if "/" in v}}
        return NetworkReport(model="flow", schedules=schedules_by_row(self.schedules_used), details=details)

    # -- AlltoAllv -----------------------------------------------------------------------------
    @property
    def planner(self):
        if self._planner is None:
            self._planner = make_scheduler(self.params.scheduler, self.topology, dict(self.params.scheduler_params),
                                           catalogs=self.params.catalogs)
        return self._planner

    def embed(self, matrix: np.ndarray, group: tuple[int, ...]) -> np.ndarray:
        """A group-indexed demand matrix as a cluster-wide N x N matrix (zeros elsewhere)."""
        m = np.asarray(matrix)
        if m.shape != (len(group), len(group)):
            raise SpecError(f"alltoallv demand has shape {m.shape}; it must be {len(group)} x {len(group)} for its group")
        full = np.zeros((self.cluster.n_ranks, self.cluster.n_ranks), dtype=np.int64)
        idx = np.asarray(group)
        full[np.ix_(idx, idx)] = np.rint(m).astype(np.int64)
        np.fill_diagonal(full, 0)
        return full

    def plan_alltoallv(self, full: np.ndarray) -> tuple[AlltoallvSchedule, object]:
        """Schedule + evaluation of one cluster-wide demand, cached by the matrix."""
        key = hashlib.sha1(np.ascontiguousarray(full, dtype=np.int64).tobytes()).hexdigest()
        hit = self._a2av_cache.get(key)
        if hit is None:
            sched = self.planner.plan(full)
            if self.params.validate:
                rep = check_schedule(sched, self.topology)
                if not rep.valid:
                    raise RuntimeError(f"scheduler {self.params.scheduler} produced an invalid schedule: {rep.problems[:2]}")
            ev = evaluate(sched, self.capacity, self.params.activation_overhead_s)
            hit = self._a2av_cache[key] = (sched, ev)
        return hit

    def planning_cost_s(self, sched: AlltoallvSchedule) -> float:
        p = self.params
        if p.planning == "none" or p.scheduler in STATIC_SCHEDULERS:
            return 0.0
        if p.planning == "measured":
            return float(sched.meta.get("planning_s", 0.0))
        return p.planning_cost_per_activation_s * sched.n_activations

    def _alltoallv(self, call: CollectiveCall):
        if len(call.groups) != 1:
            raise SpecError("alltoallv with a demand matrix must be registered for one group (the EP group)")
        group = call.groups[0]
        if call.demand is None:  # uniform: every rank sends payload (N-1)/N spread evenly
            n = len(group)
            m = np.full((n, n), call.payload_bytes // max(1, n))
        else:
            m = call.demand
        full = self.embed(m, group)
        if not full.any():
            return 0.0, 0.0, 0, self.params.scheduler, 0
        sched, ev = self.plan_alltoallv(full)
        if self.nccl is not None and self.params.scheduler == "nccl":
            est = self._nccl_cached(("a2av", id(sched)), lambda: self.nccl.pairwise(sched))
            self._latency_s[call.call_id] = (est.latency_s, est.bandwidth_s)
            return 0.0, est.time_s, sched.n_activations, est.schedule, int(full.sum())
        return self.planning_cost_s(sched), ev.completion_s, sched.n_activations, self.params.scheduler, int(full.sum())

    def _nccl_cached(self, key, compute):
        hit = self._native_cache.get(key)
        if hit is None:
            hit = self._native_cache[key] = compute()
        return hit

    # -- native schedules of the other collectives ---------------------------------------------
    def native_stages(self, collective: str, groups, payload_bytes: int) -> list[tuple[tuple[int, int, int], ...]]:
        """(src, dst, bytes) lanes of every step of NCCL's native schedule, all groups together."""
        stages: list[list[tuple[int, int, int]]] = []
        for grp in groups:
            n = len(grp)
            if n < 2:
                continue
            chunk = -(-int(payload_bytes) // n)
            if collective in ("allgather", "reducescatter", "allreduce"):
                steps = (n - 1) * (2 if collective == "allreduce" else 1)
                ring = [(grp[i], grp[(i + 1) % n], chunk) for i in range(n)]
                for s in range(steps):
                    if len(stages) <= s:
                        stages.append([])
                    stages[s].extend(ring)
            elif collective in ("alltoall", "alltoallv"):
                for k in range(1, n):
                    if len(stages) < k:
                        stages.append([])
                    stages[k - 1].extend((grp[i], grp[(i + k) % n], chunk) for i in range(n))
            else:
                raise SpecError(f"collective {collective!r} has no native PCIe schedule")
        return [tuple(s) for s in stages]

    def _native(self, call: CollectiveCall):
        if self.nccl is not None:
            return self._native_nccl(call)
        key = (call.collective, call.groups, call.payload_bytes)
        hit = self._native_cache.get(key)
        if hit is None:
            stages = self.native_stages(call.collective, call.groups, call.payload_bytes)
            total_s, stage_cache = 0.0, {}
            for lanes in stages:
                s_key = lanes  # ring steps repeat one lane set: evaluate it once
                if s_key not in stage_cache:
                    ls = [Lane(src=i, dst=j, path=self.topology.nearest(i, j), bytes=b) for i, j, b in lanes if b > 0]
                    stage_cache[s_key] = (float(run_stage(ls, self.capacity).max()) if ls else 0.0)
                total_s += self.params.activation_overhead_s + stage_cache[s_key]
            nbytes = sum(b for lanes in stages for _, _, b in lanes)
            hit = self._native_cache[key] = (0.0, total_s, len(stages), f"native_{call.collective}", nbytes)
        return hit


    def use_nccl(self, gen, protocol: str = "auto") -> None:
        """Price calls with the NCCL-like model of ``gen`` (a ``Generation``) from now on
        (``protocol``: NCCL_PROTO, network=nccl's ``network.protocol``)."""
        from fabrics.network.nccl.pcie import PcieNccl

        cpus = {v for v, kind in self.cluster.server.vertices.items() if kind == "cpu"}
        self.nccl = PcieNccl(gen, self.topology, self.capacity, protocol=protocol,
                             overhead_s=self.params.activation_overhead_s, cpus=cpus)
        self._native_cache.clear()

    def nccl_estimate(self, call: CollectiveCall):
        """The NCCL-like ``Estimate`` of a non-AlltoAllv call (ring or pairwise p2p; cached)."""
        from fabrics.network.nccl.pcie import RING_COLLECTIVES

        def compute():
            stages = self.native_stages(call.collective, call.groups, call.payload_bytes)
            if call.collective in RING_COLLECTIVES:
                return self.nccl.ring(call.collective, stages, call.groups, call.payload_bytes), stages
            return self.nccl.pairwise(native_schedule(self, call.collective, call.groups, call.payload_bytes)), stages

        return self._nccl_cached(("native", call.collective, call.groups, call.payload_bytes), compute)

    def _native_nccl(self, call: CollectiveCall):
        est, stages = self.nccl_estimate(call)
        self._latency_s[call.call_id] = (est.latency_s, est.bandwidth_s)
        nbytes = sum(b for lanes in stages for _, _, b in lanes)
        return 0.0, est.time_s, len(stages), est.schedule, nbytes


def native_schedule(net: PcieNetwork, collective: str, groups, payload_bytes: int) -> AlltoallvSchedule:
    """The native schedule of a collective as activations (for inspection / tests)."""
    stages = net.native_stages(collective, groups, payload_bytes)
    acts = tuple(Activation(lanes=tuple(Lane(src=i, dst=j, path=net.topology.nearest(i, j), bytes=b)
                                        for i, j, b in lanes)) for lanes in stages)
    n = net.cluster.n_ranks
    demand = np.zeros((n, n), dtype=np.int64)
    for lanes in stages:
        for i, j, b in lanes:
            demand[i, j] += b
    return AlltoallvSchedule(scheduler=f"native_{collective}", platform=net.topology.name, n_ranks=n,
                             demand=demand, activations=acts, channels=False)
