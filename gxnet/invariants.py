"""Executable spec of a valid GXNET graph (cf. tinygrad's uop/spec.py).

``check_graph`` returns a list of violations (empty = valid). Checked after every pass when the
pass manager runs with ``check_invariants=True`` (the tests do):
  * references: every node input/output is a known tensor, produced at most once per section;
  * shapes agree: a dim name has one global size across the graph, and inputs of a compute node
    that share a dim name agree on its per-rank size (inputs still awaiting a collective, the
    node's ``requires``, are checked once converted);
  * sharded dims divide their axis (numerically, when ``bindings`` give concrete degrees);
    padded dims (context and vocabulary shards, MoE rows) are exempt by construction;
  * partial values (pending reduction) are consumed only by collectives;
  * collectives never dropped: every collective of the previous graph is still present.
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping

import sympy as sp

from gxnet.ir import AXIS_SIZE, Graph


def _equal(a: sp.Expr, b: sp.Expr, bindings: Mapping | None) -> bool:
    if a == b:
        return True
    if bindings is not None:
        try:
            return float(sp.sympify(a).subs(bindings)) == float(sp.sympify(b).subs(bindings))
        except TypeError:
            pass
    return sp.simplify(a - b) == 0


def _collective_keys(g: Graph) -> Counter:
    return Counter((s.name, n.op, n.attrs.get("axis"), n.attrs.get("for_node")) for s, n in g.collectives())


def check_graph(g: Graph, before: Graph | None = None, bindings: Mapping | None = None) -> list[str]:
    problems: list[str] = []
    T = g.tensors
    # references and single assignment per section
    for sec in g.sections:
        produced: set[str] = set()
        for n in sec.nodes:
            for name in n.inputs + n.outputs:
                if name not in T:
                    problems.append(f"{n.name}: unknown tensor {name!r}")
            for name in n.outputs:
                if name in produced:
                    problems.append(f"{n.name}: tensor {name!r} produced twice in section {sec.name}")
                produced.add(name)
    if problems:
        return problems
    # one global size per dim name
    sizes: dict[str, tuple[str, sp.Expr]] = {}
    for name, t in T.items():
        for dim, size in zip(t.dims, t.shape):
            if dim in sizes and not _equal(sizes[dim][1], size, bindings):
                problems.append(f"dim {dim} is {sizes[dim][1]} in {sizes[dim][0]} but {size} in {name}")
            sizes.setdefault(dim, (name, size))
        if t.local_shape is not None and len(t.local_shape) != len(t.shape):
            problems.append(f"{name}: local shape rank differs from global shape")
    # per-rank sizes agree between inputs of a compute node
    for sec, n in g.nodes():
        if n.is_collective:
            continue
        seen: dict[str, tuple[str, sp.Expr]] = {}
        pending = n.attrs.get("requires") or {}
        for name in n.inputs:
            t = T[name]
            if t.local_shape is None:
                continue
            if t.placement.partial and name not in pending:
                problems.append(f"{n.name}: consumes {name} while it is still partial over "
                                f"{'*'.join(t.placement.partial)} (missing collective)")
            if name in pending:  # converted by the collective-insertion pass before use
                continue
            for dim, ls in zip(t.dims, t.local_shape):
                if dim in seen and not _equal(seen[dim][1], ls, bindings):
                    problems.append(f"{n.name}: per-rank {dim} is {seen[dim][1]} in {seen[dim][0]} but {ls} in {name}")
                seen.setdefault(dim, (name, ls))
    # sharded dims divide their axis
    if bindings is not None:
        for name, t in T.items():
            for dim, axes in t.placement.shards:
                if dim in t.padded:
                    continue
                size = sp.sympify(t.shape[t.dims.index(dim)]).subs(bindings)
                n_ax = sp.Mul(*(AXIS_SIZE[a] for a in axes)).subs(bindings)
                if size.is_number and n_ax.is_number and int(size) % int(n_ax):
                    problems.append(f"{name}: dim {dim}={size} is sharded over {'*'.join(axes)}={n_ax}, "
                                    "which does not divide it")
    # collectives never dropped
    if before is not None:
        missing = _collective_keys(before) - _collective_keys(g)
        for key in missing:
            problems.append(f"collective {key[1]} on {key[2]} for {key[3]} in section {key[0]} was dropped")
    return problems
