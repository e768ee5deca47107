"""Element precision of a deployment (paper 003, B.1 step 2 and Appendix E).

Baseline: weights, activations, KV cache and collective payloads in FP4. The Helix softmax
statistics (one log-sum-exp per user and local query head) travel at ``softmax_stat_bits``:
8 bits in the FP4 baseline, which is what makes Table 1's KVP all-to-all 66 B at B = 1
(2 local heads x 64 dims x 4 bit + 2 x 8 bit); Appendix E's BF16 variant sends activations in
BF16 and the statistics in FP32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from collectives.errors import SpecError

_VALID_BITS = (4, 8, 16, 32)
_BIT_FIELDS = ("weights_bits", "activations_bits", "kv_bits", "comm_bits", "softmax_stat_bits")
_PRESETS = {
    "fp4": dict(weights_bits=4, activations_bits=4, kv_bits=4, comm_bits=4, softmax_stat_bits=8),
    # Appendix E: BF16 activation transfers (4x the FP4 bytes), statistics in FP32; storage
    # (weights, KV cache) stays FP4.
    "bf16": dict(weights_bits=4, activations_bits=16, kv_bits=4, comm_bits=16, softmax_stat_bits=32),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PrecisionSpec:
    weights_bits: int = 4
    activations_bits: int = 4
    kv_bits: int = 4
    comm_bits: int = 4  # element width of activations inside collectives
    softmax_stat_bits: int = 8  # log-sum-exp statistics exchanged by the Helix all-to-all
    name: str = "fp4"

    def __post_init__(self) -> None:
        for f in _BIT_FIELDS:
            v = getattr(self, f)
            if v not in _VALID_BITS:
                raise SpecError(f"precision.{f}={v!r} must be one of {', '.join(map(str, _VALID_BITS))} bits")
        # A preset name must mean its bits (PrecisionSpec(name="bf16") alone would silently be FP4).
        preset = _PRESETS.get(self.name)
        if preset is not None:
            wrong = [f for f in _BIT_FIELDS if getattr(self, f) != preset[f]]
            if wrong:
                raise SpecError(
                    f"precision name {self.name!r} does not match {', '.join(f'{f}={getattr(self, f)}' for f in wrong)}; "
                    f"build it with precision_from_dict({{'name': {self.name!r}}}) or name it 'custom'")

    @classmethod
    def preset(cls, name: str) -> "PrecisionSpec":
        if name in _PRESETS:
            return cls(**_PRESETS[name], name=name)
        raise SpecError(f"unknown precision {name!r}; choose one of: {', '.join(sorted(_PRESETS))} (or give the bits)")


def precision_from_dict(d: Mapping[str, Any] | str | None) -> PrecisionSpec:
    """``"fp4"``/``"bf16"`` or a mapping with an optional ``name`` preset and bit overrides."""
    if d is None:
        return PrecisionSpec()
    if isinstance(d, str):
        return PrecisionSpec.preset(d)
    d = dict(d)
    base = PrecisionSpec.preset(str(d.pop("name", "fp4")))
    known = {"weights_bits", "activations_bits", "kv_bits", "comm_bits", "softmax_stat_bits"}
    unknown = sorted(set(d) - known)
    if unknown:
        raise SpecError(f"precision: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    fields = {f: getattr(base, f) for f in known}
    for k, v in d.items():
        try:
            fields[k] = int(v)
        except (TypeError, ValueError):
            raise SpecError(f"precision.{k}={v!r} must be a whole number of bits") from None
    name = base.name if all(fields[f] == getattr(base, f) for f in known) else "custom"
    return PrecisionSpec(**fields, name=name)
