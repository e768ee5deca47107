"""Prefill specialization: a prompt of S tokens per request, producing its KV cache.

Same graph and passes as decode (B.1); what changes is the attention kernel. Token rows are
folded into ``B`` (every per-token kernel -- norms, projections, router, experts -- depends on
B x Tq only), so Tq = 1 as in decode and ``B`` counts the prompt tokens a rank processes. The
attention node becomes a causal flash-attention prefill kernel (marked ``prefill``): each of the
B query tokens attends to its prefix, on average (S + 1) / 2 keys of the S-token prompt, and the
kernel streams the sequence's K/V once for all of its queries (tiled over queries, as
FlashAttention does) instead of once per user as flash-decode does.
"""

from __future__ import annotations

from dataclasses import replace

from gxnet.ir import Graph, Tq


def specialize_prefill(g: Graph) -> Graph:
    tensors = {name: replace(t, shape=tuple(s.subs(Tq, 1) for s in t.shape)) for name, t in g.tensors.items()}

    def mark(sec, node):
        if node.op in ("flash_attention", "latent_attention"):
            return node.with_attrs(prefill=True, kernel="flash_prefill")
        return node

    return g.with_tensors(tensors).map_nodes(mark).with_attrs(phase="prefill", new_tokens_per_user=1)
