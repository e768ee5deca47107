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
  the layer's own demand matrix from ``gxnet.routing``), runs the grouped expert GEMM on the
  rows each rank received, and combines the expert outputs back (the transposed AlltoAllv);
  the combine waits for the slowest rank's expert GEMM (routing skew shows up twice: in the
  AlltoAllv volumes and in the expert compute of the busiest rank);
- only the last token of each request reaches the LM head (one generated token).

The executor walks the plan once (one track: ranks differ only in expert load, whose maximum
is on the critical path) and asks a ``NetworkModel`` for every collective; with ``fabric=pcie``
that is ``fabrics.pcie_network.PcieNetwork``, which schedules the AlltoAllv with the
configured scheduler and charges its planning time on the critical path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from collectives.errors import SpecError
from fabrics.network_model import CollectiveCall, DemandEntry, NetworkModel
from gxnet.accelerators import AcceleratorSpec
from gxnet.compile import CollectiveSlot, compiled_program
from gxnet.models import ModelSpec
from gxnet.precision import PrecisionSpec
from gxnet.routing import LayerRouting, RoutingProblem, RoutingSpec, expert_hosts, route_layers

PHASES = ("decode", "prefill")
BREAKDOWN_KEYS = ("attention", "ffn", "communication", "planning", "fixed", "other")
_CATEGORY = {"embedding": "other", "lm_head": "other", "attention": "attention", "ffn": "ffn"}


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
    def tokens_per_rank(self) -> int:
        return -(-self.phase.tokens // self.ep)

    @property
    def memory_bytes_per_rank(self) -> int:
        """Weights: attention, norms, router, embedding and LM head replicated; ceil(E/EP) experts."""
        m, bits = self.model, self.precision.weights_bits
        replicated = m.layers * (m.attention_params() + m.hidden * m.experts + m.hidden) + m.embedding_params()
        experts = m.layers * -(-m.experts // self.ep) * m.expert_params()
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
class KernelEntry:
    name: str
    kernel: str
    category: str
    duration_s: float
    flops: float
    hbm_bytes: float


@dataclass(frozen=True, slots=True)
class CommEntry:
    name: str  # "kv_allgather" | "dispatch" | "combine"
    region: str
    axis: str
    collective: str
    payload_bytes: int
    demand: np.ndarray | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class PhasePlan:
    deployment: EpDeployment
    prologue: tuple
    layers: tuple  # per layer: tuple of KernelEntry | CommEntry
    epilogue: tuple
    demand: tuple[DemandEntry, ...]
    routing: tuple[LayerRouting, ...]

    def as_dict(self) -> dict:
        def entry(e):
            if isinstance(e, CommEntry):
                return {"type": "collective", "name": e.name, "axis": e.axis, "collective": e.collective,
                        "payload_bytes": e.payload_bytes}
            return {"type": "compute", "name": e.name, "kernel": e.kernel, "duration_s": e.duration_s,
                    "flops": e.flops, "hbm_bytes": e.hbm_bytes}
        return {"deployment": self.deployment.describe(), "prologue": [entry(e) for e in self.prologue],
                "layers": [[entry(e) for e in layer] for layer in self.layers[:2]],
                "layers_total": len(self.layers), "epilogue": [entry(e) for e in self.epilogue]}


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

    def kern(vals, kernel, region, i, name) -> KernelEntry:
        return KernelEntry(name, kernel, _CATEGORY.get(region, "other"), float(vals[i]), float(vals[i + 1]), float(vals[i + 2]))

    kv_gather = p.phase == "prefill" and d.ep > 1
    kv_payload = p.tokens * m.kv_heads * 2 * m.head_dim * d.precision.comm_bits // 8  # gathered prompt K/V
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
                    entries.append(CommEntry("kv_allgather", "attention", "world", "allgather", kv_payload))
                if kn == "expert_gemm":
                    lr = routing[layer]
                    if d.ep > 1:
                        entries.append(CommEntry("dispatch", "ffn", "ep", "alltoallv",
                                                 int(lr.dispatch_bytes.sum(axis=1).max()), lr.dispatch_bytes))
                    t, f, b = expert_kernel(lr)
                    entries.append(KernelEntry(f"L{layer}.experts", kn, "ffn", t, f, b))
                    if d.ep > 1:
                        comb = np.ascontiguousarray(lr.dispatch_bytes.T)
                        entries.append(CommEntry("combine", "ffn", "ep", "alltoallv", int(comb.sum(axis=1).max()), comb))
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
    return PhasePlan(deployment=d, prologue=tuple(prologue), layers=tuple(layers), epilogue=tuple(epilogue),
                     demand=tuple(demand), routing=routing)


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
    """Walk the plan; collectives block (no overlap), the first kernel after each pays the launch."""
    d = plan.deployment
    network.prepare(plan.demand, d.ep)
    launch = d.accelerator.in_graph_launch_s
    group = (tuple(range(d.ep)),)
    breakdown = dict.fromkeys(BREAKDOWN_KEYS, 0.0)
    a2a = {"dispatch": [], "combine": []}
    planning = {"dispatch": [], "combine": []}
    kv_total = 0.0
    events: list = []
    t = 0.0
    window_open = True
    call_id = 0
    records = getattr(network, "records", None)

    def compute(e: KernelEntry) -> None:
        nonlocal t, window_open
        if window_open:
            breakdown["fixed"] += launch
            t += launch
            window_open = False
        if trace:
            events.append({"name": e.kernel, "cat": "compute", "start_s": t, "dur_s": e.duration_s})
        t += e.duration_s
        breakdown[e.category] += e.duration_s

    for li, entries in enumerate([plan.prologue, *plan.layers, plan.epilogue]):
        for e in entries:
            if isinstance(e, KernelEntry):
                compute(e)
                continue
            call = CollectiveCall(call_id=call_id, region=e.region, axis=e.axis, collective=e.collective,
                                  groups=group, payload_bytes=e.payload_bytes, demand=e.demand)
            n_rec = len(records) if records is not None else 0
            network.register(call, t)
            done = {}
            while call_id not in done:
                got = network.advance()
                if not got:
                    raise RuntimeError(f"network model advanced without completing call {call_id}")
                done.update({c.call_id: c for c in got})
            c = done[call_id]
            call_id += 1
            end = max(c.end_s, t)
            plan_s = records[n_rec].planning_s if records is not None and len(records) > n_rec else 0.0
            data_s = end - t - plan_s
            breakdown["planning"] += plan_s
            breakdown["communication"] += data_s
            if e.name in a2a:
                a2a[e.name].append(data_s)
                planning[e.name].append(plan_s)
            else:
                kv_total += data_s
            if trace:
                events.append({"name": f"{e.name}[{e.collective}]", "cat": "collective", "start_s": t, "dur_s": end - t,
                               "args": {"payload_bytes": e.payload_bytes, "layer": li - 1, "schedule": c.schedule,
                                        "planning_s": plan_s}})
            t = end
            window_open = True
    return PhaseResult(latency_s=t, breakdown_s=breakdown, alltoallv_s=a2a, planning_s=planning, kv_allgather_s=kv_total,
                       memory_bytes_per_rank=d.memory_bytes_per_rank, tokens_per_rank=d.tokens_per_rank,
                       dropped_rows=int(sum(lr.dropped_rows for lr in plan.routing)), events=events)


def chrome_trace(result: PhaseResult, label: str) -> dict:
    evs = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": label}},
           {"name": "thread_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "critical path (busiest rank)"}}]
    for e in result.events:
        evs.append({"name": e["name"], "cat": e["cat"], "ph": "X", "pid": 0, "tid": 0, "ts": e["start_s"] * 1e6,
                    "dur": e["dur_s"] * 1e6, "args": e.get("args", {})})
    return {"traceEvents": evs, "displayTimeUnit": "ns"}


__all__ = ["PhaseSpec", "EpDeployment", "PhasePlan", "PhaseResult", "build_phase_plan", "execute_phase",
           "chrome_trace", "PHASES"]
