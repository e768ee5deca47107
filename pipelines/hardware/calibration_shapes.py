"""The fused kernels of one decode step at their exact per-rank shapes (pure: no torch).

Read off GXNET's compiled, sharded graph (``gxnet.compile``): every fused kernel (``kernels_of``
of each section: QKV projection = RMSNorm + QKV GEMM + KV append; flash-decode over the local
KV shard; output projection = Helix combine + row-parallel GEMM; router = residual + RMSNorm +
router GEMM; grouped SwiGLU expert GEMM; expert combine; embedding; LM head) becomes a
``KernelShape``: its graph nodes with every tensor's per-rank (local) shape, substituted with
the deployment's values, once per distinct rank behaviour (track: busiest / lightest EP ranks,
paper 003 B.2, B.4), plus GXNET's FLOPs, HBM bytes and roofline time for it. Entry names and
order are those of ``gxnet.plan`` (``ComputeEntry.name``), so a measured table maps back 1:1.

Sizes that do not fit a device are scaled through the two symbols that grow without bound in
decode: the context ``S`` (KV shard of flash-decode) and the active experts per rank ``E_loc``
(grouped expert GEMM). ``shapes_at(d, track, S=..., E_loc=...)`` re-evaluates shapes and HBM
bytes at a smaller value, so a measurement there can be extrapolated linearly in HBM bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from gxnet.deployment import Deployment
from gxnet.ir import SYMBOLS
from gxnet.moe import moe_load
from gxnet.passes.fusion import kernels_of
from gxnet.plan import program_of

SCALABLE = ("S", "E_loc")


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorShape:
    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    role: str

    @property
    def numel(self) -> int:
        n = 1
        for x in self.shape:
            n *= x
        return n


@dataclass(frozen=True, slots=True, kw_only=True)
class OpShape:
    node: str
    op: str
    inputs: tuple[TensorShape, ...]
    outputs: tuple[TensorShape, ...]
    attrs: tuple[tuple[str, object], ...] = ()
    symbols: tuple[str, ...] = ()  # symbols its size depends on

    def attr(self, key: str, default=None):
        return dict(self.attrs).get(key, default)


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelShape:
    section: str
    name: str  # ComputeEntry.name in gxnet.plan
    kernel: str
    region: str
    repeat: int
    track: int
    ops: tuple[OpShape, ...]
    values: tuple[tuple[str, int], ...]  # the symbol values the shapes were evaluated at
    flops: float
    hbm_bytes: float
    roofline_s: float

    def value(self, symbol: str) -> int:
        return dict(self.values)[symbol]

    def depends_on(self, symbol: str) -> bool:
        return any(symbol in op.symbols for op in self.ops)

    def alloc_elements(self) -> int:
        """Elements the kernel's tensors occupy once (a tensor shared by two ops counted once)."""
        seen = {}
        for op in self.ops:
            for t in op.inputs + op.outputs:
                seen[t.name] = t.numel
        return sum(seen.values())


def track_values(d: Deployment) -> list[dict[str, int]]:
    """Symbol values per track, as ``gxnet.plan.track_values`` (busiest first)."""
    p = d.parallel
    load = moe_load(d.batch, d.model.top_k, d.model.experts, p.ep)
    kinds = [load.busiest_experts]
    if load.lightest_experts != load.busiest_experts:
        kinds.append(load.lightest_experts)
    return [{"B": d.batch, "Tq": 1, "S": d.context_tokens, "KVP": p.kvp, "TPA": p.tpa, "EP": p.ep, "TPE": p.tpe,
             "E_loc": e, "T_exp": load.tokens_per_expert, "R_rows": load.busiest_rows} for e in kinds]


def _ints(exprs, subs: dict) -> tuple[int, ...]:
    out = []
    for x in exprs:
        v = sp.sympify(x).subs(subs)
        out.append(int(v))
    return tuple(out)


def kernel_shapes(d: Deployment, track: int = 0, **override: int) -> list[KernelShape]:
    """Every fused compute kernel of the step for one track, at the deployment's values (or with
    ``S``/``E_loc`` overridden, for scaled measurements)."""
    unknown = set(override) - set(SCALABLE)
    if unknown:
        raise ValueError(f"only {SCALABLE} can be overridden, not {sorted(unknown)}")
    prog = program_of(d)
    g = prog.graph
    vals = dict(track_values(d)[track], **override)
    subs = {s: vals[s.name] for s in SYMBOLS}
    vector = prog.evaluate(*(vals[s.name] for s in SYMBOLS if s.name != "Tq"))
    slots = {(sec.name, slot.name): slot for sec in prog.sections for slot in sec.slots if hasattr(slot, "kernel")}
    out = []
    for sec in g.sections:
        for kernel, nodes in kernels_of(sec):
            if kernel == "@collective":
                continue
            ops = []
            for n in nodes:
                def ts(names):
                    res = []
                    for name in names:
                        t = g.tensors[name]
                        shape = t.local_shape if t.local_shape is not None else t.shape
                        res.append(TensorShape(name=name, dims=t.dims, shape=_ints(shape, subs), role=t.role))
                    return tuple(res)
                syms = set()
                for name in n.inputs + n.outputs:
                    t = g.tensors[name]
                    for x in (t.local_shape if t.local_shape is not None else t.shape):
                        syms |= {s.name for s in sp.sympify(x).free_symbols}
                if n.op == "expert_swiglu":
                    syms.add("E_loc")  # reads the weights of the active experts only (B.3)
                attrs = tuple(sorted((k, v) for k, v in n.attrs.items()
                                     if k in ("top_k", "bias", "gqa_ratio", "window", "context_dim", "qk_norm")))
                ops.append(OpShape(node=n.name, op=n.op, inputs=ts(n.inputs), outputs=ts(n.outputs), attrs=attrs,
                                   symbols=tuple(sorted(syms))))
            slot = slots[(sec.name, nodes[0].name)]
            i = slot.index
            out.append(KernelShape(section=sec.name, name=nodes[0].name, kernel=kernel, region=nodes[0].region,
                                   repeat=sec.repeat, track=track, ops=tuple(ops),
                                   values=tuple(sorted(vals.items())), flops=float(vector[i + 1]),
                                   hbm_bytes=float(vector[i + 2]), roofline_s=float(vector[i])))
    return out


def n_tracks(d: Deployment) -> int:
    return len(track_values(d))
