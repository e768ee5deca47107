"""HuggingFace ``config.json`` -> model spec fields (``model=hf model.config=/path/config.json``).

Plain JSON (the standard library's ``json``): a config.json is a flat JSON object, nothing more
is needed. ``spec_fields(config)`` maps the keys each supported ``model_type`` uses (as read by
the transformers modelling code of that family) to ``ModelSpec`` fields; ``model_from_hf_file``
reads a file and builds the spec. A missing key or an unsupported model type is one
``SpecError`` line naming it and the supported types.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

from collectives.errors import SpecError

_GQA = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gpt_oss")
_MLA = ("deepseek_v2", "deepseek_v3", "kimi_k2")
SUPPORTED = _GQA + _MLA
# DeepSeek-V3 / Kimi K2 FP8 checkpoints keep these in BF16 (only Linear weights of the decoder
# layers are FP8); GPT-OSS's MXFP4 quantizes the MoE experts only.
_FP8_BF16 = ["embedding", "lm_head", "norms", "router"]
_MXFP4_BF16 = ["embedding", "lm_head", "attention", "router", "norms"]


class _Keys:
    """Reads keys of one config.json, naming what is missing in one line."""

    def __init__(self, cfg: dict, where: str):
        self.cfg, self.where = cfg, where

    def req(self, *keys: str) -> Any:
        for k in keys:
            if self.cfg.get(k) is not None:
                return self.cfg[k]
        raise SpecError(f"{self.where}: missing key {' or '.join(keys)} for model_type "
                        f"{self.cfg.get('model_type')!r}; supported model types: {', '.join(SUPPORTED)}")

    def opt(self, key: str, default: Any) -> Any:
        v = self.cfg.get(key)
        return default if v is None else v


def _common(k: _Keys) -> dict:
    heads = k.req("num_attention_heads")
    return {"layers": k.req("num_hidden_layers"), "hidden": k.req("hidden_size"), "q_heads": heads,
            "vocab": k.req("vocab_size"), "tied_embeddings": bool(k.opt("tie_word_embeddings", False))}


def _gqa(k: _Keys) -> dict:
    heads = k.req("num_attention_heads")
    return {"kv_heads": k.opt("num_key_value_heads", heads),
            "head_dim": k.opt("head_dim", k.req("hidden_size") // heads)}


def _attention_pattern(k: _Keys) -> dict:
    """``layer_types`` (GPT-OSS, newer configs) or one ``sliding_window`` for all layers (Mistral)."""
    types = k.cfg.get("layer_types")
    if types:
        kinds = [{"sliding_attention": "sliding", "full_attention": "full"}.get(t) for t in types]
        if None in kinds:
            raise SpecError(f"{k.where}: layer_types {sorted(set(types))} has a kind other than "
                            "sliding_attention / full_attention")
        period = next(p for p in range(1, len(kinds) + 1)
                      if len(kinds) % p == 0 and kinds == kinds[:p] * (len(kinds) // p))
        out = {"attention_pattern": kinds[:period]}
        if "sliding" in kinds:
            out["window_tokens"] = k.req("sliding_window")
        return out
    if k.cfg.get("model_type") in ("mistral", "mixtral") and k.cfg.get("sliding_window"):
        return {"attention_pattern": ["sliding"], "window_tokens": k.cfg["sliding_window"]}
    if k.cfg.get("use_sliding_window"):
        raise SpecError(f"{k.where}: use_sliding_window=true (Qwen2 per-layer windows) is not supported; "
                        "set it false or write the model YAML with attention_pattern")
    return {}


def _dense_prefix(k: _Keys) -> int:
    """Qwen2/3-MoE ``mlp_only_layers``: supported when they are the first k layers."""
    only = sorted(k.opt("mlp_only_layers", []))
    if only != list(range(len(only))):
        raise SpecError(f"{k.where}: mlp_only_layers={only} is supported only as the first layers [0..k-1]")
    return len(only)


def _llama(k: _Keys) -> dict:
    bias = bool(k.opt("attention_bias", False))
    return {"ffn_width": k.req("intermediate_size"), "qkv_bias": bias, "o_bias": bias}


def _mixtral(k: _Keys) -> dict:
    return {"experts": k.req("num_local_experts"), "top_k": k.req("num_experts_per_tok"),
            "expert_width": k.req("intermediate_size")}


def _qwen_moe(k: _Keys, shared: bool) -> dict:
    out = {"experts": k.req("num_experts"), "top_k": k.req("num_experts_per_tok"),
           "expert_width": k.req("moe_intermediate_size"), "moe_every": k.opt("decoder_sparse_step", 1),
           "first_k_dense": _dense_prefix(k)}
    if out["first_k_dense"] or out["moe_every"] > 1:
        out["ffn_width"] = k.req("intermediate_size")
    if shared and k.opt("shared_expert_intermediate_size", 0):
        out.update(shared_experts=1, shared_expert_width=k.cfg["shared_expert_intermediate_size"],
                   shared_expert_gate=True)
    return out


def _deepseek(k: _Keys) -> dict:
    out = {"q_lora_rank": k.opt("q_lora_rank", 0), "kv_lora_rank": k.req("kv_lora_rank"),
           "qk_nope_head_dim": k.req("qk_nope_head_dim"), "qk_rope_head_dim": k.req("qk_rope_head_dim"),
           "v_head_dim": k.req("v_head_dim"), "mtp_layers": k.opt("num_nextn_predict_layers", 0),
           "ffn_width": k.req("intermediate_size")}
    if k.opt("n_routed_experts", 0):
        if k.opt("moe_layer_freq", 1) != 1:
            raise SpecError(f"{k.where}: moe_layer_freq={k.cfg['moe_layer_freq']} is not supported (only 1)")
        out.update(experts=k.req("n_routed_experts"), top_k=k.req("num_experts_per_tok"),
                   expert_width=k.req("moe_intermediate_size"), shared_experts=k.opt("n_shared_experts", 0),
                   first_k_dense=k.opt("first_k_dense_replace", 0),
                   # noaux_tc routing adds the learned e_score_correction_bias (DeepSeek-V3, Kimi K2)
                   router_bias=k.opt("topk_method", "") == "noaux_tc")
    if (k.opt("quantization_config", {}) or {}).get("quant_method") == "fp8":
        out["bf16_weights"] = _FP8_BF16
    return out


def _gpt_oss(k: _Keys) -> dict:
    bias = bool(k.opt("attention_bias", True))
    out = {"experts": k.req("num_local_experts"), "top_k": k.req("num_experts_per_tok", "experts_per_token"),
           "expert_width": k.req("intermediate_size"), "attention_sinks": True, "qkv_bias": bias,
           "o_bias": bias, "expert_bias": True, "router_bias": True}
    if (k.opt("quantization_config", {}) or {}).get("quant_method") == "mxfp4":
        out["bf16_weights"] = _MXFP4_BF16
    return out


_FAMILY: dict[str, Callable[[_Keys], dict]] = {
    "llama": _llama, "mistral": _llama, "qwen2": lambda k: {**_llama(k), "qkv_bias": True, "o_bias": False},
    "qwen3": lambda k: {**_llama(k), "qk_norm": True},
    "mixtral": _mixtral,
    "qwen2_moe": lambda k: {**_qwen_moe(k, shared=True), "qkv_bias": True},
    "qwen3_moe": lambda k: {**_qwen_moe(k, shared=False), "qk_norm": True},
    "deepseek_v2": _deepseek, "deepseek_v3": _deepseek, "kimi_k2": _deepseek,
    "gpt_oss": _gpt_oss,
}


def spec_fields(cfg: dict, where: str = "config.json") -> dict:
    """The ModelSpec fields (no name) of one parsed config.json."""
    if not isinstance(cfg, dict):
        raise SpecError(f"{where}: a config.json must hold a JSON object")
    mt = cfg.get("model_type")
    if mt not in _FAMILY and isinstance(cfg.get("text_config"), dict):  # multimodal wrapper
        cfg = cfg["text_config"]
        mt = cfg.get("model_type")
    if mt not in _FAMILY:
        raise SpecError(f"{where}: model_type {mt!r} is not supported; supported model types: {', '.join(SUPPORTED)}")
    k = _Keys(cfg, where)
    out = _common(k)
    if mt in _GQA:
        out.update(_gqa(k))
        out.update(_attention_pattern(k))
    out.update(_FAMILY[mt](k))
    return out


def read_config(path: str | Path) -> dict:
    p = Path(path).expanduser()
    try:
        text = p.read_text()
    except OSError as exc:
        raise SpecError(f"model.config={str(path)!r}: cannot read it ({exc.strerror}); give the path of a "
                        "HuggingFace config.json") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"model.config={str(path)!r} is not valid JSON (line {exc.lineno}: {exc.msg})") from None


def default_name(path: str | Path) -> str:
    """``.../DeepSeek-V3/config.json`` -> ``deepseek_v3``; another file name -> its stem."""
    p = Path(path)
    stem = p.parent.name if p.name == "config.json" and p.parent.name else p.stem
    return re.sub(r"[^0-9a-z]+", "_", stem.lower()).strip("_") or "hf_model"


def model_from_hf_file(path: str | Path, name: str | None = None, overrides: dict | None = None):
    """Read a config.json and build its ``ModelSpec``; ``overrides`` (spec fields) win."""
    from gxnet.models import model_from_dict

    fields = spec_fields(read_config(path), where=f"config.json {path}")
    fields.update(overrides or {})
    return model_from_dict({"name": name or default_name(path), "source": str(path), **fields})
