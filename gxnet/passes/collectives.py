"""Collective insertion (Section 4.1, B.1 step 3): wherever a consumer needs a placement its
producer does not give, insert the collectives that convert one into the other.

Conversion rules, applied in order (paper 003, Figure 26):
  partial-softmax over X -> dim sharded over X : all-to-all on X (Helix KVP exchange of partial
                                                  outputs and log-sum-exp statistics)
  partial-sum over X     -> complete            : all-reduce on X (after the output projection;
                                                  TPE all-reduce after the experts)
  partial-sum over X     -> dim sharded over X  : reduce-scatter on X
  dim sharded over X     -> replicated          : all-gather on X (EP rows, LM-head logits)
The group follows from the mesh axis, the payload from the per-rank tensor shape and the
element width, and the call count from the section's repetition count. Inputs of one node
that need the same collective on the same axis travel in one call (o_part + lse).

Payload convention (the per-rank buffer sigma of Table 1, Figure 3): the bytes each rank holds
at the end -- all-reduce and all-to-all: the local buffer; all-gather: the gathered buffer.
"""

from __future__ import annotations

from dataclasses import replace

import sympy as sp

from gxnet.ir import AXIS_SIZE, Graph, Node, Placement, TensorType, frozen
from gxnet.precision import PrecisionSpec


def axis_name(axes: tuple[str, ...]) -> str:
    if set(axes) in ({"kvp", "tpa"}, {"world"}):
        return "world"
    if len(axes) != 1:
        raise ValueError(f"collective over axes {axes} is not a single mesh axis")
    return axes[0]


def conversion_steps(have: Placement, want: Placement) -> list[tuple[str, tuple[str, ...], Placement]]:
    steps = []
    cur = have
    if cur.partial and not want.partial:
        axes = cur.partial
        # the dim the partial axes end up splitting: want's axes for it = cur's axes + X
        sharded_dim = next((d for d, a in want.shards if a == cur.axes_of(d) + axes), None)
        refined = (Placement(tuple((d, a) for d, a in cur.shards if d != sharded_dim)
                             + ((sharded_dim, cur.axes_of(sharded_dim) + axes),))
                   if sharded_dim is not None else None)
        if cur.partial_kind == "softmax":
            # Partial outputs end split over X as well; their statistics (no such dim) travel in
            # the same exchange and end complete for the receiver's slice.
            cur = refined if refined is not None else Placement(cur.shards)
            steps.append(("alltoall", axes, cur))
        elif refined is not None:
            cur = refined
            steps.append(("reducescatter", axes, cur))
        else:
            cur = Placement(cur.shards)
            steps.append(("allreduce", axes, cur))
    for dim, axes in have.shards:
        if want.axes_of(dim) != axes and cur.axes_of(dim) == axes:
            cur = Placement(tuple((d, a) for d, a in cur.shards if d != dim), cur.partial, cur.partial_kind)
            steps.append(("allgather", axes, cur))
    if dict(cur.shards) != dict(want.shards) or cur.partial != want.partial:
        raise ValueError(f"no collective converts {have.describe()} into {want.describe()}")
    return steps


def _comm_bytes(t: TensorType, p: PrecisionSpec, shape) -> sp.Expr:
    bits = p.softmax_stat_bits if t.role == "stat" else p.comm_bits
    return sp.ceiling(sp.Mul(*shape) * sp.Rational(bits, 8))


def insert_collectives(g: Graph, p: PrecisionSpec) -> Graph:
    tensors = dict(g.tensors)
    # A collective belongs to the region of the operator that produced the data it moves
    # (Table 1: the all-reduce after the output projection is an attention collective).
    producer_region = {out: n.region for _, n in g.nodes() for out in n.outputs}
    sections = []
    for sec in g.sections:
        nodes: list[Node] = []
        for node in sec.nodes:
            need = node.attrs.get("requires") or {}
            if not need:
                nodes.append(node)
                continue
            plans = {inp: conversion_steps(tensors[inp].placement, want) for inp, want in need.items()}
            current = {inp: inp for inp in need}
            for k in range(max(len(s) for s in plans.values())):
                groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
                for inp, steps in plans.items():
                    if k < len(steps):
                        groups.setdefault(steps[k][:2], []).append(inp)
                for (coll, axes), inps in groups.items():
                    axis = axis_name(axes)
                    outs, payload = [], sp.Integer(0)
                    for inp in inps:
                        src = tensors[current[inp]]
                        new_pl = plans[inp][k][2]
                        new_local = list(src.local_shape)
                        if coll == "allgather":
                            gathered = [d for d, a in src.placement.shards if a == axes and not new_pl.axes_of(d)]
                            for d in gathered:
                                i = src.dims.index(d)
                                new_local[i] = new_local[i] * AXIS_SIZE[axis]
                            payload += _comm_bytes(src, p, new_local)
                        else:
                            payload += _comm_bytes(src, p, src.local_shape)
                        out = f"{current[inp]}@{coll}_{axis}"
                        tensors[out] = replace(src, placement=new_pl, local_shape=tuple(new_local))
                        outs.append(out)
                    nodes.append(Node(
                        f"{node.name}.{coll}_{axis}", coll, tuple(current[i] for i in inps), tuple(outs),
                        producer_region.get(inps[0], node.region), frozen({"axis": axis, "payload_bytes": payload, "for_node": node.name})))
                    for inp, out in zip(inps, outs):
                        current[inp] = out
            new_inputs = tuple(current.get(i, i) for i in node.inputs)
            attrs = {k: v for k, v in node.attrs.items() if k != "requires"}
            nodes.append(replace(node, inputs=new_inputs, attrs=frozen(attrs)))
        sections.append(replace(sec, nodes=tuple(nodes)))
    return replace(g, sections=tuple(sections), tensors=frozen(tensors))
