"""Roofline time (B.1 step 5, B.3, Eq. 9): t = max(F / (P eta_F), D / (W eta_D)) per kernel.

A kernel is a run of consecutive compute nodes with the same ``kernel`` name (fusion pass).
eta_F and eta_D are the accelerator's step functions, selected on the kernel's size summed over
its repetitions in one decode step (``efficiency_basis: step``, the default: reproduces the
paper's attention times, see README.md) or on one instance (``kernel``, literal B.3).
The result stays symbolic (SymPy Piecewise) until the plan substitutes a deployment.
"""

from __future__ import annotations

from dataclasses import replace

import sympy as sp

from gxnet.accelerators import AcceleratorSpec, EfficiencySteps
from gxnet.ir import Graph, frozen
from gxnet.passes.fusion import kernels_of


def _steps(fn: EfficiencySteps, x: sp.Expr) -> sp.Expr:
    pieces = [(sp.Float(v), x <= sp.Float(u)) for v, u in zip(fn.values, fn.upper)]
    return sp.Piecewise(*pieces, (sp.Float(fn.values[-1]), True))


def kernel_time_expr(acc: AcceleratorSpec, flops: sp.Expr, nbytes: sp.Expr, repeat: int) -> sp.Expr:
    scale = repeat if acc.efficiency_basis == "step" else 1
    t_f = flops / (sp.Float(acc.peak_flops) * _steps(acc.eta_compute, flops * scale))
    t_d = nbytes / (sp.Float(acc.hbm_bandwidth_Bps) * _steps(acc.eta_memory, nbytes * scale))
    # unevaluated: SymPy's Max would try to order two Piecewise expressions symbolically (≈ 0.3 s of a
    # process's first compile); max() of the lambdified pair gives the same value either way
    return sp.Max(t_f, t_d, evaluate=False)


def annotate_roofline(g: Graph, acc: AcceleratorSpec) -> Graph:
    sections = []
    for sec in g.sections:
        new_nodes = {n.name: n for n in sec.nodes}
        for kernel, nodes in kernels_of(sec):
            if kernel == "@collective":
                continue
            flops = sp.Add(*(n.attrs["flops"] for n in nodes))
            nbytes = sp.Add(*(n.attrs["hbm_bytes"] for n in nodes))
            first = nodes[0]
            new_nodes[first.name] = first.with_attrs(
                kernel_flops=flops, kernel_bytes=nbytes,
                time_s=kernel_time_expr(acc, flops, nbytes, sec.repeat))
            for n in nodes[1:]:
                new_nodes[n.name] = n.with_attrs(fused_into=first.name)
        sections.append(replace(sec, nodes=tuple(new_nodes[n.name] for n in sec.nodes)))
    return replace(g, sections=tuple(sections)).with_attrs(accelerator=acc.name,
                                                           efficiency_basis=acc.efficiency_basis)
