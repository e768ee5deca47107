"""Resource annotation (B.1 step 5): FLOPs and HBM bytes per compute node, per rank.

Counted from the per-rank (local) shapes and element widths; a multiply-add is 2 FLOP.
The grouped expert GEMM reads the weights of every *active* expert on its rank (B.3) and runs
``T_exp`` tokens per active expert (B.2); flash-decode reads the rank's KV shard once per user
(query heads of one KV group share the read, GQA).
"""

from __future__ import annotations

import sympy as sp

from gxnet.ir import E_loc, T_exp, Graph, Node, TensorType


def _dim(t: TensorType, dim: str) -> sp.Expr:
    return t.local_shape[t.dims.index(dim)]


def _io_bytes(g: Graph, node: Node, skip_roles=("weight", "kv")) -> sp.Expr:
    total = sp.Integer(0)
    for name in node.inputs + node.outputs:
        t = g.tensors[name]
        if t.role not in skip_roles and t.role != "index":
            total += t.nbytes()
    return total


def node_resources(g: Graph, node: Node) -> tuple[sp.Expr, sp.Expr]:
    T = g.tensors
    ins = [T[i] for i in node.inputs]
    op = node.op
    io = _io_bytes(g, node)
    weights = sum((t.nbytes() for t in ins if t.role == "weight"), sp.Integer(0))
    if op == "embedding":
        x = T[node.outputs[0]]
        row_bytes = _dim(ins[1], "H") * sp.Rational(ins[1].bits, 8)
        return sp.Integer(0), _dim(x, "B") * _dim(x, "Tq") * row_bytes + x.nbytes()
    if op in ("rmsnorm", "add"):
        return 4 * ins[0].numel(), io
    if op == "qkv_proj":
        h, w = ins[0], ins[1]
        rows = _dim(h, "B") * _dim(h, "Tq")
        return 2 * rows * _dim(w, "H") * _dim(w, "Hqkv") * _dim(w, "d"), weights + io
    if op == "kv_append":  # K and V (GQA) or the latent with its rope key (MLA)
        bits = T[node.outputs[0]].bits
        return sp.Integer(0), sp.Add(*(t.numel() for t in ins)) * sp.Rational(bits, 8)
    if op == "matmul":  # activation rows x every weight matrix of the node (biases: bytes only)
        rows = _dim(ins[0], "B") * _dim(ins[0], "Tq")
        macs = sum((t.numel() for t in ins if t.role == "weight" and len(t.dims) > 1), sp.Integer(0))
        return 2 * rows * macs, weights + io
    if op == "latent_attention":
        return _latent_attention(T, node, ins, io)
    if op == "flash_attention":
        q, kv = ins[0], ins[1]
        ctx = _dim(kv, node.attrs["context_dim"])
        if node.attrs.get("prefill"):
            # causal prefill (passes/prefill.py): B query tokens of one sequence, each attending
            # to (S + 1) / 2 keys on average; K/V of the sequence streamed once for all queries
            flops = 4 * _dim(q, "B") * _dim(q, "Tq") * _dim(q, "Hq") * _dim(q, "d") * (ctx + 1) / 2
            return flops, kv.nbytes() / _dim(kv, "B") + io
        flops = 4 * _dim(q, "B") * _dim(q, "Tq") * _dim(q, "Hq") * _dim(q, "d") * ctx
        return flops, kv.nbytes() + io
    if op in ("attn_combine", "latent_combine"):
        return 4 * ins[0].numel(), io
    if op == "o_proj":
        o, w = ins[0], ins[1]
        rows = _dim(o, "B") * _dim(o, "Tq")
        return 2 * rows * _dim(w, "A") * _dim(w, "H"), weights + io
    if op == "router":
        h, w = ins[0], ins[1]
        rows = _dim(h, "B") * _dim(h, "Tq")
        return 2 * rows * _dim(w, "H") * _dim(w, "E"), weights + io
    if op == "expert_swiglu":
        h, w = ins[0], ins[1]
        width, hidden = _dim(w, "W"), _dim(w, "H")
        tokens = E_loc * T_exp
        per_expert = 3 * hidden * width * sp.Rational(w.bits, 8)
        if node.attrs.get("bias"):
            per_expert += (2 * width + hidden) * sp.Rational(w.bits, 8)
        y = T[node.outputs[0]]
        act = (tokens * hidden + _dim(y, "Rw") * hidden) * sp.Rational(y.bits, 8)
        return 2 * 3 * hidden * width * tokens, E_loc * per_expert + act
    if op == "expert_combine":
        y = ins[0]
        return 2 * y.numel(), io
    if op == "lm_head":
        h, w = ins
        rows = _dim(h, "B") * _dim(h, "Tq")
        return 2 * rows * _dim(w, "H") * _dim(w, "V"), weights + io
    if op == "sample":
        return sp.Integer(0), sp.Integer(0)
    raise ValueError(f"no resource rule for op {op!r} ({node.name})")


def _latent_attention(T, node: Node, ins, io) -> tuple[sp.Expr, sp.Expr]:
    """MLA over the latent cache (absorbed form): scores over C = kv_lora_rank + rope dims, values
    over the kv_lora_rank latent; every query head reads the same latent (MQA-like)."""
    q, kv = ins[0], ins[1]
    ctx = _dim(kv, node.attrs["context_dim"])
    per_pos = _dim(q, "C") + _dim(T[node.outputs[0]], "R")
    heads = _dim(q, "B") * _dim(q, "Tq") * _dim(q, "Hq")
    if node.attrs.get("prefill"):
        return 2 * heads * per_pos * (ctx + 1) / 2, kv.nbytes() / _dim(kv, "B") + io
    return 2 * heads * per_pos * ctx, kv.nbytes() + io


def annotate_resources(g: Graph) -> Graph:
    def ann(sec, n: Node) -> Node:
        if n.is_collective:
            return n
        flops, nbytes = node_resources(g, n)
        return n.with_attrs(flops=sp.sympify(flops), hbm_bytes=sp.sympify(nbytes))

    return g.map_nodes(ann).with_attrs(resources=True)
