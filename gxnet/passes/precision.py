"""Precision pass (B.1 step 2): element widths by tensor role (FP4 baseline, see precision.py)."""

from __future__ import annotations

from dataclasses import replace

from gxnet.ir import Graph
from gxnet.precision import PrecisionSpec


def assign_precision(g: Graph, p: PrecisionSpec) -> Graph:
    bits = {"weight": p.weights_bits, "kv": p.kv_bits, "activation": p.activations_bits,
            "stat": p.softmax_stat_bits, "index": 32}
    tensors = {n: replace(t, bits=bits[t.role]) for n, t in g.tensors.items()}
    return g.with_tensors(tensors).with_attrs(precision=p.name, comm_bits=p.comm_bits,
                                              softmax_stat_bits=p.softmax_stat_bits)
