"""Expert routing models: per-layer token dispatch demand of an expert-parallel MoE layer.

Paper 003 (Appendix B.2) assumes dropless routing that is *uniform in expectation* and names
skew as future work (Section 7); Appendix A.4 regularises routing-dependent traffic by
capacity padding (Eq. 5, factor γ) or bucketing. Paper 000 drives AlltoAllv with randomized
top-k MoE routing and Zipf-skewed demand. This module produces, for one MoE layer and one
phase (``tokens`` routed tokens spread over ``ep`` ranks), the dispatch demand matrix (bytes,
source rank x destination rank; combine is its transpose) and each rank's expert load.

Models (``RoutingSpec.model``):
- ``uniform``: the expectation of uniform top-k routing, no sampling (paper 003's assumption,
  the default): a token reaches rank j with probability 1 - C(E - e_j, k) / C(E, k) when the
  dispatch sends a token once per destination rank, and k e_j / E rows otherwise;
- ``topk``: every token draws k distinct experts uniformly (seeded, per layer);
- ``zipf``: expert popularity p_e ∝ 1 / r(e)^s with a seeded popularity order per layer; the k
  experts of a token are drawn without replacement proportionally to p (exponential race, i.e.
  Plackett-Luce), so s = 0 is ``topk``. ``zipf_scope=global`` (default): one order shared by all
  tokens, so the ranks hosting hot experts become hot *receivers*; ``per_source``: every source
  rank has its own order (requests on different ranks favour different experts), which spreads
  the skew over rank pairs like paper 000's skew AlltoAllv (FAST's pairwise Zipf);
- ``trace``: expert ids from a file, tokens x top-k (same for every layer) or
  layers x tokens x top-k.

Tokens are spread over the ranks in contiguous blocks (token t on rank floor(t N / T)), as a
sequence-sharded prompt or a batch of requests is. Expert e lives on rank floor(e N / E)
(contiguous blocks; ``placement=strict`` requires N | E, ``uneven`` allows blocks of
floor/ceil(E / N) experts, which is how EP24 serves 128 experts).

Everything is vectorised with numpy; randomness only from ``seed`` (one generator per layer,
seeded with (seed, layer), so a layer's draw does not depend on how many layers are drawn).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from collectives.errors import SpecError

ROUTING_MODELS = ("uniform", "topk", "zipf", "trace")
PLACEMENTS = ("strict", "uneven")
ZIPF_SCOPES = ("global", "per_source")


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingSpec:
    model: str = "uniform"
    seed: int = 0
    zipf_s: float = 0.8  # Zipf exponent of expert popularity (paper 000 sweeps 0.4 ... 0.8)
    zipf_scope: str = "global"  # global: one popularity order per layer; per_source: one per source rank
    trace_path: str | None = None  # where the trace came from (its identity); pipelines read the file
    trace: object = field(default=None, compare=False)  # the trace's expert ids (array), read at the config edge
    capacity_factor: float | None = None  # γ of A.4 Eq. 5; None: dropless, no padding
    bucket_levels: tuple[float, ...] = ()  # A.4 bucketing: levels as multiples of the mean pair load
    dedup: bool = True  # a token travels once to each rank hosting >= 1 of its experts (DeepEP-style)
    placement: str = "strict"

    def __post_init__(self) -> None:
        if self.model not in ROUTING_MODELS:
            raise SpecError(f"routing.model={self.model!r}; choose one of: {', '.join(ROUTING_MODELS)}")
        if self.placement not in PLACEMENTS:
            raise SpecError(f"routing.placement={self.placement!r}; choose one of: {', '.join(PLACEMENTS)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise SpecError(f"routing.seed={self.seed!r} must be a non-negative integer")
        if not (isinstance(self.zipf_s, (int, float)) and math.isfinite(self.zipf_s) and self.zipf_s >= 0):
            raise SpecError(f"routing.zipf_s={self.zipf_s!r} must be a non-negative number (paper 000: 0.4 ... 0.8)")
        if self.zipf_scope not in ZIPF_SCOPES:
            raise SpecError(f"routing.zipf_scope={self.zipf_scope!r}; choose one of: {', '.join(ZIPF_SCOPES)}")
        if self.model == "trace" and not self.trace_path:
            raise SpecError("routing.model=trace needs routing.trace_path=<file of tokens x top-k expert ids (.npy/.json/.csv)>")
        if self.capacity_factor is not None and not (self.capacity_factor >= 1.0 and math.isfinite(self.capacity_factor)):
            raise SpecError(f"routing.capacity_factor={self.capacity_factor!r} must be >= 1 (A.4, Eq. 5) or null for dropless")
        levels = tuple(float(x) for x in self.bucket_levels)
        if any(not (x > 0 and math.isfinite(x)) for x in levels) or list(levels) != sorted(set(levels)):
            raise SpecError(f"routing.bucket_levels={list(self.bucket_levels)} must be increasing positive multiples of the mean pair load")
        if levels and self.capacity_factor is not None:
            raise SpecError("routing: give capacity_factor (padding) or bucket_levels (bucketing), not both; padding is bucketing with one level")
        object.__setattr__(self, "bucket_levels", levels)

    @property
    def random(self) -> bool:
        return self.model in ("topk", "zipf")


def routing_from_dict(d: dict | None) -> RoutingSpec:
    d = dict(d or {})
    d.pop("name", None)
    known = {"model", "seed", "zipf_s", "zipf_scope", "trace_path", "capacity_factor", "bucket_levels", "dedup", "placement"}
    unknown = sorted(set(d) - known)
    if unknown:
        raise SpecError(f"routing: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    if "bucket_levels" in d:
        d["bucket_levels"] = tuple(d["bucket_levels"] or ())
    if d.get("seed") is not None:
        try:
            d["seed"] = int(d["seed"])
        except (TypeError, ValueError):
            raise SpecError(f"routing.seed={d['seed']!r} must be a non-negative integer") from None
    return RoutingSpec(**{k: v for k, v in d.items() if v is not None or k in ("capacity_factor", "trace_path")})


def expert_hosts(experts: int, ep: int, placement: str = "strict", model_name: str = "model") -> np.ndarray:
    """Rank of every expert: contiguous blocks (floor(e N / E))."""
    if isinstance(ep, bool) or not isinstance(ep, (int, np.integer)) or ep < 1:
        raise SpecError(f"EP={ep!r} must be a positive integer")
    if ep > experts:
        raise SpecError(f"EP={ep} exceeds the {experts} experts of {model_name}; every EP rank needs at least one expert")
    if placement == "strict" and experts % ep:
        raise SpecError(f"EP={ep} must divide the {experts} experts of {model_name}; choose a divisor "
                        f"or set routing.placement=uneven (blocks of {experts // ep}/{-(-experts // ep)} experts)")
    return (np.arange(experts) * ep) // experts


def token_sources(tokens: int, ep: int) -> np.ndarray:
    """Rank holding each token: contiguous blocks of floor/ceil(T / N)."""
    return (np.arange(tokens) * ep) // tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerRouting:
    """One MoE layer's routing outcome on N EP ranks (bytes in the dispatch; combine = transpose)."""

    dispatch_bytes: np.ndarray = field(compare=False)  # (N, N) int64, zero diagonal
    rows_per_rank: np.ndarray = field(compare=False)  # (N,) expert rows computed on each rank (after drops)
    active_experts_per_rank: np.ndarray = field(compare=False)  # (N,) experts with >= 1 row
    dropped_rows: int = 0  # rows beyond capacity (padding) or the top bucket (token transfers if dedup)

    @property
    def n_ranks(self) -> int:
        return int(self.dispatch_bytes.shape[0])

    def busiest_rank(self) -> int:
        return int(np.argmax(self.rows_per_rank))


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingProblem:
    """Fixed inputs of one phase: tokens routed per layer, model shape, EP ranks, bytes per row."""

    tokens: int
    experts: int
    top_k: int
    layers: int
    ep: int
    token_bytes: int  # hidden x comm bytes: one row on the wire
    model_name: str = "model"

    def __post_init__(self) -> None:
        for f in ("tokens", "experts", "top_k", "layers", "ep", "token_bytes"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise SpecError(f"routing {f}={v!r} must be a positive integer")
        if self.top_k > self.experts:
            raise SpecError(f"top_k={self.top_k} exceeds the {self.experts} experts of {self.model_name}")
        # tokens < ep is allowed: ranks beyond the tokens hold none (decode with DP attention and
        # fewer requests than EP ranks; token_sources keeps every token on its own rank).


def trace_ids(trace, problem: RoutingProblem, name: str = "trace") -> np.ndarray:
    """(layers, tokens, k) int64 expert ids of a trace array; shape and id range checked (SpecError).
    ``name`` names the trace in errors (its file; the pipelines read it)."""
    if trace is None:
        raise SpecError("routing.model=trace has no trace ids; give routing.trace_path=<.npy/.json/.csv of tokens x top-k ids>")
    a = np.asarray(trace)
    T, k, L, E = problem.tokens, problem.top_k, problem.layers, problem.experts
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3 or a.shape[1:] != (T, k) or a.shape[0] not in (1, L):
        raise SpecError(f"routing trace {name} has shape {tuple(a.shape) if a.ndim != 3 or a.shape[0] != 1 else tuple(a.shape[1:])}; "
                        f"it must be {T} x {k} (tokens x top-k) or {L} x {T} x {k} (layers x tokens x top-k)")
    if not np.issubdtype(a.dtype, np.number) or not np.all(np.isfinite(a)) or not np.array_equal(a, np.round(a)):
        raise SpecError(f"routing trace {name} must hold whole expert ids")
    a = a.astype(np.int64)
    if a.min() < 0 or a.max() >= E:
        bad = int(a.min()) if a.min() < 0 else int(a.max())
        raise SpecError(f"routing trace {name}: expert id {bad} is out of range 0..{E - 1} for {problem.model_name}")
    srt = np.sort(a, axis=2)
    if (srt[:, :, 1:] == srt[:, :, :-1]).any():
        raise SpecError(f"routing trace {name}: a token lists the same expert twice; each row needs {k} distinct ids")
    return a


def _draw(spec: RoutingSpec, problem: RoutingProblem, layer: int) -> np.ndarray:
    """(tokens, k) distinct expert ids for one layer."""
    T, E, k = problem.tokens, problem.experts, problem.top_k
    rng = np.random.default_rng([spec.seed, layer])
    # Exponential race: expert e's key is Exp(1) / p_e; the k smallest keys are a draw of k
    # distinct experts without replacement proportional to p (Plackett-Luce; = Gumbel top-k).
    keys = rng.standard_exponential(size=(T, E), dtype=np.float32)
    if spec.model == "zipf" and spec.zipf_s > 0:
        if spec.zipf_scope == "global":
            order = rng.permutation(E)  # popularity rank of each expert, per layer, shared by all tokens
            keys *= ((1.0 + order) ** float(spec.zipf_s)).astype(np.float32)[None, :]
        else:  # per_source: every source rank ranks the experts in its own order
            orders = rng.permuted(np.tile(np.arange(E), (problem.ep, 1)), axis=1)
            w = ((1.0 + orders) ** float(spec.zipf_s)).astype(np.float32)
            keys *= w[token_sources(T, problem.ep)]
    return np.argpartition(keys, k - 1, axis=1)[:, :k]


def _uniform_layer(spec: RoutingSpec, problem: RoutingProblem, hosts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Expected (N, N) units (tokens if dedup, else rows), rows per expert, active experts per rank."""
    T, E, k, N = problem.tokens, problem.experts, problem.top_k, problem.ep
    e_on = np.bincount(hosts, minlength=N).astype(np.float64)
    t_src = np.bincount(token_sources(T, N), minlength=N).astype(np.float64)
    if spec.dedup:
        # P(a token hits rank j) = 1 - C(E - e_j, k) / C(E, k)
        miss = np.array([math.comb(E - int(e), k) / math.comb(E, k) for e in e_on])
        per_dst = 1.0 - miss
    else:
        per_dst = k * e_on / E
    units = t_src[:, None] * per_dst[None, :]
    rows = np.full(E, T * k / E)  # per expert
    # B.2's expected active experts, spread over the ranks in proportion to their experts
    n_act = E * (1.0 - (1.0 - 1.0 / E) ** (T * k))
    active = np.minimum(e_on, np.ceil(n_act * e_on / E))
    return units, rows, active


def _sampled_layer(spec: RoutingSpec, problem: RoutingProblem, hosts: np.ndarray, ids: np.ndarray):
    T, E, N = problem.tokens, problem.experts, problem.ep
    src = token_sources(T, N)
    per_src_expert = np.bincount((src[:, None] * E + ids).ravel(), minlength=N * E).reshape(N, E)
    if spec.dedup and spec.capacity_factor is None:
        hits = np.zeros((T, N), dtype=bool)  # token t reaches rank j (once, however many experts)
        hits[np.arange(T)[:, None], hosts[ids]] = True
        tok, dst = np.nonzero(hits)
        units = np.bincount(src[tok] * N + dst, minlength=N * N).reshape(N, N).astype(np.float64)
    else:
        units = np.zeros((N, N))
        np.add.at(units.T, hosts, per_src_expert.T.astype(np.float64))  # units[i, host[e]] += rows(i, e)
    return units, per_src_expert


def layer_routing(spec: RoutingSpec, problem: RoutingProblem, layer: int, hosts: np.ndarray,
                  trace: np.ndarray | None = None) -> LayerRouting:
    T, E, k, N = problem.tokens, problem.experts, problem.top_k, problem.ep
    e_on = np.bincount(hosts, minlength=N)
    dropped = 0
    if spec.model == "uniform":
        units, rows, active = _uniform_layer(spec, problem, hosts)
        per_src_expert = None
    else:
        ids = trace[layer if trace.shape[0] > 1 else 0] if spec.model == "trace" else _draw(spec, problem, layer)
        units, per_src_expert = _sampled_layer(spec, problem, hosts, ids)
        rows = per_src_expert.sum(axis=0)
    if spec.capacity_factor is not None:
        # A.4, Eq. 5: C = γ k m / N_exp rows per (source group, expert); every pair is padded
        # to C rows on the wire, rows beyond C overflow (dropped here, counted).
        t_src = np.bincount(token_sources(T, N), minlength=N)
        cap = np.ceil(spec.capacity_factor * k * t_src / E)  # per source rank
        if per_src_expert is None:  # expectation: per (src, expert) k m / E rows, never above C
            expected = (t_src * k / E)[:, None] * np.ones((1, E))
            kept = np.minimum(expected, cap[:, None])
        else:
            kept = np.minimum(per_src_expert, cap[:, None])
            dropped = int((per_src_expert - kept).sum())
        rows = kept.sum(axis=0)
        units = cap[:, None] * e_on[None, :].astype(np.float64)  # padded: C rows x experts of j
    elif spec.bucket_levels:
        # A.4 bucketing: each pair's load is rounded up to the next level (levels x the mean pair
        # load under uniform routing); loads above the top level overflow (clipped, counted).
        mean, _, _ = _uniform_layer(spec, problem, hosts)
        levels = np.asarray(spec.bucket_levels)
        ratio = np.divide(units, mean, out=np.zeros_like(units), where=mean > 0)
        idx = np.searchsorted(levels, ratio - 1e-12)
        top = idx >= len(levels)
        q = levels[np.minimum(idx, len(levels) - 1)]
        bucketed = np.ceil(q * mean)
        over = np.where(top, units - bucketed, 0.0)
        dropped = int(round(over.sum()))  # in wire units: rows, or token transfers when dedup
        units = np.where(units > 0, bucketed, 0.0)
    units = units.copy()
    np.fill_diagonal(units, 0.0)  # a rank's own tokens stay local (Section 2.3 of paper 000)
    demand = np.rint(units * problem.token_bytes).astype(np.int64)
    if per_src_expert is not None and spec.capacity_factor is None:
        active = np.bincount(hosts, weights=(per_src_expert.sum(axis=0) > 0).astype(np.float64), minlength=N)
    elif per_src_expert is not None:
        active = np.bincount(hosts, weights=(kept.sum(axis=0) > 0).astype(np.float64), minlength=N)
    else:
        active = np.asarray(active)
    rows_rank = np.bincount(hosts, weights=np.asarray(rows, dtype=np.float64), minlength=N)
    return LayerRouting(dispatch_bytes=demand, rows_per_rank=np.ceil(rows_rank - 1e-9).astype(np.int64),
                        active_experts_per_rank=np.asarray(active).astype(np.int64), dropped_rows=dropped)


def route_layers(spec: RoutingSpec, problem: RoutingProblem) -> tuple[LayerRouting, ...]:
    """Every layer's routing (uniform: one computation shared by all layers)."""
    hosts = expert_hosts(problem.experts, problem.ep, spec.placement, problem.model_name)
    name = Path(spec.trace_path).name if spec.trace_path else "trace"
    trace = trace_ids(spec.trace, problem, name) if spec.model == "trace" else None
    if spec.model == "uniform":
        one = layer_routing(spec, problem, 0, hosts)
        return (one,) * problem.layers
    if spec.model == "trace" and trace.shape[0] == 1:
        one = layer_routing(spec, problem, 0, hosts, trace)
        return (one,) * problem.layers
    return tuple(layer_routing(spec, problem, layer, hosts, trace) for layer in range(problem.layers))
