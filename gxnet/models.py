"""Model specifications (paper 003, Table 10 and Figure 26) loaded from plain dicts.

Models are data (``conf/model/*.yaml``); this module turns one YAML mapping into a frozen,
validated ``ModelSpec`` and derives the parameter counts and KV-cache size that Table 10
reports. Parameter counts are computed from the layer structure, never stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from collectives.errors import SpecError

ATTENTION_KINDS = ("full", "sliding")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A pre-norm decoder with GQA attention and a SwiGLU mixture-of-experts FFN.

    ``attention_pattern`` is the repeated block: ("full",) for Megatron, ("sliding", "full") for
    GPT-OSS (B.1: "Megatron 5T repeats one layer, GPT-OSS-5.3-like a pair").
    """

    name: str
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    experts: int
    expert_width: int
    top_k: int
    vocab: int
    attention_pattern: tuple[str, ...] = ("full",)
    window_tokens: int = 0  # sliding-window length; 0 when no layer slides
    attention_sinks: bool = False  # GPT-OSS: one learned sink logit per query head
    qkv_bias: bool = False
    expert_bias: bool = False
    qk_norm: bool = False  # Qwen3: per-head RMSNorm on q and k
    tied_embeddings: bool = False

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "q_heads", "kv_heads", "head_dim", "experts",
                  "expert_width", "top_k", "vocab"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise SpecError(f"model {self.name}: {f}={v!r} must be a positive integer")
        if self.q_heads % self.kv_heads:
            raise SpecError(
                f"model {self.name}: kv_heads={self.kv_heads} must divide q_heads={self.q_heads} (GQA)")
        if self.top_k > self.experts:
            raise SpecError(f"model {self.name}: top_k={self.top_k} exceeds experts={self.experts}")
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

    # ---- structure -------------------------------------------------------------------------
    @property
    def block_repeats(self) -> int:
        return self.layers // len(self.attention_pattern)

    @property
    def attention_width(self) -> int:
        """Q heads x head dim (16,384 for Megatron 5T, twice its hidden size)."""
        return self.q_heads * self.head_dim

    def layer_kinds(self) -> tuple[str, ...]:
        return self.attention_pattern * self.block_repeats

    def full_layers(self) -> int:
        return sum(1 for k in self.layer_kinds() if k == "full")

    # ---- parameter counts (Table 10) ---------------------------------------------------------
    def attention_params(self) -> int:
        h, d = self.hidden, self.head_dim
        p = h * (self.q_heads + 2 * self.kv_heads) * d + self.attention_width * h
        if self.qkv_bias:
            p += (self.q_heads + 2 * self.kv_heads) * d
        if self.attention_sinks:
            p += self.q_heads
        if self.qk_norm:
            p += 2 * d
        return p + h  # + the pre-attention RMSNorm gain

    def expert_params(self) -> int:
        """One SwiGLU expert: gate and up (hidden -> width) and down (width -> hidden)."""
        p = 3 * self.hidden * self.expert_width
        if self.expert_bias:
            p += 2 * self.expert_width + self.hidden
        return p

    def ffn_params(self, active: bool) -> int:
        router = self.hidden * self.experts
        n = self.top_k if active else self.experts
        return router + n * self.expert_params() + self.hidden  # + pre-FFN RMSNorm gain

    def embedding_params(self) -> int:
        # Table 10: active parameters include the embedding and the LM head (both counted).
        lm_head = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.vocab * self.hidden + lm_head + self.hidden  # + final RMSNorm

    def total_params(self) -> int:
        return self.layers * (self.attention_params() + self.ffn_params(False)) + self.embedding_params()

    def active_params(self) -> int:
        return self.layers * (self.attention_params() + self.ffn_params(True)) + self.embedding_params()

    def kv_bytes_per_token(self, kv_bits: int = 4) -> int:
        """KV-cache bytes per context token; only layers whose cache grows with context count."""
        return self.full_layers() * self.kv_heads * 2 * self.head_dim * kv_bits // 8


_INT_FIELDS = ("layers", "hidden", "q_heads", "kv_heads", "head_dim", "experts", "expert_width",
               "top_k", "vocab", "window_tokens")
_BOOL_FIELDS = ("attention_sinks", "qkv_bias", "expert_bias", "qk_norm", "tied_embeddings")
_KNOWN = set(_INT_FIELDS) | set(_BOOL_FIELDS) | {"name", "attention_pattern", "description", "source"}


def model_from_dict(d: Mapping[str, Any]) -> ModelSpec:
    """Build a ``ModelSpec`` from the content of ``conf/model/X.yaml`` (a plain mapping)."""
    d = dict(d)
    name = str(d.get("name", "?"))
    unknown = sorted(set(d) - _KNOWN)
    if unknown:
        raise SpecError(f"model {name}: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(_KNOWN))}")
    kwargs: dict[str, Any] = {"name": name}
    for f in _INT_FIELDS:
        if f in d:
            kwargs[f] = _as_int(name, f, d[f])
    for f in _BOOL_FIELDS:
        if f in d:
            kwargs[f] = bool(d[f])
    if "attention_pattern" in d:
        pat = d["attention_pattern"]
        kwargs["attention_pattern"] = (pat,) if isinstance(pat, str) else tuple(str(p) for p in pat)
    missing = [f for f in ("layers", "hidden", "q_heads", "kv_heads", "head_dim", "experts",
                           "expert_width", "top_k", "vocab") if f not in kwargs]
    if missing:
        raise SpecError(f"model {name}: missing field(s) {', '.join(missing)}")
    return ModelSpec(**kwargs)


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
