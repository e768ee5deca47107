"""Parallelization specs and their meshes (paper 003, Sections 3.1, B.1, B.6).

Helix (Bhatia et al., 2025): attention on a KVP x TPA mesh (KV cache sharded by sequence over
KVP and by KV head over TPA), the FFN on an EP x TPE mesh over the same ranks, so
KVP * TPA = EP * TPE = world.

``tp_ep``: plain tensor/expert parallelism on one (EP, TP) mesh: attention is tensor-parallel
over all ranks of the mesh (heads split world-wide, KV heads replicated when the degree exceeds
them, as vLLM/TRT-LLM do), the FFN splits experts over EP and expert width over TP. It is
represented with the same four degrees: kvp = 1, tpa = tp * ep, ep, tpe = tp; its FFN tensor
axis is named ``tp`` in the demand.

``dp_attention`` (SGLang/vLLM DP-attention): attention replicated over ``dpa`` groups of
``tpa`` ranks (default 1), each group serving its own batch/dpa users; the FFN splits experts
over EP and width over TPE = world/EP. The DPA axis takes the KVP slot of the mesh.

Rank numbering (row-major, minor axis last): attention rank = kvp_i * TPA + tpa_i, FFN rank =
ep_i * TPE + tpe_i. A group of axis X holds the ranks that differ only in their X coordinate.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from collectives.errors import SpecError

SCHEMES = ("helix", "tp_ep", "dp_attention")


def is_pow2(n: int) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n > 0 and n & (n - 1) == 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelSpec:
    scheme: str = "helix"
    kvp: int | None = None
    tpa: int | None = None
    ep: int | None = None
    tpe: int | None = None
    tp: int | None = None  # tp_ep only: tensor-parallel degree of the FFN (and of the mesh)
    dpa: int | None = None  # dp_attention only: attention data-parallel groups

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise SpecError(f"parallel.scheme={self.scheme!r}; choose one of: {', '.join(SCHEMES)}")
        if self.scheme != "dp_attention" and self.dpa is not None:
            raise SpecError(f"parallel.dpa={self.dpa} is only for scheme dp_attention")
        if self.scheme == "dp_attention":
            self._init_dp_attention()
        elif self.scheme == "tp_ep":
            if self.tp is None or self.ep is None:
                raise SpecError("parallel=tp_ep needs parallel.tp and parallel.ep (e.g. parallel.tp=8 parallel.ep=64)")
            for f in ("tp", "ep"):
                _check_degree(f, getattr(self, f))
            derived = {"kvp": 1, "tpa": self.tp * self.ep, "tpe": self.tp}
            for f, v in derived.items():
                given = getattr(self, f)
                if given is not None and given != v:
                    raise SpecError(
                        f"parallel.{f}={given} contradicts tp_ep with tp={self.tp}, ep={self.ep} "
                        f"(it implies {f}={v}); leave {f} unset")
                object.__setattr__(self, f, v)
        else:
            if self.tp is not None:
                raise SpecError(f"parallel.tp={self.tp} is only for scheme tp_ep; Helix uses kvp, tpa, ep, tpe")
            for f in ("kvp", "tpa", "ep", "tpe"):
                if getattr(self, f) is None:
                    raise SpecError(f"parallel=helix needs parallel.{f} (degrees kvp, tpa, ep, tpe)")
                _check_degree(f, getattr(self, f))
            if self.kvp * self.tpa != self.ep * self.tpe:
                raise SpecError(
                    f"KVP*TPA={self.kvp}*{self.tpa}={self.kvp * self.tpa} must equal "
                    f"EP*TPE={self.ep}*{self.tpe}={self.ep * self.tpe} (both meshes span the same ranks)")

    def _init_dp_attention(self) -> None:
        # DP-attention: DPA groups of TPA ranks each (the mesh's KVP slot holds DPA), the FFN on
        # EP x TPE over the same ranks.
        if self.dpa is None or self.ep is None:
            raise SpecError("parallel=dp_attention needs parallel.dpa and parallel.ep "
                            "(e.g. parallel.dpa=8 parallel.ep=8)")
        for f in ("kvp", "tp"):
            if getattr(self, f) is not None:
                raise SpecError(f"parallel.{f}={getattr(self, f)} is not a dp_attention degree; "
                                "use dpa, tpa (attention TP per group), ep, tpe")
        tpa = 1 if self.tpa is None else self.tpa
        for f, v in (("dpa", self.dpa), ("tpa", tpa), ("ep", self.ep)):
            _check_degree(f, v)
        world = self.dpa * tpa
        if self.ep > world or (self.tpe is not None and self.ep * self.tpe != world):
            raise SpecError(f"EP*TPE={self.ep}*{self.tpe or '?'} must equal DPA*TPA={self.dpa}*{tpa}={world} "
                            "(both meshes span the same ranks)")
        if self.tpe is not None:
            _check_degree("tpe", self.tpe)
        object.__setattr__(self, "kvp", self.dpa)
        object.__setattr__(self, "tpa", tpa)
        object.__setattr__(self, "tpe", world // self.ep)

    @property
    def world(self) -> int:
        return self.kvp * self.tpa

    @property
    def ffn_tensor_axis(self) -> str:
        return "tpe" if self.scheme == "helix" else "tp"

    def degrees(self) -> dict[str, int]:
        return {"kvp": self.kvp, "tpa": self.tpa, "ep": self.ep, "tpe": self.tpe}

    def axis_size(self, axis: str) -> int:
        if axis == "world":
            return self.world
        if axis == "tp":
            return self.tpe
        if axis == "dpa":
            return self.kvp
        return self.degrees()[axis]

    def as_dict(self) -> dict:
        d = {"scheme": self.scheme, **self.degrees()}
        if self.scheme == "tp_ep":
            d["tp"] = self.tp
        if self.scheme == "dp_attention":
            d["dpa"] = self.dpa
        return d

    def label(self) -> str:
        if self.scheme == "tp_ep":
            return f"TP{self.tp} EP{self.ep}"
        if self.scheme == "dp_attention":
            return f"DPA{self.dpa} x TP{self.tpa} attention, EP{self.ep} x TP{self.tpe} FFN"
        return f"Helix({self.kvp},{self.tpa},{self.ep},{self.tpe})"

    def groups(self, axis: str) -> tuple[tuple[int, ...], ...]:
        return axis_groups(self.kvp, self.tpa, self.ep, self.tpe, _canonical_axis(axis))


def _check_degree(name: str, v) -> None:
    if not is_pow2(v):
        raise SpecError(f"parallel.{name}={v!r} must be a power of two (1, 2, 4, ...)")


def _canonical_axis(axis: str) -> str:
    return {"tp": "tpe", "dpa": "kvp"}.get(axis, axis)


# explicit keyed cache: rank groups of one mesh axis. A search cell walks its 72 Helix splits
# (~360 distinct axes at world 512, ≈ 10 kB each) in the same order every cell: below that
# an LRU is emptied before any reuse
@lru_cache(maxsize=1024)
def axis_groups(kvp: int, tpa: int, ep: int, tpe: int, axis: str) -> tuple[tuple[int, ...], ...]:
    n = kvp * tpa
    if axis == "world":
        return (tuple(range(n)),)
    if axis in ("kvp", "tpa"):
        outer, inner = kvp, tpa  # rank = kvp_i * tpa + tpa_i
    elif axis in ("ep", "tpe"):
        outer, inner = ep, tpe
    else:
        raise SpecError(f"unknown mesh axis {axis!r}; choose one of world, kvp, tpa, ep, tpe, tp")
    if axis in ("kvp", "ep"):  # vary the outer coordinate, one group per inner coordinate
        return tuple(tuple(o * inner + i for o in range(outer)) for i in range(inner))
    return tuple(tuple(o * inner + i for i in range(inner)) for o in range(outer))
