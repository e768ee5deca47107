"""A deployment: model x accelerator x world x parallelization x batch x context x precision.

``__post_init__`` validates every rule with a one-line ``SpecError`` (what, value, rule, fix):
power-of-two world and degrees, KVP*TPA = EP*TPE = world, TPA | KV heads (Helix), EP | experts,
TPE | expert width, and that the batch fits in HBM (weights + KV cache per rank, paper 003
Section 4.1 / D.1), naming the largest power-of-two batch that does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collectives.errors import SpecError
from gxnet.accelerators import AcceleratorSpec
from gxnet.kernels import EngineSpec, kernel_model
from gxnet.models import ModelSpec
from gxnet.parallel import ParallelSpec, is_pow2
from gxnet.precision import PrecisionSpec, precision_from_dict

__all__ = ["Deployment", "PrecisionSpec", "precision_from_dict"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    model: ModelSpec
    accelerator: AcceleratorSpec
    world: int
    parallel: ParallelSpec
    batch: int
    context_tokens: int
    precision: PrecisionSpec = field(default_factory=PrecisionSpec)
    # How kernels are launched (gxnet.kernels: cuda_graph | eager | persistent) with the accelerator's
    # measured kernel model; None: the paper's roofline (B.3), as for RX00 and every paper analysis.
    engine: EngineSpec | None = None

    def __post_init__(self) -> None:
        m, p = self.model, self.parallel
        if not is_pow2(self.world):
            raise SpecError(f"world={self.world!r} must be a power of two (e.g. 512)")
        if p.world != self.world:
            if p.scheme == "helix":
                raise SpecError(
                    f"KVP*TPA={p.kvp}*{p.tpa}={p.world} must equal world={self.world}; "
                    f"choose degrees whose product is {self.world}")
            if p.scheme == "dp_attention":
                raise SpecError(f"DPA*TPA={p.dpa}*{p.tpa}={p.world} must equal world={self.world}")
            raise SpecError(f"TP*EP={p.tp}*{p.ep}={p.world} must equal world={self.world}")
        for f in ("batch", "context_tokens"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise SpecError(f"{f}={v!r} must be a positive integer")
        if p.scheme == "helix" and p.kvp > self.context_tokens:
            raise SpecError(f"KVP={p.kvp} exceeds context={self.context_tokens} tokens; "
                            "every KV shard must hold at least one token")
        if p.scheme == "dp_attention" and self.batch % p.dpa:
            raise SpecError(f"batch={self.batch} must be a multiple of DPA={p.dpa} (each attention group "
                            f"serves batch/DPA users); use batch={-(-self.batch // p.dpa) * p.dpa}")
        problem = split_violation(m, p)
        if problem:
            raise SpecError(problem)
        if self.engine is not None:
            kernel_model(self.accelerator, self.precision)  # raises if the accelerator has no fitted model
        from gxnet.memory import check_fits

        check_fits(self)

    @property
    def kv_heads_per_rank(self) -> int:  # MLA: the one latent, replicated over TP
        return max(1, self.model.kv_heads // self.parallel.tpa)

    def describe(self) -> str:
        return (f"{self.model.name} on {self.world} x {self.accelerator.name}, {self.parallel.label()}, "
                f"batch {self.batch}, context {self.context_tokens}, {self.precision.name}")


def split_violation(m: ModelSpec, p: ParallelSpec) -> str | None:
    """The first rule of ``p`` that model ``m`` breaks (one line: what, value, rule, fix), or None."""
    if p.scheme == "helix":
        if m.is_mla:
            # MLA: one latent for all heads, replicated over TPA; heads split over TPA, then over
            # TPA x KVP after the all-to-all.
            if m.q_heads % p.world:
                return (f"KVP*TPA={p.world} must divide the {m.q_heads} query heads of {m.name} (MLA splits "
                        "heads over TPA x KVP after the all-to-all); use fewer attention ranks")
        elif m.kv_heads % p.tpa:
            return (f"TPA={p.tpa} must divide the {m.kv_heads} KV heads of {m.name}; "
                    f"use TPA <= {m.kv_heads} (a power of two dividing it)")
    else:
        what = "TP*EP" if p.scheme == "tp_ep" else "TPA"
        if m.q_heads % p.tpa:
            return (f"{what}={p.tpa} (attention tensor parallelism) must "
                    f"divide the {m.q_heads} query heads of {m.name}")
        if m.kv_heads % p.tpa and p.tpa % m.kv_heads:
            return (f"{what}={p.tpa} and the {m.kv_heads} KV heads of {m.name} must divide "
                    "one another (KV heads are split or replicated)")
    tensor_axis = "TP" if p.scheme == "tp_ep" else "TPE"
    if not m.is_moe:
        if p.ep != 1:
            return f"EP={p.ep} but {m.name} is a dense model (no experts); use ep=1"
    else:
        if m.experts % p.ep:
            return f"EP={p.ep} must divide the {m.experts} experts of {m.name}"
        if m.expert_width % p.tpe:
            return f"{tensor_axis}={p.tpe} must divide the expert width {m.expert_width} of {m.name}"
        if m.shared_experts and (m.shared_experts * m.shared_expert_width) % p.tpe:
            return (f"{tensor_axis}={p.tpe} must divide the shared-expert width "
                    f"{m.shared_experts * m.shared_expert_width} of {m.name}")
    if "dense" in m.ffn_kinds() and m.ffn_width % p.world:
        return (f"world={p.world} must divide the dense FFN width {m.ffn_width} of {m.name} "
                "(dense layers are split over all ranks)")
    return None
