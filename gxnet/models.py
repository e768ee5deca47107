"""Model specifications loaded from plain dicts (paper 003 Table 10, and public config.json files).

Models are data (``conf/model/*.yaml``); this module turns one YAML mapping into a frozen,
validated ``ModelSpec`` and derives the parameter counts and KV-cache size from the layer
structure (never stored). One spec covers the decoders served today:

* attention: grouped-query (GQA; MQA with one KV head), full or sliding-window per layer
  (``attention_pattern``), optional Q/K/V and output biases, per-head q/k RMSNorm, sinks; or
  multi-head latent attention (MLA, DeepSeek-V2/V3, Kimi K2) when ``kv_lora_rank`` > 0;
* FFN per layer: a SwiGLU mixture of experts (routed experts, optional shared experts, router
  and expert biases) or a dense SwiGLU of width ``ffn_width``: dense models (``experts`` = 0),
  the first ``first_k_dense`` layers, and layers off the ``moe_every`` stride;
* multi-token-prediction (MTP) layers, counted apart from the model (``mtp_params``).

Layer ``i`` is MoE when the model has experts, ``i >= first_k_dense`` and
``(i + 1) % moe_every == 0`` (Qwen2-MoE ``decoder_sparse_step``, Llama-4 interleave rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from collectives.errors import SpecError

ATTENTION_KINDS = ("full", "sliding")
FFN_KINDS = ("moe", "dense")
# Weight groups a checkpoint may keep in BF16 below a quantized precision (``bf16_weights``):
# DeepSeek-V3's FP8 checkpoint keeps embedding, LM head, norms and router in BF16; GPT-OSS's
# MXFP4 checkpoint quantizes only the routed experts.
WEIGHT_GROUPS = ("embedding", "lm_head", "attention", "router", "routed_experts", "shared_experts",
                 "dense_ffn", "norms")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A pre-norm decoder: GQA or MLA attention, SwiGLU MoE or dense FFN per layer.

    ``attention_pattern`` is the repeated per-layer attention kind: ("full",) for Megatron,
    ("sliding", "full") for GPT-OSS (B.1: "Megatron 5T repeats one layer, GPT-OSS-5.3-like a
    pair"). For MLA ``kv_heads`` is 1 (one latent shared by all heads) and ``head_dim`` is the
    query/key head dim ``qk_nope_head_dim + qk_rope_head_dim``; both are derived.
    """

    name: str
    layers: int
    hidden: int
    q_heads: int
    vocab: int
    kv_heads: int = 0
    head_dim: int = 0
    experts: int = 0  # routed experts; 0 = dense model
    expert_width: int = 0
    top_k: int = 0
    shared_experts: int = 0
    shared_expert_width: int = 0  # 0 = expert_width
    shared_expert_gate: bool = False  # Qwen2-MoE: sigmoid gate (hidden -> 1) on the shared expert
    ffn_width: int = 0  # dense SwiGLU width (dense models, first-k dense layers)
    first_k_dense: int = 0
    moe_every: int = 1
    q_lora_rank: int = 0  # MLA: query compression rank (0 = full-rank query projection)
    kv_lora_rank: int = 0  # MLA: latent KV rank (0 = not MLA)
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    mtp_layers: int = 0  # multi-token-prediction layers (DeepSeek-V3: 1), not in the decode step
    attention_pattern: tuple[str, ...] = ("full",)
    window_tokens: int = 0  # sliding-window length; 0 when no layer slides
    attention_sinks: bool = False  # GPT-OSS: one learned sink logit per query head
    qkv_bias: bool = False
    o_bias: bool = False
    expert_bias: bool = False
    router_bias: bool = False  # GPT-OSS router bias; DeepSeek-V3 e_score_correction_bias
    qk_norm: bool = False  # Qwen3: per-head RMSNorm on q and k
    tied_embeddings: bool = False
    bf16_weights: tuple[str, ...] = ()  # weight groups the checkpoint keeps in BF16

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "q_heads", "vocab"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise SpecError(f"model {self.name}: {f}={v!r} must be a positive integer")
        for f in _INT_FIELDS:
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise SpecError(f"model {self.name}: {f}={v!r} must be a non-negative integer")
        if self.is_mla:
            self._check_mla()
        else:
            self._check_gqa()
        self._check_ffn()
        if not self.attention_pattern or any(k not in ATTENTION_KINDS for k in self.attention_pattern):
            raise SpecError(
                f"model {self.name}: attention_pattern={list(self.attention_pattern)} must be a "
                f"non-empty list of {', '.join(ATTENTION_KINDS)}")
        if self.layers % len(self.attention_pattern):
            raise SpecError(
                f"model {self.name}: layers={self.layers} must be a multiple of the "
                f"{len(self.attention_pattern)}-layer attention pattern")
        if "sliding" in self.attention_pattern and self.window_tokens <= 0:
            raise SpecError(f"model {self.name}: sliding attention needs window_tokens > 0")
        bad = [g for g in self.bf16_weights if g not in WEIGHT_GROUPS]
        if bad:
            raise SpecError(f"model {self.name}: bf16_weights={list(self.bf16_weights)} has unknown group(s) "
                            f"{', '.join(bad)}; choose from {', '.join(WEIGHT_GROUPS)}")

    def _check_gqa(self) -> None:
        for f in ("kv_heads", "head_dim"):
            if getattr(self, f) <= 0:
                raise SpecError(f"model {self.name}: {f}={getattr(self, f)!r} must be a positive integer "
                                "(or give kv_lora_rank for multi-head latent attention)")
        stray = [f for f in _MLA_FIELDS if getattr(self, f)]
        if stray:
            raise SpecError(f"model {self.name}: {', '.join(stray)} set without kv_lora_rank; MLA needs "
                            "kv_lora_rank > 0, GQA models leave the MLA fields out")
        if self.q_heads % self.kv_heads:
            raise SpecError(
                f"model {self.name}: kv_heads={self.kv_heads} must divide q_heads={self.q_heads} (GQA)")

    def _check_mla(self) -> None:
        for f in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if getattr(self, f) <= 0:
                raise SpecError(f"model {self.name}: MLA (kv_lora_rank={self.kv_lora_rank}) needs {f} > 0")
        for f in ("kv_lora_rank", "q_lora_rank"):
            v = getattr(self, f)
            if v >= self.hidden:
                raise SpecError(f"model {self.name}: {f}={v} must be below hidden={self.hidden} "
                                "(a low-rank compression of the hidden state)")
        if self.qkv_bias or self.attention_sinks or self.qk_norm:
            raise SpecError(f"model {self.name}: qkv_bias, attention_sinks and qk_norm are GQA options, not MLA")
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        for f, want in (("kv_heads", 1), ("head_dim", qk)):
            given = getattr(self, f)
            if given not in (0, want):
                raise SpecError(f"model {self.name}: {f}={given} contradicts MLA (it implies {f}={want}); "
                                f"leave {f} out")
            object.__setattr__(self, f, want)

    def _check_ffn(self) -> None:
        n = self.name
        if self.experts == 0:
            for f in ("top_k", "expert_width", "shared_experts", "shared_expert_width"):
                if getattr(self, f):
                    raise SpecError(f"model {n}: {f}={getattr(self, f)} given for a dense model (experts=0); "
                                    "set experts > 0 or leave it out")
            if self.expert_bias or self.router_bias or self.shared_expert_gate:
                raise SpecError(f"model {n}: expert_bias/router_bias/shared_expert_gate need experts > 0")
        else:
            if self.expert_width <= 0:
                raise SpecError(f"model {n}: experts={self.experts} needs expert_width > 0")
            if not 1 <= self.top_k <= self.experts:
                raise SpecError(f"model {n}: top_k={self.top_k} must be between 1 and experts={self.experts}")
            if self.shared_experts and not self.shared_expert_width:
                object.__setattr__(self, "shared_expert_width", self.expert_width)
        if self.moe_every < 1:
            raise SpecError(f"model {n}: moe_every={self.moe_every} must be >= 1")
        if self.experts and self.first_k_dense >= self.layers:
            raise SpecError(f"model {n}: first_k_dense={self.first_k_dense} leaves no MoE layer of {self.layers}")
        if "dense" in self.ffn_kinds() and self.ffn_width <= 0:
            raise SpecError(f"model {n}: dense FFN layers need ffn_width > 0 (the intermediate size)")

    # ---- structure -------------------------------------------------------------------------
    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def block_repeats(self) -> int:
        return self.layers // len(self.attention_pattern)

    @property
    def attention_width(self) -> int:
        """Q heads x value head dim (16,384 for Megatron 5T, twice its hidden size)."""
        return self.q_heads * (self.v_head_dim if self.is_mla else self.head_dim)

    def layer_kinds(self) -> tuple[str, ...]:
        return self.attention_pattern * self.block_repeats

    def ffn_kinds(self) -> tuple[str, ...]:
        return tuple("moe" if self.is_moe and i >= self.first_k_dense and (i + 1) % self.moe_every == 0
                     else "dense" for i in range(self.layers))

    def layer_plan(self) -> tuple[tuple[str, str], ...]:
        """(attention kind, FFN kind) of every layer, in order."""
        return tuple(zip(self.layer_kinds(), self.ffn_kinds()))

    def segments(self) -> tuple[tuple[tuple[tuple[str, str], ...], int], ...]:
        """The layer plan as runs of a repeated block: ((block, repeat), ...).

        The first-k dense layers form their own run; each run is its shortest repeating block
        (one layer for Megatron, a sliding/full pair for GPT-OSS)."""
        plan = self.layer_plan()
        k = self.first_k_dense if self.is_moe else 0
        runs = [r for r in (plan[:k], plan[k:]) if r]
        out = []
        for run in runs:
            period = next(p for p in range(1, len(run) + 1)
                          if len(run) % p == 0 and run == run[:p] * (len(run) // p))
            out.append((run[:period], len(run) // period))
        return tuple(out)

    def full_layers(self) -> int:
        return sum(1 for k in self.layer_kinds() if k == "full")

    # ---- parameter counts ------------------------------------------------------------------
    def _attention_core(self) -> int:
        """Attention matrices, biases and sinks of one layer (no norm gains)."""
        h = self.hidden
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (h * self.q_lora_rank + self.q_lora_rank * self.q_heads * qk if self.q_lora_rank
                 else h * self.q_heads * qk)
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim)
            kv += self.kv_lora_rank * self.q_heads * (self.qk_nope_head_dim + self.v_head_dim)
            p = q + kv + self.attention_width * h
        else:
            d = self.head_dim
            p = h * (self.q_heads + 2 * self.kv_heads) * d + self.attention_width * h
            if self.qkv_bias:
                p += (self.q_heads + 2 * self.kv_heads) * d
            if self.attention_sinks:
                p += self.q_heads
        return p + (h if self.o_bias else 0)

    def _attention_norms(self) -> int:
        """Pre-attention RMSNorm gain, plus q/k norms (Qwen3) or the MLA latent norms."""
        p = self.hidden
        if self.qk_norm:
            p += 2 * self.head_dim
        if self.is_mla:
            p += self.kv_lora_rank + self.q_lora_rank
        return p

    def attention_params(self) -> int:
        return self._attention_core() + self._attention_norms()

    def expert_params(self) -> int:
        """One SwiGLU routed expert: gate and up (hidden -> width) and down (width -> hidden)."""
        p = 3 * self.hidden * self.expert_width
        if self.expert_bias:
            p += 2 * self.expert_width + self.hidden
        return p

    def shared_params(self) -> int:
        """All shared experts of one MoE layer (always active)."""
        p = self.shared_experts * 3 * self.hidden * self.shared_expert_width
        return p + (self.hidden if self.shared_expert_gate else 0)

    def router_params(self) -> int:
        return self.hidden * self.experts + (self.experts if self.router_bias else 0)

    def dense_ffn_params(self) -> int:
        return 3 * self.hidden * self.ffn_width

    def ffn_params(self, active: bool) -> int:
        """One MoE layer's FFN: router, routed (top-k when active) and shared experts, norm gain."""
        n = self.top_k if active else self.experts
        return self.router_params() + n * self.expert_params() + self.shared_params() + self.hidden

    def embedding_params(self) -> int:
        # Table 10: active parameters include the embedding and the LM head (both counted).
        lm_head = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.vocab * self.hidden + lm_head + self.hidden  # + final RMSNorm

    def param_groups(self, active: bool = False) -> dict[str, int]:
        """Parameters by weight group (``WEIGHT_GROUPS``); ``active``: top-k routed experts only."""
        kinds = self.ffn_kinds()
        n_moe = kinds.count("moe")
        n_dense = len(kinds) - n_moe
        routed = self.top_k if active else self.experts
        return {
            "embedding": self.vocab * self.hidden,
            "lm_head": 0 if self.tied_embeddings else self.vocab * self.hidden,
            "attention": self.layers * self._attention_core(),
            "router": n_moe * self.router_params(),
            "routed_experts": n_moe * routed * self.expert_params(),
            "shared_experts": n_moe * self.shared_params(),
            "dense_ffn": n_dense * self.dense_ffn_params(),
            "norms": self.layers * (self._attention_norms() + self.hidden) + self.hidden,
        }

    def total_params(self) -> int:
        """Every weight of the model, MTP layers excluded (``mtp_params``)."""
        return sum(self.param_groups(active=False).values())

    def active_params(self) -> int:
        """Weights one token's decode reads: all non-routed weights (embedding and LM head
        included) plus top-k routed experts per MoE layer."""
        return sum(self.param_groups(active=True).values())

    def mtp_params(self) -> int:
        """DeepSeek-V3 MTP module: one more decoder layer (MoE FFN), two RMSNorms on the inputs and
        the 2H -> H projection; its embedding and output head are shared with the model."""
        if not self.mtp_layers:
            return 0
        ffn = self.ffn_params(False) if self.is_moe else self.dense_ffn_params() + self.hidden
        per = self.attention_params() + ffn + 2 * self.hidden * self.hidden + 3 * self.hidden
        return self.mtp_layers * per

    def kv_elements_per_layer(self) -> int:
        """Cached elements per token per attention layer: K and V of every KV head (GQA), or the
        latent plus the shared rope key (MLA, absorbed decode form)."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_heads * self.head_dim

    def kv_bytes_per_token(self, kv_bits: int = 4) -> int:
        """KV-cache bytes per context token; only layers whose cache grows with context count."""
        return self.full_layers() * self.kv_elements_per_layer() * kv_bits // 8


_MLA_FIELDS = ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_INT_FIELDS = ("kv_heads", "head_dim", "experts", "expert_width", "top_k", "shared_experts",
               "shared_expert_width", "ffn_width", "first_k_dense", "moe_every", "q_lora_rank",
               "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "mtp_layers",
               "window_tokens")
_BOOL_FIELDS = ("attention_sinks", "qkv_bias", "o_bias", "expert_bias", "router_bias", "qk_norm",
                "tied_embeddings", "shared_expert_gate")
_REQUIRED = ("layers", "hidden", "q_heads", "vocab")
_KNOWN = (set(_INT_FIELDS) | set(_BOOL_FIELDS) | set(_REQUIRED)
          | {"name", "attention_pattern", "bf16_weights", "description", "source"})


def model_from_dict(d: Mapping[str, Any]) -> ModelSpec:
    """Build a ``ModelSpec`` from the content of ``conf/model/X.yaml`` (a plain mapping)."""
    d = {k: v for k, v in dict(d).items() if v is not None}
    name = str(d.get("name", "?"))
    unknown = sorted(set(d) - _KNOWN)
    if unknown:
        raise SpecError(f"model {name}: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(_KNOWN))}")
    missing = [f for f in _REQUIRED if f not in d]
    if missing:
        raise SpecError(f"model {name}: missing field(s) {', '.join(missing)}")
    kwargs: dict[str, Any] = {"name": name}
    for f in _REQUIRED + _INT_FIELDS:
        if f in d:
            kwargs[f] = _as_int(name, f, d[f])
    for f in _BOOL_FIELDS:
        if f in d:
            kwargs[f] = bool(d[f])
    for f in ("attention_pattern", "bf16_weights"):
        if f in d:
            v = d[f]
            kwargs[f] = (v,) if isinstance(v, str) else tuple(str(p) for p in v)
    if "kv_lora_rank" not in kwargs and not ("kv_heads" in kwargs and "head_dim" in kwargs):
        absent = [f for f in ("kv_heads", "head_dim") if f not in kwargs]
        raise SpecError(f"model {name}: missing field(s) {', '.join(absent)} "
                        "(or kv_lora_rank for multi-head latent attention)")
    if kwargs.get("experts", 0) == 0 and "ffn_width" not in kwargs and "top_k" not in kwargs:
        raise SpecError(f"model {name}: missing field(s) experts, expert_width, top_k (MoE) "
                        "or ffn_width (dense model)")
    return ModelSpec(**kwargs)


def model_as_dict(m: ModelSpec) -> dict[str, Any]:
    """The YAML mapping that rebuilds ``m`` (fields at their default are left out)."""
    import dataclasses

    out: dict[str, Any] = {}
    for f in dataclasses.fields(m):
        v = getattr(m, f.name)
        if f.name in ("kv_heads", "head_dim") and m.is_mla:
            continue  # derived from the MLA ranks
        if f.name == "shared_expert_width" and v == m.expert_width:
            continue
        if f.name == "name" or v != f.default:
            out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def _as_int(name: str, field: str, v: Any) -> int:
    if isinstance(v, bool):
        raise SpecError(f"model {name}: {field}={v!r} must be an integer")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise SpecError(f"model {name}: {field}={v!r} must be an integer") from None
    if f != int(f):
        raise SpecError(f"model {name}: {field}={v!r} must be an integer")
    return int(f)


def load_model_file(path: str | Path) -> ModelSpec:
    """Test/tool helper: read one model YAML file (PyYAML) and build its spec."""
    import yaml

    with open(path) as f:
        return model_from_dict(yaml.safe_load(f))
