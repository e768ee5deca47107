"""Precision pass (B.1 step 2): element widths by tensor role (FP4 baseline, see precision.py).

Quantized weights carry their block-scale overhead (MXFP4: one 8-bit scale per 32 elements =
4.25 bits per weight); weight groups the model keeps in BF16 (``ModelSpec.bf16_weights``, e.g.
DeepSeek-V3's embedding, LM head and router) stay at 16 bits whenever the weights are narrower.
"""

from __future__ import annotations

from dataclasses import replace

from gxnet.graph import WEIGHT_GROUP
from gxnet.ir import Graph, base_name
from gxnet.precision import PrecisionSpec


def weight_bits(p: PrecisionSpec, group: str, bf16_groups) -> object:
    """Bits per element of a weight in ``group`` (int, or a Rational with the scale overhead)."""
    if group in bf16_groups and p.weights_bits < 16:
        return 16
    return p.stored_weight_bits


def assign_precision(g: Graph, p: PrecisionSpec) -> Graph:
    bits = {"kv": p.kv_bits, "activation": p.activations_bits, "stat": p.softmax_stat_bits, "index": 32}
    bf16 = set(g.attrs.get("bf16_weights", ()))
    tensors = {}
    for n, t in g.tensors.items():
        if t.role == "weight":
            b = weight_bits(p, WEIGHT_GROUP.get(base_name(n), "attention"), bf16)
        else:
            b = bits[t.role]
        tensors[n] = replace(t, bits=b)
    return g.with_tensors(tensors).with_attrs(precision=p.name, comm_bits=p.comm_bits,
                                              softmax_stat_bits=p.softmax_stat_bits)
