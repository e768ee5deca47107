"""Expert-parallel phases (prefill | decode) with token dispatch and combine as AlltoAllv.

Paper 000's end-to-end workload (Qwen3-30B-A3B prefill on PCIe servers, EP16/24/32) and
paper 003's decode, in one model: the same graph and passes as GXNET's decode step (the
compiled program of ``gxnet.compile`` with ``phase="prefill"`` or ``"decode"``), evaluated on
one rank's share of the tokens, with the expert-parallel layout of MoE serving on GPUs without
a scale-up fabric:

- the tokens of the phase (prefill: requests x S prompt tokens; decode: one per request) are
  sharded over the EP ranks in contiguous blocks; everything outside the experts runs
  data-parallel on each rank's tokens (attention weights replicated, as in DP attention);
- prefill attention is causal over the whole prompt: each rank all-gathers the prompt's K/V
  (context parallelism, one all-gather per layer over the EP ranks, Hkv x 2 x d per token)
  before its flash-attention prefill kernel; decode keeps each request's KV cache on its rank;
- each MoE layer dispatches every token to the ranks hosting its top-k experts (AlltoAllv with
  the layer's own demand matrix from ``gxnet.expert_routing``), runs the grouped expert GEMM on the
  rows each rank received, and combines the expert outputs back (the transposed AlltoAllv);
  the combine waits for the slowest rank's expert GEMM (routing skew shows up twice: in the
  AlltoAllv volumes and in the expert compute of the busiest rank);
- only the last token of each request reaches the LM head (one generated token).

The phase is an ``ExecutionPlan`` like a decode step's -- one track (ranks differ only in expert
load, whose maximum is on the critical path), one section per layer since every layer routes
its own demand -- and runs through the one executor (``gxnet.executor.execute``), which asks the
network model for every collective; on ``fabric=pcie`` (``network=flow``) that is
``fabrics.network.pcie.PcieNetwork``, which schedules each AlltoAllv with the configured
scheduler and reports its planning time, charged on the critical path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from collectives.errors import SpecError
from fabrics.network.protocol import DemandEntry, NetworkModel
from gxnet.accelerators import AcceleratorSpec
from gxnet.compile import CollectiveSlot, compiled_program
from gxnet.executor import StepResult, execute
from gxnet.models import ModelSpec
from gxnet.plan import CATEGORY, PLANNED_BREAKDOWN_KEYS, CollectiveEntry, ComputeEntry, ExecutionPlan, PlanSection, Track
from gxnet.precision import PrecisionSpec
from gxnet.expert_routing import LayerRouting, RoutingProblem, RoutingSpec, expert_hosts, route_layers

PHASES = ("decode", "prefill")
ALLTOALLV_CALLS = ("dispatch", "combine")


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseSpec:
    phase: str = "prefill"
    requests: int = 1  # B
    prompt_tokens: int = 8192  # S per request (prefill)
    context_tokens: int = 1  # cached context per request (decode)

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise SpecError(f"phase={self.phase!r}; choose one of: {', '.join(PHASES)}")
        for f in ("requests", "prompt_tokens", "context_tokens"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SpecError(f"{f}={v!r} must be a positive integer")

    @property
    def tokens(self) -> int:
        """Tokens that pass through every layer in this phase."""
        return self.requests * self.prompt_tokens if self.phase == "prefill" else self.requests


@dataclass(frozen=True, slots=True, kw_only=True)
class EpDeployment:
    """Model x accelerator x EP ranks x phase x routing (validated, one-line SpecErrors)."""

    model: ModelSpec
    accelerator: AcceleratorSpec
    ep: int
    phase: PhaseSpec = field(default_factory=PhaseSpec)
    routing: RoutingSpec = field(default_factory=RoutingSpec)
    precision: PrecisionSpec = field(default_factory=PrecisionSpec)

    def __post_init__(self) -> None:
        if isinstance(self.ep, bool) or not isinstance(self.ep, int) or self.ep < 1:
            raise SpecError(f"EP={self.ep!r} must be a positive integer")
        expert_hosts(self.model.experts, self.ep, self.routing.placement, self.model.name)  # EP | experts
        need = self.memory_bytes_per_rank
        if need > self.accelerator.hbm_bytes:
            raise SpecError(f"EP={self.ep} needs {need / 1e9:.1f} GB of weights per rank > {self.accelerator.hbm_bytes / 1e9:.1f} GB "
                            f"of {self.accelerator.name}; raise EP (more ranks share the experts)")

    @property
    def world(self) -> int:
        """Ranks of the phase (what the executor and network model see)."""
        return self.ep

    @property
    def batch(self) -> int:
        return self.phase.requests

    @property
    def tokens_per_rank(self) -> int:
        return -(-self.phase.tokens // self.ep)

    @property
    def memory_bytes_per_rank(self) -> int:
        """Weights: everything but the routed experts replicated (attention, norms, router, shared
        experts, dense FFN layers, embedding and LM head); ceil(E/EP) routed experts per MoE layer."""
        m, bits = self.model, self.precision.weights_bits
        groups = m.param_groups()
        replicated = sum(v for k, v in groups.items() if k != "routed_experts")
        moe_layers = m.ffn_kinds().count("moe")
        experts = moe_layers * -(-m.experts // self.ep) * m.expert_params()
        return (replicated + experts) * bits // 8

    @property
    def token_bytes(self) -> int:
        return self.model.hidden * self.precision.comm_bits // 8

    def describe(self) -> str:
        p = self.phase
        what = (f"prefill of {p.requests} x {p.prompt_tokens} tokens" if p.phase == "prefill"
                else f"decode of {p.requests} requests at context {p.context_tokens}")
        return f"{self.model.name} {what} on EP{self.ep} x {self.accelerator.name}, routing {self.routing.model}"


@dataclass(frozen=True, slots=True)
class PhasePlan:
    """The phase's execution plan and the per-layer routing it was built from."""

    plan: ExecutionPlan
    routing: tuple[LayerRouting, ...]

    @property
    def deployment(self) -> EpDeployment:
        return self.plan.deployment

    @property
    def demand(self) -> tuple[DemandEntry, ...]:
        return self.plan.demand

    @property
    def layers(self) -> tuple[tuple, ...]:
        """The entries of every layer (between the embedding and LM-head sections)."""
        return tuple(sec.entries for sec in self.plan.sections[1:-1])

    def as_dict(self) -> dict:
        d = self.plan.as_dict()
        d["sections"] = d["sections"][:3] + d["sections"][-1:]  # embedding, two layers, LM head
        d["layers_total"] = len(self.routing)
        return d


