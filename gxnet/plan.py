"""Per-rank execution plan (paper 003, B.4): compute entries with fixed durations and
communication entries whose durations are left to the network model.

Ranks with identical durations and dependencies share an entry: a *track* is one distinct rank
behaviour. In decode they differ only where the active experts do not divide evenly over the
EP ranks (B.2, B.4): EP ranks hold ceil(N_act/EP) or floor(N_act/EP) active experts. A plan is
compact: per section one tuple of entries plus its repetition count (Megatron 5T: 128 x one
layer), evaluated from the compiled program with one substitution per track.

``build_plan`` is memoised by an explicit keyed cache (``PLAN_CACHE``), keyed by the frozen
``Deployment``; ``PLAN_CACHE.clear()`` is always safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from fabrics.network.protocol import DemandEntry
from gxnet.compile import CollectiveSlot, compiled_program
from gxnet.demand import demand_from_values
from gxnet.deployment import Deployment
from gxnet.kernels import EngineTiming, engine_timing
from gxnet.moe import MoeLoad, moe_load

CATEGORY = {"attention": "attention", "ffn": "ffn", "embedding": "other", "lm_head": "other"}
# breakdown of a step: kernels by category, collectives, in-graph launches (B.3); plans whose network
# charges online planning (AlltoAllv on PCIe) add "planning" after "communication"
BREAKDOWN_KEYS = ("attention", "ffn", "communication", "fixed", "other")
# with an engine (gxnet.kernels) the per-kernel floor and gaps are reported apart from the kernels' work
ENGINE_BREAKDOWN_KEYS = ("attention", "ffn", "communication", "fixed", "kernel_floor", "other")
PLANNED_BREAKDOWN_KEYS = ("attention", "ffn", "communication", "planning", "fixed", "other")


@dataclass(frozen=True, slots=True)
class Track:
    name: str  # distinct rank behaviour, e.g. "ranks_with_2_experts"
    ranks: int  # how many ranks behave like this
    active_experts: int


@dataclass(frozen=True, slots=True)
class ComputeEntry:
    name: str  # first graph node of the fused kernel
    kernel: str
    region: str
    category: str  # breakdown key: attention | ffn | other
    durations_s: tuple[float, ...]  # per track
    flops: tuple[float, ...]
    hbm_bytes: tuple[float, ...]
    floor_s: tuple[float, ...] = ()  # per track, the part of durations_s that is kernel floor + gaps (engines)


@dataclass(frozen=True, slots=True)
class CollectiveEntry:
    name: str
    region: str
    axis: str
    collective: str
    payload_bytes: int
    groups: tuple[tuple[int, ...], ...]  # every concurrent group of the axis, global ranks
    demand: object = field(default=None, compare=False)  # alltoallv: the call's demand matrix (bytes, group-indexed)


@dataclass(frozen=True, slots=True)
class PlanSection:
    name: str
    repeat: int
    entries: tuple  # ComputeEntry | CollectiveEntry


@dataclass(frozen=True, slots=True)
class ExecutionPlan:
    deployment: Deployment
    tracks: tuple[Track, ...]
    sections: tuple[PlanSection, ...]
    demand: tuple[DemandEntry, ...]
    moe: MoeLoad | None  # None: expert load is in the entries (EP phases with routed demand)
    weights_bytes_per_rank: int
    kv_bytes_per_rank: int
    breakdown_keys: tuple[str, ...] = BREAKDOWN_KEYS
    window_launch_s: float | None = None  # per execution window; None: the accelerator's in-graph launch (B.3)
    window_floor_s: float = 0.0  # per execution window (persistent engine: the window is one kernel)

    @property
    def memory_bytes_per_rank(self) -> int:
        return self.weights_bytes_per_rank + self.kv_bytes_per_rank

    def entry_count(self) -> int:
        return sum(len(s.entries) for s in self.sections)

    def as_dict(self) -> dict:
        """JSON-able view (``plan.json``): tracks, and per section its entries and repetitions."""
        def entry(e) -> dict:
            if isinstance(e, CollectiveEntry):
                return {"type": "collective", "name": e.name, "region": e.region, "axis": e.axis,
                        "collective": e.collective, "payload_bytes": e.payload_bytes,
                        "groups": len(e.groups), "ranks": len(e.groups[0])}
            return {"type": "compute", "name": e.name, "kernel": e.kernel, "region": e.region,
                    "durations_s": list(e.durations_s), "flops": list(e.flops), "hbm_bytes": list(e.hbm_bytes)}

        d = self.deployment
        return {
            "deployment": d.describe(),
            "tracks": [{"name": t.name, "ranks": t.ranks, "active_experts": t.active_experts} for t in self.tracks],
            "moe": None if self.moe is None else {"active_experts": self.moe.active_experts,
                                                  "busiest_rows": self.moe.busiest_rows,
                                                  "tokens_per_expert": self.moe.tokens_per_expert},
            "sections": [{"name": s.name, "repeat": s.repeat, "entries": [entry(e) for e in s.entries]}
                         for s in self.sections],
            "weights_bytes_per_rank": self.weights_bytes_per_rank,
            "kv_bytes_per_rank": self.kv_bytes_per_rank,
        }


def program_of(d: Deployment):
    return compiled_program(d.model, d.parallel.scheme, d.precision, d.accelerator)


def track_values(d: Deployment, load: MoeLoad) -> list[tuple[Track, list]]:
    """Concrete symbol values, once per distinct rank behaviour (busiest first)."""
    p, prog = d.parallel, program_of(d)
    tpe = p.tpe
    kinds = [(load.busiest_experts, load.busiest_ranks)]
    if load.lightest_experts != load.busiest_experts:
        kinds.append((load.lightest_experts, p.ep - load.busiest_ranks))
    out = []
    for experts, ep_ranks in kinds:
        vals = prog.evaluate(d.batch, d.context_tokens, p.kvp, p.tpa, p.ep, p.tpe,
                             experts, load.tokens_per_expert, load.busiest_rows)
        out.append((Track(f"ranks_with_{experts}_active_experts", ep_ranks * tpe, experts), vals))
    return out


def _build(d: Deployment) -> ExecutionPlan:
    prog = program_of(d)
    load = moe_load(d.batch, d.model.top_k, d.model.experts, d.parallel.ep)
    tv = track_values(d, load)
    tracks = tuple(t for t, _ in tv)
    values = [v for _, v in tv]
    timing = engine_timing(d.engine, d.accelerator, d.precision)
    sections = []
    for sec in prog.sections:
        entries = []
        for slot in sec.slots:
            if isinstance(slot, CollectiveSlot):
                if d.parallel.axis_size(slot.axis) == 1:
                    continue  # a one-rank group moves nothing
                entries.append(CollectiveEntry(
                    slot.name, slot.region, slot.axis, slot.collective,
                    int(round(values[0][slot.index])), d.parallel.groups(slot.axis)))
            else:
                entries.append(_compute_entry(slot, values, timing))
        sections.append(PlanSection(sec.name, sec.repeat, tuple(entries)))
    engine = {} if timing is None else dict(breakdown_keys=ENGINE_BREAKDOWN_KEYS,
                                            window_launch_s=timing.window_launch_s,
                                            window_floor_s=timing.window_floor_s)
    return ExecutionPlan(
        deployment=d, tracks=tracks, sections=tuple(sections),
        demand=demand_from_values(d, prog, values[0]), moe=load,
        weights_bytes_per_rank=int(round(values[0][prog.weights_index])),
        kv_bytes_per_rank=int(round(values[0][prog.kv_index])), **engine)


def _compute_entry(slot, values: list, timing: EngineTiming | None) -> ComputeEntry:
    """One fused kernel per track: the roofline duration (B.3), or the engine's (gxnet.kernels)."""
    i = slot.index
    flops = tuple(float(v[i + 1]) for v in values)
    nbytes = tuple(float(v[i + 2]) for v in values)
    if timing is None:
        return ComputeEntry(slot.name, slot.kernel, slot.region, CATEGORY[slot.region],
                            tuple(float(v[i]) for v in values), flops, nbytes)
    timed = [timing.entry_s(f, b, slot.ops) for f, b in zip(flops, nbytes)]
    return ComputeEntry(slot.name, slot.kernel, slot.region, CATEGORY[slot.region], tuple(t for t, _ in timed),
                        flops, nbytes, floor_s=tuple(fl for _, fl in timed))


@lru_cache(maxsize=4096)
def _cached(d: Deployment) -> ExecutionPlan:
    return _build(d)


class PlanCache:
    """The explicit, keyed plan cache (key: the frozen Deployment)."""

    @staticmethod
    def clear() -> None:
        _cached.cache_clear()

    @staticmethod
    def info():
        return _cached.cache_info()


PLAN_CACHE = PlanCache()


def build_plan(d: Deployment, cached: bool = True) -> ExecutionPlan:
    return _cached(d) if cached else _build(d)


def deployment_demand(d: Deployment) -> tuple[DemandEntry, ...]:
    """The deployment-time demand of one decode step (paper 003, Table 1), read off its plan."""
    return build_plan(d).demand
