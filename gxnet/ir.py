"""Graph IR of GXNET (paper 003, Section 4.1, B.1): immutable tensors, nodes and sections.

Tensors carry a SymPy shape over the batch ``B``, new tokens per user ``Tq`` (1 after the decode
pass), the cached context ``S`` and the mesh degrees; an element role (bits set by the
precision pass) and a placement (set by the sharding pass). A graph is an ordered tuple of
sections; a section is an ordered tuple of nodes executed ``repeat`` times (the decoder
block: Megatron repeats one layer 128 times, GPT-OSS a sliding/full pair). Every pass returns
a new graph (``dataclasses.replace``); nothing is mutated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import sympy as sp

# ---- symbols -------------------------------------------------------------------------------
B, Tq, S = sp.symbols("B Tq S", positive=True, integer=True)
KVP, TPA, EP, TPE = sp.symbols("KVP TPA EP TPE", positive=True, integer=True)
# MoE load model (B.2): active experts on this rank, tokens per active expert, busiest rows.
E_loc = sp.Symbol("E_loc", nonnegative=True, integer=True)
T_exp, R_rows = sp.symbols("T_exp R_rows", positive=True, integer=True)
SYMBOLS = (B, Tq, S, KVP, TPA, EP, TPE, E_loc, T_exp, R_rows)
# "dpa" (DP-attention groups) occupies the KVP slot of the mesh: rank = dpa_i * TPA + tpa_i
AXIS_SIZE = {"kvp": KVP, "tpa": TPA, "ep": EP, "tpe": TPE, "tp": TPE, "world": KVP * TPA, "dpa": KVP}

ROLES = ("activation", "weight", "kv", "stat", "index")
COLLECTIVE_OPS = ("allreduce", "allgather", "alltoall", "reducescatter")


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a tensor lives on the mesh (like a JAX PartitionSpec plus pending reductions).

    ``shards``: (dim name, axes) pairs for sharded dims; ``partial``: axes over which the values
    are pending a reduction, of ``partial_kind`` "sum" or "softmax" (Helix partial attention:
    partial outputs plus log-sum-exp statistics, combined by rescaling).
    """

    shards: tuple[tuple[str, tuple[str, ...]], ...] = ()
    partial: tuple[str, ...] = ()
    partial_kind: str = ""

    def axes_of(self, dim: str) -> tuple[str, ...]:
        for d, axes in self.shards:
            if d == dim:
                return axes
        return ()

    def describe(self) -> str:
        s = ",".join(f"{d}:{'*'.join(a)}" for d, a in self.shards) or "replicated"
        return s + (f" partial-{self.partial_kind}({'*'.join(self.partial)})" if self.partial else "")


REPLICATED = Placement()


@dataclass(frozen=True, slots=True)
class TensorType:
    """``dims`` names each dimension (e.g. ("B", "Hq", "d")); ``shape`` is the global shape.

    ``local_shape`` (set by sharding) is the per-rank shape; ``padded`` names dims whose local
    size is padded rather than an even split (context shards, the busiest rank's MoE rows).
    """

    dims: tuple[str, ...]
    shape: tuple[sp.Expr, ...]
    role: str
    bits: int | None = None
    placement: Placement = REPLICATED
    local_shape: tuple[sp.Expr, ...] | None = None
    padded: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.dims) != len(self.shape):
            raise ValueError(f"dims {self.dims} and shape {self.shape} differ in rank")
        if self.role not in ROLES:
            raise ValueError(f"unknown tensor role {self.role!r}")

    def numel(self, local: bool = True) -> sp.Expr:
        shape = self.local_shape if (local and self.local_shape is not None) else self.shape
        return sp.Mul(*shape)

    def nbytes(self, local: bool = True, bits: int | None = None) -> sp.Expr:
        b = bits if bits is not None else self.bits
        if b is None:
            raise ValueError("tensor has no element width yet (run the precision pass)")
        return self.numel(local) * sp.Rational(b, 8)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    region: str  # "embedding" | "attention" | "ffn" | "lm_head"
    attrs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def with_attrs(self, **kw: Any) -> "Node":
        return replace(self, attrs=MappingProxyType({**self.attrs, **kw}))

    @property
    def is_collective(self) -> bool:
        return self.op in COLLECTIVE_OPS


@dataclass(frozen=True, slots=True)
class Section:
    name: str
    nodes: tuple[Node, ...]
    repeat: int = 1


@dataclass(frozen=True, slots=True)
class Graph:
    """``tensors`` maps names to types; a section's tensors are shared by all its repetitions."""

    model: str
    sections: tuple[Section, ...]
    tensors: Mapping[str, TensorType]
    attrs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def nodes(self) -> Iterable[tuple[Section, Node]]:
        for sec in self.sections:
            for n in sec.nodes:
                yield sec, n

    def with_tensors(self, tensors: Mapping[str, TensorType]) -> "Graph":
        return replace(self, tensors=MappingProxyType(dict(tensors)))

    def with_attrs(self, **kw: Any) -> "Graph":
        return replace(self, attrs=MappingProxyType({**self.attrs, **kw}))

    def map_nodes(self, fn) -> "Graph":
        secs = tuple(replace(s, nodes=tuple(fn(s, n) for n in s.nodes)) for s in self.sections)
        return replace(self, sections=secs)

    def collectives(self) -> list[tuple[Section, Node]]:
        return [(s, n) for s, n in self.nodes() if n.is_collective]


def frozen(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(d))


_LAYER_PREFIX = re.compile(r"^[A-Z]\d+\.")


def base_name(name: str) -> str:
    """A layer tensor's name without its layer prefix ("L0.w_qkv" -> "w_qkv", "D1.kv" -> "kv")."""
    return _LAYER_PREFIX.sub("", name, count=1)
