"""Model-level graph of one forward step (paper 003, B.1 and Figure 26).

``build_model_graph(model)`` returns an unsharded graph: token embedding, the decoder layers as
runs of a repeated block (one layer for Megatron, a sliding/full pair for GPT-OSS; DeepSeek-V3:
3 dense layers, then 58 MoE layers), final norm and LM head. Shapes are SymPy expressions in the
batch ``B``, the new tokens per user ``Tq`` (the decode pass fixes Tq = 1) and the cached context
``S``.

Attention: GQA (embedding, RMSNorm, Q/K/V projections with optional bias and q/k norm, KV
append, flash-decode (full, or sliding window with sinks), rescale-combine of partial attention,
output projection), or MLA in its absorbed decode form (DeepSeek-V2 Section 2.1.2): the latent
``c`` (kv_lora_rank) and the shared rope key are cached; the key up-projection W_UK is absorbed
into the query (q_absorb), attention runs over the latent, the value up-projection W_UV is
applied to the attention output (v_up), then the output projection.

FFN: router (top-k, optional bias), grouped SwiGLU expert GEMM, shared experts, weighted expert
sum; or a dense SwiGLU FFN. LM head and sampling close the step.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from gxnet.ir import B, Graph, Node, S, Section, TensorType, Tq, frozen
from gxnet.models import ModelSpec

# Weight tensor (base name) -> weight group of ``ModelSpec.bf16_weights``; unlisted weights are
# attention weights.
WEIGHT_GROUP = {"w_emb": "embedding", "w_lm": "lm_head", "w_router": "router", "b_router": "router",
                "w_experts": "routed_experts", "b_experts": "routed_experts", "w_shared": "shared_experts", "w_dense": "dense_ffn"}


def _t(dims, shape, role) -> TensorType:
    return TensorType(dims=tuple(dims), shape=tuple(sp.sympify(x) for x in shape), role=role)


def _act(*extra) -> TensorType:
    dims, shape = zip(*extra) if extra else ((), ())
    return _t(("B", "Tq") + tuple(dims), (B, Tq) + tuple(shape), "activation")


def _context(m: ModelSpec, kind: str):
    return ("S", S) if kind == "full" else ("Sw", sp.Min(S, m.window_tokens))


def _gqa_attention(m: ModelSpec, p: str, kind: str, x_in: str, T: dict) -> list[Node]:
    H, d, Hq, Hkv = m.hidden, m.head_dim, m.q_heads, m.kv_heads
    ctx_dim, ctx = _context(m, kind)
    T.update({
        f"{p}h": _act(("H", H)),
        f"{p}w_qkv": _t(("H", "Hqkv", "d"), (H, Hq + 2 * Hkv, d), "weight"),
        f"{p}q": _act(("Hq", Hq), ("d", d)),
        f"{p}k": _act(("Hkv", Hkv), ("d", d)),
        f"{p}v": _act(("Hkv", Hkv), ("d", d)),
        f"{p}kv": _t(("B", ctx_dim, "Hkv", "kv2", "d"), (B, ctx, Hkv, 2, d), "kv"),
        # Attention output flattened to A = Hq x d (heads contiguous): Helix splits it by head over
        # TPA and, after the all-to-all, further over KVP (Figure 26: 16,384 -> 8192 projection).
        f"{p}o_part": _act(("A", Hq * d)),
        f"{p}lse": _t(("B", "Tq", "Hq"), (B, Tq, Hq), "stat"),
        f"{p}o": _act(("A", Hq * d)),
        f"{p}w_o": _t(("A", "H"), (Hq * d, H), "weight"),
        f"{p}a": _act(("H", H)),
    })
    qkv_in = (f"{p}h", f"{p}w_qkv")
    if m.qkv_bias:
        T[f"{p}b_qkv"] = _t(("Hqkv", "d"), (Hq + 2 * Hkv, d), "weight")
        qkv_in += (f"{p}b_qkv",)
    fd_in = (f"{p}q", f"{p}kv")
    if m.attention_sinks:
        T[f"{p}sinks"] = _t(("Hq",), (Hq,), "weight")
        fd_in += (f"{p}sinks",)
    o_in = (f"{p}o", f"{p}w_o")
    if m.o_bias:
        T[f"{p}b_o"] = _t(("H",), (H,), "weight")
        o_in += (f"{p}b_o",)
    att = dict(layer_kind=kind)
    return [
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
        Node(f"{p}o_proj", "o_proj", o_in, (f"{p}a",), "attention", frozen({**att, "kernel": "o_proj"})),
    ]


def _mla_attention(m: ModelSpec, p: str, kind: str, x_in: str, T: dict) -> list[Node]:
    """Absorbed MLA decode: cache C = kv_lora_rank + qk_rope_head_dim elements per token and layer."""
    H, Hq, R = m.hidden, m.q_heads, m.kv_lora_rank
    dn, dr, dv = m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim
    C = R + dr
    ctx_dim, ctx = _context(m, kind)
    T.update({
        f"{p}h": _act(("H", H)),
        f"{p}q": _act(("Hq", Hq), ("dqk", dn + dr)),
        f"{p}w_kva": _t(("H", "C"), (H, C), "weight"),
        f"{p}c": _act(("C", C)),
        f"{p}kv": _t(("B", ctx_dim, "C"), (B, ctx, C), "kv"),
        f"{p}w_uk": _t(("Hq", "dn", "R"), (Hq, dn, R), "weight"),
        f"{p}ql": _act(("Hq", Hq), ("C", C)),
        f"{p}ol_part": _act(("Hq", Hq), ("R", R)),
        f"{p}lse": _t(("B", "Tq", "Hq"), (B, Tq, Hq), "stat"),
        f"{p}ol": _act(("Hq", Hq), ("R", R)),
        f"{p}w_uv": _t(("Hq", "R", "dv"), (Hq, R, dv), "weight"),
        f"{p}ov": _act(("Hq", Hq), ("dv", dv)),
        f"{p}w_o": _t(("Hq", "dv", "H"), (Hq, dv, H), "weight"),
        f"{p}a": _act(("H", H)),
    })
    att = dict(layer_kind=kind, kernel="mla_proj")
    nodes = [Node(f"{p}attn_norm", "rmsnorm", (x_in,), (f"{p}h",), "attention", frozen(att))]
    if m.q_lora_rank:
        T[f"{p}w_qa"] = _t(("H", "Rq"), (H, m.q_lora_rank), "weight")
        T[f"{p}qa"] = _act(("Rq", m.q_lora_rank))
        T[f"{p}w_qb"] = _t(("Rq", "Hq", "dqk"), (m.q_lora_rank, Hq, dn + dr), "weight")
        nodes += [Node(f"{p}q_down", "matmul", (f"{p}h", f"{p}w_qa"), (f"{p}qa",), "attention", frozen(att)),
                  Node(f"{p}q_up", "matmul", (f"{p}qa", f"{p}w_qb"), (f"{p}q",), "attention", frozen(att))]
    else:
        T[f"{p}w_qb"] = _t(("H", "Hq", "dqk"), (H, Hq, dn + dr), "weight")
        nodes.append(Node(f"{p}q_proj", "matmul", (f"{p}h", f"{p}w_qb"), (f"{p}q",), "attention", frozen(att)))
    nodes += [
        Node(f"{p}kv_down", "matmul", (f"{p}h", f"{p}w_kva"), (f"{p}c",), "attention", frozen(att)),
        Node(f"{p}kv_append", "kv_append", (f"{p}c",), (f"{p}kv",), "attention", frozen(att)),
        Node(f"{p}q_absorb", "matmul", (f"{p}q", f"{p}w_uk"), (f"{p}ql",), "attention",
             frozen({**att, "kernel": "mla_absorb"})),
        Node(f"{p}flash_decode", "latent_attention", (f"{p}ql", f"{p}kv"), (f"{p}ol_part", f"{p}lse"), "attention",
             frozen({**att, "kernel": "flash_mla", "context_dim": ctx_dim})),
        Node(f"{p}attn_combine", "latent_combine", (f"{p}ol_part", f"{p}lse"), (f"{p}ol",), "attention",
             frozen({**att, "kernel": "o_proj"})),
        Node(f"{p}v_up", "matmul", (f"{p}ol", f"{p}w_uv"), (f"{p}ov",), "attention", frozen({**att, "kernel": "o_proj"})),
        Node(f"{p}o_proj", "matmul", (f"{p}ov", f"{p}w_o"), (f"{p}a",), "attention", frozen({**att, "kernel": "o_proj"})),
    ]
    return nodes


def _moe_ffn(m: ModelSpec, p: str, T: dict) -> tuple[list[Node], str]:
    H = m.hidden
    T.update({
        f"{p}w_router": _t(("H", "E"), (H, m.experts), "weight"),
        f"{p}gate": _act(("K", m.top_k)),
        f"{p}w_experts": _t(("E", "mat3", "H", "W"), (m.experts, 3, H, m.expert_width), "weight"),
        # Routed rows: B*Tq*k globally; the sharding pass pads each EP rank to the busiest (B.2).
        f"{p}y": _t(("Rw", "H"), (B * Tq * m.top_k, H), "activation"),
        f"{p}f": _act(("H", H)),
    })
    router_in = (f"{p}h2", f"{p}w_router")
    if m.router_bias:
        T[f"{p}b_router"] = _t(("E",), (m.experts,), "weight")
        router_in += (f"{p}b_router",)
    expert_in = (f"{p}h2", f"{p}w_experts", f"{p}gate")
    if m.expert_bias:  # gate and up biases (2 x width) and the down bias (hidden) of each expert
        T[f"{p}b_experts"] = _t(("E", "Wb"), (m.experts, 2 * m.expert_width + H), "weight")
        expert_in += (f"{p}b_experts",)
    nodes = [
        Node(f"{p}router", "router", router_in, (f"{p}gate",), "ffn", frozen({"kernel": "router", "top_k": m.top_k})),
        Node(f"{p}experts", "expert_swiglu", expert_in, (f"{p}y",), "ffn",
             frozen({"kernel": "expert_gemm", "bias": m.expert_bias})),
    ]
    sum_in = (f"{p}y", f"{p}gate")
    if m.shared_experts:
        width = m.shared_experts * m.shared_expert_width  # shared experts run as one wide SwiGLU
        T[f"{p}w_shared"] = _t(("mat3", "H", "Ws"), (3, H, width), "weight")
        T[f"{p}s"] = _act(("H", H))
        nodes.append(Node(f"{p}shared_experts", "matmul", (f"{p}h2", f"{p}w_shared"), (f"{p}s",), "ffn",
                          frozen({"kernel": "shared_expert"})))
        sum_in += (f"{p}s",)
    nodes.append(Node(f"{p}expert_sum", "expert_combine", sum_in, (f"{p}f",), "ffn",
                      frozen({"kernel": "expert_combine"})))
    return nodes, "expert_combine"


def _dense_ffn(m: ModelSpec, p: str, T: dict) -> tuple[list[Node], str]:
    T[f"{p}w_dense"] = _t(("mat3", "H", "F"), (3, m.hidden, m.ffn_width), "weight")
    T[f"{p}fd"] = _act(("H", m.hidden))
    return [Node(f"{p}dense_ffn", "matmul", (f"{p}h2", f"{p}w_dense"), (f"{p}fd",), "ffn",
                 frozen({"kernel": "dense_ffn"}))], "dense_ffn"


def _layer(m: ModelSpec, p: str, kind: str, ffn: str, x_in: str, x_out: str, T: dict) -> list[Node]:
    attention = _mla_attention if m.is_mla else _gqa_attention
    nodes = attention(m, p, kind, x_in, T)
    T.update({f"{p}x1": _act(("H", m.hidden)), f"{p}h2": _act(("H", m.hidden))})
    if x_out != "x":
        T[x_out] = _act(("H", m.hidden))
    ffn_nodes, last_kernel = _moe_ffn(m, p, T) if ffn == "moe" else _dense_ffn(m, p, T)
    first_kernel = ffn_nodes[0].attrs["kernel"]
    out = f"{p}f" if ffn == "moe" else f"{p}fd"
    return nodes + [
        Node(f"{p}attn_residual", "add", (x_in, f"{p}a"), (f"{p}x1",), "ffn", frozen({"kernel": first_kernel})),
        Node(f"{p}ffn_norm", "rmsnorm", (f"{p}x1",), (f"{p}h2",), "ffn", frozen({"kernel": first_kernel})),
        *ffn_nodes,
        Node(f"{p}ffn_residual", "add", (f"{p}x1", out), (x_out,), "ffn", frozen({"kernel": last_kernel})),
    ]


def _decoder_sections(m: ModelSpec, T: dict) -> list[Section]:
    segments = m.segments()
    sections = []
    for si, (block, repeat) in enumerate(segments):
        dense_prefix = len(segments) > 1 and si == 0
        letter, name = ("D", "dense_layers") if dense_prefix else ("L", "decoder_block")
        nodes: list[Node] = []
        for j, (kind, ffn) in enumerate(block):
            x_in = "x" if j == 0 else f"{letter}{j - 1}.x_out"
            x_out = "x" if j == len(block) - 1 else f"{letter}{j}.x_out"
            nodes += _layer(m, f"{letter}{j}.", kind, ffn, x_in, x_out, T)
        sections.append(Section(name, tuple(nodes), repeat=repeat))
    return sections


@lru_cache(maxsize=64)  # explicit keyed cache: one graph per (frozen, hashable) model spec
def build_model_graph(model: ModelSpec) -> Graph:
    m = model
    H = m.hidden
    tensors: dict[str, TensorType] = {
        "tokens": _t(("B", "Tq"), (B, Tq), "index"),
        "w_emb": _t(("V", "H"), (m.vocab, H), "weight"),
        "x": _act(("H", H)),
    }
    prologue = Section("embedding", (
        Node("embed", "embedding", ("tokens", "w_emb"), ("x",), "embedding", frozen({"kernel": "embed"})),
    ))
    blocks = _decoder_sections(m, tensors)
    tensors.update({
        "hf": _act(("H", H)),
        "w_lm": _t(("H", "V"), (H, m.vocab), "weight"),
        "logits": _act(("V", m.vocab)),
        "next_token": _t(("B", "Tq"), (B, Tq), "index"),
    })
    epilogue = Section("lm_head", (
        Node("final_norm", "rmsnorm", ("x",), ("hf",), "lm_head", frozen({"kernel": "lm_head"})),
        Node("lm_head", "lm_head", ("hf", "w_lm"), ("logits",), "lm_head", frozen({"kernel": "lm_head"})),
        # Sampling reads the gathered logits; it is host-side / next-step work and costs nothing here.
        Node("sample", "sample", ("logits",), ("next_token",), "lm_head", frozen({"kernel": None})),
    ))
    return Graph(model=m.name, sections=(prologue, *blocks, epilogue), tensors=frozen(tensors),
                 attrs=frozen({"phase": "model", "tied_embeddings": m.tied_embeddings,
                               "bf16_weights": tuple(m.bf16_weights)}))
