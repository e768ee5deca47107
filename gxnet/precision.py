"""Element precision of a deployment (paper 003, B.1 step 2 and Appendix E; serving formats).

Paper baseline ``fp4``: weights, activations, KV cache and collective payloads in FP4. The Helix
softmax statistics (one log-sum-exp per user and local query head) travel at
``softmax_stat_bits``: 8 bits in the FP4 baseline, which is what makes Table 1's KVP all-to-all
66 B at B = 1 (2 local heads x 64 dims x 4 bit + 2 x 8 bit). Appendix E's variant sends
activations in BF16 and the statistics in FP32 over FP4 storage (``fp4_bf16act``).

Serving formats (the name means its bits): ``bf16`` all 16-bit; ``fp8`` FP8 weights with BF16
KV and activations (the common serving default; DeepSeek-V3's checkpoint: one FP32 scale per
128 x 128 weight block, config.json ``weight_block_size``); ``fp8_kv8`` also an FP8 KV cache;
``mxfp4`` 4-bit weights with one 8-bit (E8M0) scale per 32 (OCP MX spec; GPT-OSS);
``nvfp4`` 4-bit weights with one FP8 (E4M3) scale per 16 (NVIDIA NVFP4). A quantized weight
stores ``weights_bits + weights_scale_bits / scale_block`` bits per element.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import sympy as sp

from collectives.errors import SpecError

_VALID_BITS = (4, 8, 16, 32)
_BIT_FIELDS = ("weights_bits", "activations_bits", "kv_bits", "comm_bits", "softmax_stat_bits")
_SCALE_FIELDS = ("weights_scale_bits", "scale_block")
_FIELDS = _BIT_FIELDS + _SCALE_FIELDS
_BF16_REST = dict(activations_bits=16, kv_bits=16, comm_bits=16, softmax_stat_bits=32)
_NO_SCALE = dict(weights_scale_bits=0, scale_block=1)
_PRESETS = {
    "fp4": dict(weights_bits=4, activations_bits=4, kv_bits=4, comm_bits=4, softmax_stat_bits=8, **_NO_SCALE),
    # Appendix E: BF16 activation transfers (4x the FP4 bytes), statistics in FP32; storage
    # (weights, KV cache) stays FP4.
    "fp4_bf16act": dict(weights_bits=4, activations_bits=16, kv_bits=4, comm_bits=16, softmax_stat_bits=32,
                        **_NO_SCALE),
    "bf16": dict(weights_bits=16, **_BF16_REST, **_NO_SCALE),
    "fp8": dict(weights_bits=8, **_BF16_REST, weights_scale_bits=32, scale_block=128 * 128),
    "fp8_kv8": dict(weights_bits=8, **{**_BF16_REST, "kv_bits": 8}, weights_scale_bits=32, scale_block=128 * 128),
    "mxfp4": dict(weights_bits=4, **_BF16_REST, weights_scale_bits=8, scale_block=32),
    "nvfp4": dict(weights_bits=4, **_BF16_REST, weights_scale_bits=8, scale_block=16),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PrecisionSpec:
    weights_bits: int = 4
    activations_bits: int = 4
    kv_bits: int = 4
    comm_bits: int = 4  # element width of activations inside collectives
    softmax_stat_bits: int = 8  # log-sum-exp statistics exchanged by the Helix all-to-all
    weights_scale_bits: int = 0  # bits of one block scale of a quantized weight (0 = none)
    scale_block: int = 1  # weight elements sharing one scale
    name: str = "fp4"

    def __post_init__(self) -> None:
        for f in _BIT_FIELDS:
            v = getattr(self, f)
            if v not in _VALID_BITS:
                raise SpecError(f"precision.{f}={v!r} must be one of {', '.join(map(str, _VALID_BITS))} bits")
        if not isinstance(self.weights_scale_bits, int) or self.weights_scale_bits < 0:
            raise SpecError(f"precision.weights_scale_bits={self.weights_scale_bits!r} must be a non-negative integer")
        if not isinstance(self.scale_block, int) or self.scale_block < 1:
            raise SpecError(f"precision.scale_block={self.scale_block!r} must be a positive integer")
        # A preset name must mean its bits (PrecisionSpec(name="bf16") alone would silently be FP4).
        preset = _PRESETS.get(self.name)
        if preset is not None:
            wrong = [f for f in _FIELDS if getattr(self, f) != preset[f]]
            if wrong:
                raise SpecError(
                    f"precision name {self.name!r} does not match {', '.join(f'{f}={getattr(self, f)}' for f in wrong)}; "
                    f"build it with precision_from_dict({{'name': {self.name!r}}}) or name it 'custom'")

    @property
    def stored_weight_bits(self):
        """Bits per quantized weight element including its block-scale share (int when exact)."""
        if not self.weights_scale_bits or self.weights_bits >= 16:
            return self.weights_bits
        return sp.Rational(self.weights_bits * self.scale_block + self.weights_scale_bits, self.scale_block)

    @classmethod
    def preset(cls, name: str) -> "PrecisionSpec":
        if name in _PRESETS:
            return cls(**_PRESETS[name], name=name)
        raise SpecError(f"unknown precision {name!r}; choose one of: {', '.join(sorted(_PRESETS))} (or give the bits)")

    def as_dict(self) -> dict:
        return {"name": self.name, **{f: getattr(self, f) for f in _FIELDS}}


def precision_from_dict(d: Mapping[str, Any] | str | None) -> PrecisionSpec:
    """A preset name or a mapping with an optional ``name`` preset and field overrides."""
    if d is None:
        return PrecisionSpec()
    if isinstance(d, str):
        return PrecisionSpec.preset(d)
    d = {k: v for k, v in dict(d).items() if v is not None}
    base = PrecisionSpec.preset(str(d.pop("name", "fp4")))
    unknown = sorted(set(d) - set(_FIELDS))
    if unknown:
        raise SpecError(f"precision: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(_FIELDS))}")
    fields = {f: getattr(base, f) for f in _FIELDS}
    for k, v in d.items():
        try:
            fields[k] = int(v)
        except (TypeError, ValueError):
            raise SpecError(f"precision.{k}={v!r} must be a whole number of bits") from None
    name = base.name if all(fields[f] == getattr(base, f) for f in _FIELDS) else "custom"
    return PrecisionSpec(**fields, name=name)