def _compute(name: str, kernel: str, region: str, duration_s: float, flops: float, hbm_bytes: float) -> ComputeEntry:
    return ComputeEntry(name, kernel, region, CATEGORY.get(region, "other"), (float(duration_s),), (float(flops),),
                        (float(hbm_bytes),))


def _kernel_slots(prog):
    """(section name, [(kernel, region, index)]) without collectives (the world-1 program has none)."""
    out = []
    for sec in prog.sections:
        slots = [(s.kernel, s.region, s.index) for s in sec.slots if not isinstance(s, CollectiveSlot)]
        out.append((sec.name, sec.repeat, slots))
    return out


def build_phase_plan(d: EpDeployment) -> PhasePlan:
    m, p = d.model, d.phase
    prog = compiled_program(m, "tp_ep", d.precision, d.accelerator, p.phase)
    problem = RoutingProblem(tokens=p.tokens, experts=m.experts, top_k=m.top_k, layers=m.layers, ep=d.ep,
                             token_bytes=d.token_bytes, model_name=m.name)
    routing = route_layers(d.routing, problem)
    t_loc = d.tokens_per_rank
    ctx = p.prompt_tokens if p.phase == "prefill" else p.context_tokens
    k = m.top_k
    # One rank's program: the world-1 tp_ep graph (every weight the rank uses is local) on its
    # t_loc tokens; the weighted expert sum reads t_loc x k returned rows.
    base = prog.evaluate(t_loc, ctx, 1, 1, 1, 1, 1, 1, t_loc * k)
    head_rows = -(-p.requests // d.ep)  # last token of each request (prefill) / the rank's requests
    head = prog.evaluate(head_rows, ctx, 1, 1, 1, 1, 1, 1, head_rows * k)
    sections = _kernel_slots(prog)
    expert_cache: dict[tuple[int, int], tuple[float, float, float]] = {}
    gemm_index = next(i for _, _, slots in sections for (kern, _, i) in slots if kern == "expert_gemm")

    def expert_kernel(lr: LayerRouting) -> tuple[float, float, float]:
        best = (0.0, 0.0, 0.0)
        for e_loc, rows in sorted(set(zip(lr.active_experts_per_rank.tolist(), lr.rows_per_rank.tolist()))):
            key = (int(e_loc), int(rows))
            if key not in expert_cache:
                if rows <= 0 or e_loc <= 0:
                    expert_cache[key] = (0.0, 0.0, 0.0)
                else:
                    v = prog.evaluate(t_loc, ctx, 1, 1, 1, 1, int(e_loc), -(-int(rows) // int(e_loc)), t_loc * k)
                    expert_cache[key] = (float(v[gemm_index]), float(v[gemm_index + 1]), float(v[gemm_index + 2]))
            if expert_cache[key][0] > best[0]:
                best = expert_cache[key]
        return best

    def kern(vals, kernel, region, i, name) -> ComputeEntry:
        return _compute(name, kernel, region, vals[i], vals[i + 1], vals[i + 2])

    group = (tuple(range(d.ep)),)

    def comm(name: str, region: str, axis: str, collective: str, payload: int, demand=None) -> CollectiveEntry:
        return CollectiveEntry(name, region, axis, collective, int(payload), group, demand)

    kv_gather = p.phase == "prefill" and d.ep > 1
    kv_payload = p.tokens * m.kv_elements_per_layer() * d.precision.comm_bits // 8  # gathered prompt K/V (or MLA latent)
    prologue, epilogue, layers = [], [], []
    layer = 0
    for sec_name, repeat, slots in sections:
        if sec_name == "embedding":
            prologue += [kern(base, kn, rg, i, kn) for kn, rg, i in slots]
            continue
        if sec_name == "lm_head":
            epilogue += [kern(head, kn, rg, i, kn) for kn, rg, i in slots]
            continue
        for _ in range(repeat):
            entries: list = []
            for kn, rg, i in slots:
                if kn.startswith("flash") and kv_gather:
                    entries.append(comm("kv_allgather", "attention", "world", "allgather", kv_payload))
                if kn == "expert_gemm":
                    lr = routing[layer]
                    if d.ep > 1:
                        entries.append(comm("dispatch", "ffn", "ep", "alltoallv",
                                            int(lr.dispatch_bytes.sum(axis=1).max()), lr.dispatch_bytes))
                    t, f, b = expert_kernel(lr)
                    entries.append(_compute(f"L{layer}.experts", kn, "ffn", t, f, b))
                    if d.ep > 1:
                        comb = np.ascontiguousarray(lr.dispatch_bytes.T)
                        entries.append(comm("combine", "ffn", "ep", "alltoallv", int(comb.sum(axis=1).max()), comb))
                    layer += 1
                    continue
                entries.append(kern(base, kn, rg, i, kn))
            layers.append(tuple(entries))
    demand = []
    if kv_gather:
        demand.append(DemandEntry(region="attention", axis="world", collective="allgather", groups=1, ranks=d.ep,
                                  calls_per_step=len(layers), payload_bytes=kv_payload))
    if d.ep > 1:
        demand.append(DemandEntry(region="ffn", axis="ep", collective="alltoallv", groups=1, ranks=d.ep,
                                  calls_per_step=2 * len(layers),
                                  payload_bytes=max(int(lr.dispatch_bytes.sum(axis=1).max()) for lr in routing)))
    sections = (PlanSection("embedding", 1, tuple(prologue)),
                *(PlanSection(f"layer_{i}", 1, entries) for i, entries in enumerate(layers)),
                PlanSection("lm_head", 1, tuple(epilogue)))
    track = Track("critical path (busiest rank)", d.ep, 0)
    plan = ExecutionPlan(deployment=d, tracks=(track,), sections=sections, demand=tuple(demand), moe=None,
                         weights_bytes_per_rank=d.memory_bytes_per_rank, kv_bytes_per_rank=0,
                         breakdown_keys=PLANNED_BREAKDOWN_KEYS)
    return PhasePlan(plan=plan, routing=routing)


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseResult:
    latency_s: float
    breakdown_s: dict
    alltoallv_s: dict  # "dispatch" / "combine": per-layer completion (data movement), s
    planning_s: dict  # "dispatch" / "combine": per-layer planning charged on the critical path, s
    kv_allgather_s: float  # total
    memory_bytes_per_rank: int
    tokens_per_rank: int
    dropped_rows: int
    events: list

    def summary(self) -> dict:
        a2a = [x for k in ("dispatch", "combine") for x in self.alltoallv_s[k]]
        plan = [x for k in ("dispatch", "combine") for x in self.planning_s[k]]
        return {
            "latency_s": self.latency_s,
            "breakdown_s": dict(self.breakdown_s),
            "alltoallv": {
                "per_layer_dispatch_s": list(self.alltoallv_s["dispatch"]),
                "per_layer_combine_s": list(self.alltoallv_s["combine"]),
                "total_s": float(sum(a2a)),
                "mean_s": float(np.mean(a2a)) if a2a else 0.0,
                "max_s": float(max(a2a)) if a2a else 0.0,
            },
            "planning": {
                "per_layer_dispatch_s": list(self.planning_s["dispatch"]),
                "per_layer_combine_s": list(self.planning_s["combine"]),
                "total_s": float(sum(plan)),
            },
            "kv_allgather_total_s": self.kv_allgather_s,
            "memory_bytes_per_rank": self.memory_bytes_per_rank,
            "tokens_per_rank": self.tokens_per_rank,
            "dropped_rows": self.dropped_rows,
        }


def execute_phase(plan: PhasePlan, network: NetworkModel, *, trace: bool = True) -> PhaseResult:
    """Run the phase through the executor; collectives block (no overlap), the first kernel after
    each pays the launch; per layer, the AlltoAllv data movement and planning come from its calls."""
    d = plan.deployment
    step: StepResult = execute(plan.plan, network, trace=trace)
    a2a = {k: [] for k in ALLTOALLV_CALLS}
    planning = {k: [] for k in ALLTOALLV_CALLS}
    kv_total = 0.0
    for call in step.calls:
        if call.name in a2a:
            a2a[call.name].append(call.communication_s)
            planning[call.name].append(call.planning_s)
        else:
            kv_total += call.communication_s
    return PhaseResult(latency_s=step.decode_step_s, breakdown_s=dict(step.breakdown_s), alltoallv_s=a2a,
                       planning_s=planning, kv_allgather_s=kv_total, memory_bytes_per_rank=d.memory_bytes_per_rank,
                       tokens_per_rank=d.tokens_per_rank,
                       dropped_rows=int(sum(lr.dropped_rows for lr in plan.routing)), events=step.events)


