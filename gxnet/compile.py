"""Compile a deployment family's graph once, evaluate it per deployment cheaply.

``compiled_program(model, scheme, precision, accelerator)`` runs the symbolic pass pipeline
once (SymPy shapes over B, S, the mesh degrees and the MoE load symbols) and lambdifies every
quantity the plan, the demand and the memory model need into ONE Python function of the
symbol values. Per deployment the plan then substitutes concrete values once -- no SymPy at
evaluation time. Cached with an explicit, keyed ``lru_cache`` (all keys are frozen specs).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import sympy as sp

from gxnet.accelerators import AcceleratorSpec
from gxnet.graph import build_model_graph
from gxnet.ir import SYMBOLS, Graph, Tq
from gxnet.models import ModelSpec
from gxnet.passes import PassManager, standard_pipeline
from gxnet.passes.fusion import kernels_of
from gxnet.precision import PrecisionSpec

EVAL_SYMBOLS = tuple(s for s in SYMBOLS if s != Tq)  # Tq is fixed to 1 by the decode pass


@dataclass(frozen=True, slots=True)
class KernelSlot:
    name: str  # first node of the fused kernel, e.g. "L0.flash_decode"
    kernel: str  # fused kernel name, e.g. "flash_decode"
    region: str
    layer_kind: str
    index: int  # position of (time, flops, bytes) in the value vector
    ops: int = 1  # graph operators fused into it (an eager engine launches each: gxnet.kernels)


@dataclass(frozen=True, slots=True)
class CollectiveSlot:
    name: str
    region: str
    axis: str
    collective: str
    index: int  # position of the payload in the value vector


@dataclass(frozen=True, slots=True)
class SectionProgram:
    name: str
    repeat: int
    slots: tuple  # KernelSlot | CollectiveSlot, in execution order


@dataclass(frozen=True, slots=True)
class CompiledProgram:
    graph: Graph  # the fully annotated symbolic graph (for inspection and tests)
    sections: tuple[SectionProgram, ...]
    weights_index: int  # per-rank weight bytes (all layers)
    kv_index: int  # per-rank KV-cache bytes (all layers, whole batch)
    evaluate: Callable[..., list]  # f(B, S, KVP, TPA, EP, TPE, E_loc, T_exp, R_rows) -> values


def _memory_exprs(g: Graph) -> tuple[sp.Expr, sp.Expr]:
    weights, kv = sp.Integer(0), sp.Integer(0)
    # tied embeddings: the LM head reads the embedding matrix, stored once
    counted: set[str] = {"w_lm"} if g.attrs.get("tied_embeddings") else set()
    for sec in g.sections:
        names = {t for n in sec.nodes for t in n.inputs + n.outputs}
        for name in sorted(names):
            t = g.tensors[name]
            if name in counted or t.role not in ("weight", "kv"):
                continue
            counted.add(name)
            if t.role == "weight":
                weights += sec.repeat * t.nbytes()
            else:
                kv += sec.repeat * t.nbytes()
    return weights, kv


@lru_cache(maxsize=64)
def compiled_program(model: ModelSpec, scheme: str, precision: PrecisionSpec,
                     accelerator: AcceleratorSpec, phase: str = "decode") -> CompiledProgram:
    # phase="prefill": same passes with the prefill specialization (B = tokens of the rank,
    # S = prompt length; see passes/prefill.py); the evaluation signature is unchanged.
    g = PassManager(standard_pipeline(scheme, precision, accelerator, phase)).run(build_model_graph(model))
    exprs: list[sp.Expr] = []
    sections = []
    for sec in g.sections:
        slots = []
        for kernel, nodes in kernels_of(sec):
            first = nodes[0]
            if kernel == "@collective":
                slots.append(CollectiveSlot(first.name, first.region, first.attrs["axis"], first.op, len(exprs)))
                exprs.append(first.attrs["payload_bytes"])
            else:
                slots.append(KernelSlot(first.name, kernel, first.region, first.attrs.get("layer_kind", ""), len(exprs),
                                        len(nodes)))
                exprs += [first.attrs["time_s"], first.attrs["kernel_flops"], first.attrs["kernel_bytes"]]
        sections.append(SectionProgram(sec.name, sec.repeat, tuple(slots)))
    weights, kv = _memory_exprs(g)
    w_i = len(exprs)
    exprs += [weights, kv]
    fn = sp.lambdify(EVAL_SYMBOLS, exprs, modules=["math"], cse=True)
    return CompiledProgram(graph=g, sections=tuple(sections), weights_index=w_i, kv_index=w_i + 1, evaluate=fn)
