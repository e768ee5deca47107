"""Helix split enumeration (paper 003, Appendix B.6).

On N accelerators a split (KVP, TPA, EP, TPE) has power-of-two degrees with KVP*TPA = EP*TPE
= N, TPA dividing the KV heads, EP dividing the experts and TPE dividing the expert width
(and the rules of newer architectures: ``gxnet.deployment.split_violation``).
At N = 512: 72 splits for Megatron 5T, 45 for GPT-OSS-5.3-like.
"""

from __future__ import annotations

from collectives.errors import SpecError
from gxnet.deployment import split_violation
from gxnet.models import ModelSpec
from gxnet.parallel import ParallelSpec, is_pow2


def _pow2_divisors(n: int) -> list[int]:
    return [1 << i for i in range(n.bit_length()) if (1 << i) <= n and n % (1 << i) == 0]


def helix_splits(model: ModelSpec, world: int) -> list[ParallelSpec]:
    """Every split the deployment rules accept (``split_violation``), TPA-major order."""
    if not is_pow2(world):
        raise SpecError(f"world={world!r} must be a power of two (e.g. 512)")
    out = []
    for tpa in _pow2_divisors(world):
        for ep in _pow2_divisors(world):
            p = ParallelSpec(scheme="helix", kvp=world // tpa, tpa=tpa, ep=ep, tpe=world // ep)
            if split_violation(model, p) is None:
                out.append(p)
    return out
