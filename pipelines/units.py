"""Human units at the config edge (DESIGN.md: parsed in one place, never confused).

Bytes: ``B``, ``kB``/``MB``/``GB``/``TB`` are decimal (10**3...), ``KiB``/``MiB``/``GiB``/``TiB``
binary (2**10...). Rates: ``Gb/s`` (bits) and ``GB/s`` (bytes), returned in bytes/s. Times:
``s``, ``ms``, ``us``/``µs``, ``ns``. Counts (context, tokens): plain integers or SI suffixes
``K``/``M``/``G`` = 10**3/10**6/10**9 (so ``context=5M`` is 5,000,000 tokens, which gives the
paper's 5.2 TB of KV cache per Megatron-5T user) and binary ``Ki``/``Mi``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

from collectives.errors import SpecError

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_BYTE_UNITS = {
    "": 1, "B": 1,
    "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
}
_RATE_UNITS = {
    "b/s": 1 / 8, "kb/s": 1e3 / 8, "Kb/s": 1e3 / 8, "Mb/s": 1e6 / 8, "Gb/s": 1e9 / 8, "Tb/s": 1e12 / 8,
    "B/s": 1, "kB/s": 1e3, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
    "bps": 1 / 8, "Gbps": 1e9 / 8, "Tbps": 1e12 / 8,
}
_TIME_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12}
_COUNT_UNITS = {"": 1, "K": 10**3, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def _split(what: str, value: object, units: dict) -> tuple[float, float]:
    if isinstance(value, bool):
        raise SpecError(f"{what}={value!r} is not a quantity; write e.g. {_example(units)}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise SpecError(f"{what}={value!r} is not a finite number; write e.g. {_example(units)}")
        return float(value), 1
    text = str(value).strip().replace(" ", "")
    m = re.fullmatch(_NUM + r"([A-Za-zµ/]*)", text)
    if not m or m.group(2) not in units:
        raise SpecError(
            f"{what}={value!r} is not a valid {_NOUN.get(id(units), 'quantity')}; write a number "
            f"{_unit_help(units)} (e.g. {_example(units)})"
        )
    return float(m.group(1)), units[m.group(2)]


def _unit_help(units: dict) -> str:
    if units is _PLAIN:
        return "without a unit"
    if units is _COUNT_UNITS:
        return "with an optional suffix K, M, G (10**3, 10**6, 10**9) or Ki, Mi, Gi (2**10, 2**20, 2**30)"
    return f"with one of the units {', '.join(u for u in units if u)}"


def _example(units: dict) -> str:
    if units is _BYTE_UNITS:
        return "4KiB"
    if units is _RATE_UNITS:
        return "400Gb/s"
    if units is _TIME_UNITS:
        return "0.52us"
    if units is _PLAIN:
        return "0.5"
    return "5M"


_PLAIN = {"": 1}
_NOUN = {id(_PLAIN): "number", id(_BYTE_UNITS): "size", id(_RATE_UNITS): "rate", id(_TIME_UNITS): "time", id(_COUNT_UNITS): "count"}


def parse_bytes(value: object, what: str = "size") -> int:
    num, scale = _split(what, value, _BYTE_UNITS)
    total = num * scale
    if total < 0 or abs(total - round(total)) > 1e-6:
        raise SpecError(f"{what}={value!r} must be a whole, non-negative number of bytes")
    return int(round(total))


def parse_rate(value: object, what: str = "link_rate") -> float:
    """Returns bytes per second. A bare number is taken as bytes/s."""
    num, scale = _split(what, value, _RATE_UNITS)
    if num <= 0:
        raise SpecError(f"{what}={value!r} must be positive")
    return num * scale


def parse_time(value: object, what: str = "latency") -> float:
    """Returns seconds. A bare number is taken as seconds."""
    num, scale = _split(what, value, _TIME_UNITS)
    if num < 0:
        raise SpecError(f"{what}={value!r} must be non-negative")
    return num * scale


def parse_count(value: object, what: str = "count") -> int:
    num, scale = _split(what, value, _COUNT_UNITS)
    total = num * scale
    if total < 0 or abs(total - round(total)) > 1e-6:
        raise SpecError(f"{what}={value!r} must be a whole, non-negative number")
    return int(round(total))


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldKind:
    """What a numeric config field holds, and the one rule every such field obeys: a finite
    number, in the field's units, inside [low, high] (``low_open``: low itself refused), whole
    when ``whole``. ``pipelines.schema.FIELD_KINDS`` says which field is which kind."""

    name: str
    units: dict
    low: float
    low_open: bool
    high: float | None = None
    whole: bool = False
    rule: str
    example: str

    def check(self, value: object, what: str) -> float:
        """The value in base units (bytes, bytes/s, s, a count), or SpecError naming the rule."""
        try:
            num, scale = _split(what, value, self.units)
        except SpecError:
            finite = isinstance(value, bool) or not isinstance(value, (int, float))
            problem = f"is not a valid {_NOUN[id(self.units)]}" if finite else "is not a finite number"
            raise SpecError(self._message(value, what, problem)) from None
        total = num * scale
        in_range = (total > self.low if self.low_open else total >= self.low) and \
            (self.high is None or total <= self.high)
        if not in_range:
            raise SpecError(self._message(value, what, "is out of range"))
        if self.whole and abs(total - round(total)) > 1e-6:
            raise SpecError(self._message(value, what, "is not whole"))
        return total

    def _message(self, value: object, what: str, problem: str) -> str:
        return f"{what}={value!r} {problem}: {what} is a {self.name}, {self.rule} (e.g. {self.example})"


KINDS: dict[str, FieldKind] = {k.name: k for k in (
    FieldKind(name="count", units=_COUNT_UNITS, low=1, low_open=False, whole=True,
              rule="a whole number >= 1 with an optional suffix K/M/G (10**3/10**6/10**9) or Ki/Mi/Gi (2**10/2**20/2**30)", example="8, 32K or 5M"),
    FieldKind(name="index", units=_COUNT_UNITS, low=0, low_open=False, whole=True,
              rule="a whole number >= 0", example="0 or 3"),
    FieldKind(name="size_bytes", units=_BYTE_UNITS, low=0, low_open=True, whole=True,
              rule="a whole number of bytes > 0 (KiB = 2**10, kB = 10**3)", example="4KiB, 16MiB or 1GB"),
    FieldKind(name="rate_Bps", units=_RATE_UNITS, low=0, low_open=True,
              rule="a rate > 0 (Gb/s bits, GB/s bytes; a bare number is bytes/s)", example="400Gb/s or 64GB/s"),
    FieldKind(name="time_s", units=_TIME_UNITS, low=0, low_open=False,
              rule="a time >= 0 (a bare number is seconds)", example="0.52us, 10ns or 0"),
    FieldKind(name="timeout_s", units=_TIME_UNITS, low=0, low_open=True,
              rule="a time > 0 (a bare number is seconds)", example="60s or 500ms"),
    FieldKind(name="fraction", units=_PLAIN, low=0, low_open=False, high=1,
              rule="a number from 0 to 1", example="0.07"),
    FieldKind(name="positive", units=_PLAIN, low=0, low_open=True,
              rule="a number > 0", example="0.8 or 4"),
    FieldKind(name="nonnegative", units=_PLAIN, low=0, low_open=False,
              rule="a number >= 0", example="0 or 4.0"),
)}
