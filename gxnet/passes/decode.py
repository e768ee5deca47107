"""Decode specialization (B.1 step 1): one new token per user against a KV cache of S tokens.

The model graph is written for ``Tq`` new tokens per user; decode fixes Tq = 1. (A later
prefill pass would keep Tq = prompt length and replace the KV read by the causal prompt.)
"""

from __future__ import annotations

from dataclasses import replace

from gxnet.ir import Graph, Tq


def specialize_decode(g: Graph) -> Graph:
    tensors = {name: replace(t, shape=tuple(s.subs(Tq, 1) for s in t.shape)) for name, t in g.tensors.items()}
    return g.with_tensors(tensors).with_attrs(phase="decode", new_tokens_per_user=1)
