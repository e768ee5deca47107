"""Human units at the config edge (DESIGN.md: parsed in one place, never confused).

Bytes: ``B``, ``kB``/``MB``/``GB``/``TB`` are decimal (10**3...), ``KiB``/``MiB``/``GiB``/``TiB``
binary (2**10...). Rates: ``Gb/s`` (bits) and ``GB/s`` (bytes), returned in bytes/s. Times:
``s``, ``ms``, ``us``/``µs``, ``ns``. Counts (context, tokens): plain integers or SI suffixes
``K``/``M``/``G`` = 10**3/10**6/10**9 (so ``context=5M`` is 5,000,000 tokens, which gives the
paper's 5.2 TB of KV cache per Megatron-5T user) and binary ``Ki``/``Mi``.
"""

from __future__ import annotations

import re

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
        return float(value), 1
    text = str(value).strip().replace(" ", "")
    m = re.fullmatch(_NUM + r"([A-Za-zµ/]*)", text)
    if not m or m.group(2) not in units:
        raise SpecError(
            f"{what}={value!r} is not a valid quantity; write a number with one of the units "
            f"{', '.join(u for u in units if u) or '(none)'} (e.g. {_example(units)})"
        )
    return float(m.group(1)), units[m.group(2)]


def _example(units: dict) -> str:
    if units is _BYTE_UNITS:
        return "4KiB"
    if units is _RATE_UNITS:
        return "400Gb/s"
    if units is _TIME_UNITS:
        return "0.52us"
    return "5M"


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
