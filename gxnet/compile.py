"""Compile a deployment family's graph once, evaluate it per deployment cheaply.

``compiled_program(model, scheme, precision, accelerator)`` runs the symbolic pass pipeline
once (SymPy shapes over B, S, the mesh degrees and the MoE load symbols) and lambdifies every
quantity the plan, the demand and the memory model need into ONE Python function of the
symbol values. Per deployment the plan then substitutes concrete values once -- no SymPy at
evaluation time. Cached with an explicit, keyed ``lru_cache`` (all keys are frozen specs).

Compiling costs 0.3-0.8 s per family, every process again. A caller may attach a
``ProgramStore`` (``attach_program_store``; ``pipelines.program_store`` keeps one on disk, keyed
by the source of the code that compiles): a program is then kept as plain data -- its slots and
the lambdified function's Python source, which reads only ``math`` and a few builtins -- and a later
process executes that source instead of compiling. The symbolic graph is rebuilt only when
asked for (``CompiledProgram.graph``).
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import inspect
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Protocol

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
    family: tuple  # (model, scheme, precision, accelerator, phase): what ``compiled_program`` was asked
    sections: tuple[SectionProgram, ...]
    weights_index: int  # per-rank weight bytes (all layers)
    kv_index: int  # per-rank KV-cache bytes (all layers, whole batch)
    evaluate: Callable[..., list]  # f(B, S, KVP, TPA, EP, TPE, E_loc, T_exp, R_rows) -> values

    @property
    def graph(self) -> Graph:
        """The fully annotated symbolic graph (for inspection, calibration shapes and tests)."""
        return annotated_graph(*self.family)


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
def annotated_graph(model: ModelSpec, scheme: str, precision: PrecisionSpec, accelerator: AcceleratorSpec,
                    phase: str = "decode") -> Graph:
    # phase="prefill": same passes with the prefill specialization (B = tokens of the rank,
    # S = prompt length; see passes/prefill.py); the evaluation signature is unchanged.
    return PassManager(standard_pipeline(scheme, precision, accelerator, phase)).run(build_model_graph(model))


@lru_cache(maxsize=64)
def compiled_program(model: ModelSpec, scheme: str, precision: PrecisionSpec,
                     accelerator: AcceleratorSpec, phase: str = "decode") -> CompiledProgram:
    family = (model, scheme, precision, accelerator, phase)
    store = _store[0] if _store else None
    if store is None:
        return _compile(family)
    spec = repr(family)  # frozen specs: their repr spells every field
    key = hashlib.sha256(spec.encode()).hexdigest()[:32]
    prog = program_from_record(store.load(key), spec, family)
    if prog is None:
        prog = _compile(family)
        record = program_record(prog, spec)
        if record is not None:
            store.save(key, record)
    return prog


def _compile(family: tuple) -> CompiledProgram:
    g = annotated_graph(*family)
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
    return CompiledProgram(family=family, sections=tuple(sections), weights_index=w_i, kv_index=w_i + 1, evaluate=fn)


# -- programs as plain data (a ProgramStore keeps them between processes) ----------------------

class ProgramStore(Protocol):
    def load(self, key: str) -> dict | None:
        """The record stored under ``key`` (a hash of the family's specs), or None."""

    def save(self, key: str, record: dict) -> None:
        """Keep ``record`` under ``key``; may silently do nothing."""


_store: list[ProgramStore] = []  # at most one attached store (explicit: attach_program_store)
RECORD_FORMAT = 1
_SOURCE_FILE = "<gxnet compiled program>"


def attach_program_store(store: ProgramStore | None) -> ProgramStore | None:
    """Use ``store`` behind the in-process cache from now on (None: none); returns the previous one.
    Programs already compiled in this process stay cached (``compiled_program.cache_clear()``)."""
    previous = _store[0] if _store else None
    _store.clear()
    if store is not None:
        _store.append(store)
    return previous


# the builtins SymPy's Python printer writes (Max, Min, Abs, ...); a program reading any other
# name than these and the math module's is neither kept nor loaded
_BUILTINS = ("abs", "float", "int", "max", "min", "pow", "round")


def _math_namespace() -> dict:
    """All a program's source may read: the ``math`` module's names, as ``lambdify(...,
    modules=["math"])`` gives them, and ``_BUILTINS`` (no other builtins when it runs)."""
    out = {name: getattr(math, name) for name in dir(math) if not name.startswith("_")}
    out["__builtins__"] = {name: getattr(builtins, name) for name in _BUILTINS}
    return out


def _reads_only(code, namespace: dict, fn_globals: dict | None = None, defines: str = "") -> bool:
    """Every global name ``code`` reads (but the one it ``defines``) is in ``namespace`` (or its
    builtins) and, for a function compiled elsewhere, bound there to the same object."""
    for name in _global_names(code) - {defines}:
        ours = namespace.get(name, namespace["__builtins__"].get(name))
        if ours is None:
            return False
        if fn_globals is not None and fn_globals.get(name, getattr(builtins, name, None)) is not ours:
            return False
    return True


def _global_names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


def program_record(prog: CompiledProgram, spec: str) -> dict | None:
    """``prog`` as plain data, or None when its function reads anything but ``math`` and
    ``_BUILTINS`` (then it is not kept: executing its source elsewhere might not give the same
    function)."""
    fn = prog.evaluate
    if not _reads_only(fn.__code__, _math_namespace(), fn.__globals__):
        return None
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    sections = [{"name": sec.name, "repeat": sec.repeat,
                 "slots": [{"kind": "kernel" if isinstance(slot, KernelSlot) else "collective", **dataclasses.asdict(slot)}
                           for slot in sec.slots]} for sec in prog.sections]
    return {"format": RECORD_FORMAT, "spec": spec, "symbols": [str(x) for x in EVAL_SYMBOLS],
            "function": fn.__name__, "source": source, "sections": sections,
            "weights_index": prog.weights_index, "kv_index": prog.kv_index}


def program_from_record(record, spec: str, family: tuple) -> CompiledProgram | None:
    """The program ``program_record`` wrote, or None when ``record`` is absent, of another
    format, for other specs or symbols, or does not rebuild (then the caller compiles)."""
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT or record.get("spec") != spec:
        return None
    if record.get("symbols") != [str(x) for x in EVAL_SYMBOLS]:
        return None
    try:
        kinds = {"kernel": KernelSlot, "collective": CollectiveSlot}
        sections = tuple(
            SectionProgram(sec["name"], sec["repeat"],
                           tuple(kinds[slot.pop("kind")](**slot) for slot in (dict(x) for x in sec["slots"])))
            for sec in record["sections"])
        code = compile(record["source"], _SOURCE_FILE, "exec")
        namespace = _math_namespace()
        if not _reads_only(code, namespace, defines=record["function"]):  # the module: one def, nothing else read
            return None
        exec(code, namespace)  # noqa: S102 -- our own store's code, reading only math and _BUILTINS
        fn = namespace.get(record["function"])
        if not inspect.isfunction(fn) or not _reads_only(fn.__code__, namespace):
            return None
        return CompiledProgram(family=family, sections=sections, weights_index=int(record["weights_index"]),
                               kv_index=int(record["kv_index"]), evaluate=fn)
    except (KeyError, TypeError, ValueError, SyntaxError):
        return None
