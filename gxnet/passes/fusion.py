"""Fusion (B.1 step 4, B.3): operators become fused kernels (QKV projection, flash-decode,
grouped expert GEMM, ...) and kernels between two collectives form one execution window.

Each compute node keeps its ``kernel`` name; this pass numbers the execution windows within a
section (``window``; a collective closes the current window). The launch overhead itself is
charged at execution time to the first kernel after each collective (and the first kernel of
the step), because whether a repeated section's first kernel opens a window depends on what ran
before it.
"""

from __future__ import annotations

from dataclasses import replace

from gxnet.ir import Graph, frozen


def fuse_windows(g: Graph) -> Graph:
    sections = []
    for sec in g.sections:
        window, nodes = 0, []
        for n in sec.nodes:
            if n.is_collective:
                window += 1
                nodes.append(n)
                continue
            nodes.append(n.with_attrs(window=window))
        sections.append(replace(sec, nodes=tuple(nodes)))
    return replace(g, sections=tuple(sections)).with_attrs(fused=True)


def kernels_of(section) -> list[tuple[str, list]]:
    """Consecutive compute nodes with the same kernel name form one kernel, in order;
    collectives stand alone as ("@collective", [node])."""
    out: list[tuple[str, list]] = []
    for n in section.nodes:
        if n.is_collective:
            out.append(("@collective", [n]))
            continue
        k = n.attrs.get("kernel")
        if k is None:
            continue
        if out and out[-1][0] == k:
            out[-1][1].append(n)
        else:
            out.append((k, [n]))
    return out
