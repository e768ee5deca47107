"""Model-level graph of one forward step (paper 003, B.1 and Figure 26).

``build_model_graph(model)`` returns an unsharded graph: token embedding, one decoder block
(one layer for Megatron, a sliding/full pair for GPT-OSS) repeated ``model.block_repeats``
times, final norm and LM head. Shapes are SymPy expressions in the batch ``B``, the new tokens
per user ``Tq`` (the decode pass fixes Tq = 1; prefill would keep it) and the cached context
``S``. Operators: embedding, RMSNorm, Q/K/V projections (optional bias, optional q/k norm),
KV append, flash-decode attention (full, or sliding window with sinks; GQA ratio from the head
counts), rescale-combine of partial attention, output projection, residual add, router
(top-k), grouped SwiGLU expert GEMM, weighted expert sum, LM head and sampling.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from gxnet.ir import B, Graph, Node, S, Section, TensorType, Tq, frozen
from gxnet.models import ModelSpec


def _t(dims, shape, role) -> TensorType:
    return TensorType(dims=tuple(dims), shape=tuple(sp.sympify(x) for x in shape), role=role)


@lru_cache(maxsize=64)  # explicit keyed cache: one graph per (frozen, hashable) model spec
def build_model_graph(model: ModelSpec) -> Graph:
    m = model
    H, d, Hq, Hkv = m.hidden, m.head_dim, m.q_heads, m.kv_heads
    tensors: dict[str, TensorType] = {
        "tokens": _t(("B", "Tq"), (B, Tq), "index"),
        "w_emb": _t(("V", "H"), (m.vocab, H), "weight"),
        "x": _t(("B", "Tq", "H"), (B, Tq, H), "activation"),
    }
    prologue = Section("embedding", (
        Node("embed", "embedding", ("tokens", "w_emb"), ("x",), "embedding", frozen({"kernel": "embed"})),
    ))

    layer_nodes: list[Node] = []
    n_layers = len(m.attention_pattern)
    for j, kind in enumerate(m.attention_pattern):
        p = f"L{j}."
        x_in = "x" if j == 0 else f"L{j - 1}.x_out"
        x_out = "x" if j == n_layers - 1 else f"{p}x_out"
        ctx_dim, ctx = ("S", S) if kind == "full" else ("Sw", sp.Min(S, m.window_tokens))
        tensors.update({
            f"{p}h": _t(("B", "Tq", "H"), (B, Tq, H), "activation"),
            f"{p}w_qkv": _t(("H", "Hqkv", "d"), (H, Hq + 2 * Hkv, d), "weight"),
            f"{p}q": _t(("B", "Tq", "Hq", "d"), (B, Tq, Hq, d), "activation"),
            f"{p}k": _t(("B", "Tq", "Hkv", "d"), (B, Tq, Hkv, d), "activation"),
            f"{p}v": _t(("B", "Tq", "Hkv", "d"), (B, Tq, Hkv, d), "activation"),
            f"{p}kv": _t(("B", ctx_dim, "Hkv", "kv2", "d"), (B, ctx, Hkv, 2, d), "kv"),
            # Attention output flattened to A = Hq x d (heads contiguous): Helix splits it by head over
            # TPA and, after the all-to-all, further over KVP (Figure 26: 16,384 -> 8192 projection).
            f"{p}o_part": _t(("B", "Tq", "A"), (B, Tq, Hq * d), "activation"),
            f"{p}lse": _t(("B", "Tq", "Hq"), (B, Tq, Hq), "stat"),
            f"{p}o": _t(("B", "Tq", "A"), (B, Tq, Hq * d), "activation"),
            f"{p}w_o": _t(("A", "H"), (Hq * d, H), "weight"),
            f"{p}a": _t(("B", "Tq", "H"), (B, Tq, H), "activation"),
            f"{p}x1": _t(("B", "Tq", "H"), (B, Tq, H), "activation"),
            f"{p}h2": _t(("B", "Tq", "H"), (B, Tq, H), "activation"),
            f"{p}w_router": _t(("H", "E"), (H, m.experts), "weight"),
            f"{p}gate": _t(("B", "Tq", "K"), (B, Tq, m.top_k), "activation"),
            f"{p}w_experts": _t(("E", "mat3", "H", "W"), (m.experts, 3, H, m.expert_width), "weight"),
            # Routed rows: B*Tq*k globally; the sharding pass pads each EP rank to the busiest (B.2).
            f"{p}y": _t(("Rw", "H"), (B * Tq * m.top_k, H), "activation"),
            f"{p}f": _t(("B", "Tq", "H"), (B, Tq, H), "activation"),
        })
        if x_out != "x":
            tensors[x_out] = _t(("B", "Tq", "H"), (B, Tq, H), "activation")
        qkv_in = (f"{p}h", f"{p}w_qkv")
        if m.qkv_bias:
            tensors[f"{p}b_qkv"] = _t(("Hqkv", "d"), (Hq + 2 * Hkv, d), "weight")
            qkv_in += (f"{p}b_qkv",)
        fd_in = (f"{p}q", f"{p}kv")
        if m.attention_sinks:
            tensors[f"{p}sinks"] = _t(("Hq",), (Hq,), "weight")
            fd_in += (f"{p}sinks",)
        att = dict(layer_kind=kind)
        layer_nodes += [
            Node(f"{p}attn_norm", "rmsnorm", (x_in,), (f"{p}h",), "attention", frozen({**att, "kernel": "qkv_proj"})),
            Node(f"{p}qkv", "qkv_proj", qkv_in, (f"{p}q", f"{p}k", f"{p}v"), "attention",
                 frozen({**att, "kernel": "qkv_proj", "qk_norm": m.qk_norm})),
            Node(f"{p}kv_append", "kv_append", (f"{p}k", f"{p}v"), (f"{p}kv",), "attention",
                 frozen({**att, "kernel": "qkv_proj"})),
            Node(f"{p}flash_decode", "flash_attention", fd_in, (f"{p}o_part", f"{p}lse"), "attention",
                 frozen({**att, "kernel": "flash_decode", "context_dim": ctx_dim,
                         "gqa_ratio": Hq // Hkv, "window": m.window_tokens if kind == "sliding" else 0})),
            Node(f"{p}attn_combine", "attn_combine", (f"{p}o_part", f"{p}lse"), (f"{p}o",), "attention",
                 frozen({**att, "kernel": "o_proj"})),
            Node(f"{p}o_proj", "o_proj", (f"{p}o", f"{p}w_o"), (f"{p}a",), "attention",
                 frozen({**att, "kernel": "o_proj"})),
            Node(f"{p}attn_residual", "add", (x_in, f"{p}a"), (f"{p}x1",), "ffn", frozen({"kernel": "router"})),
            Node(f"{p}ffn_norm", "rmsnorm", (f"{p}x1",), (f"{p}h2",), "ffn", frozen({"kernel": "router"})),
            Node(f"{p}router", "router", (f"{p}h2", f"{p}w_router"), (f"{p}gate",), "ffn",
                 frozen({"kernel": "router", "top_k": m.top_k})),
            Node(f"{p}experts", "expert_swiglu", (f"{p}h2", f"{p}w_experts", f"{p}gate"), (f"{p}y",), "ffn",
                 frozen({"kernel": "expert_gemm", "bias": m.expert_bias})),
            Node(f"{p}expert_sum", "expert_combine", (f"{p}y", f"{p}gate"), (f"{p}f",), "ffn",
                 frozen({"kernel": "expert_combine"})),
            Node(f"{p}ffn_residual", "add", (f"{p}x1", f"{p}f"), (x_out,), "ffn", frozen({"kernel": "expert_combine"})),
        ]
    block = Section("decoder_block", tuple(layer_nodes), repeat=m.block_repeats)

    tensors.update({
        "hf": _t(("B", "Tq", "H"), (B, Tq, H), "activation"),
        "w_lm": _t(("H", "V"), (H, m.vocab), "weight"),
        "logits": _t(("B", "Tq", "V"), (B, Tq, m.vocab), "activation"),
        "next_token": _t(("B", "Tq"), (B, Tq), "index"),
    })
    epilogue = Section("lm_head", (
        Node("final_norm", "rmsnorm", ("x",), ("hf",), "lm_head", frozen({"kernel": "lm_head"})),
        Node("lm_head", "lm_head", ("hf", "w_lm"), ("logits",), "lm_head", frozen({"kernel": "lm_head"})),
        # Sampling reads the gathered logits; it is host-side / next-step work and costs nothing here.
        Node("sample", "sample", ("logits",), ("next_token",), "lm_head", frozen({"kernel": None})),
    ))
    return Graph(model=m.name, sections=(prologue, block, epilogue), tensors=frozen(tensors),
                 attrs=frozen({"phase": "model"}))
