"""Schedules as transfer arrays: the native schedules of EPS fabrics and library schedules mapped
onto global ranks (paper 003, Section 3.1, Section 5.4, Appendix C.2).

The analytical fabric model prices a schedule phase by phase; for that it needs, per phase, who
sends how much to whom. ``collectives.schedules`` owns what a schedule *is*; this module turns a
schedule into ``PhaseArrays`` (local source index, local destination index, fraction of σ), the
form the vectorised phase pricing (``fabrics.scaleup.phase_pricing``) consumes.

**Native schedules** (what TensorRT-LLM runs on packet-switched fabrics, Section 3.1): every rank
reaches every other through the switches, so the logical topology is the complete graph K_n.

* all-reduce: ``one_shot`` (each rank sends its whole buffer σ to the n−1 others, 1 phase),
  ``two_shot`` (reduce-scatter then all-gather, σ/n per peer, 2 phases) and
  ``halving_doubling`` (recursive halving / doubling on the hypercube, 2·log n phases);
* all-to-all: ``direct`` (one-shot, σ/n per peer, 1 phase);
* all-gather: ``one_shot`` (σ/n per peer, 1 phase); reduce-scatter: ``one_shot``.

TensorRT-LLM picks the all-reduce strategy from a table keyed by message size; we pick the one
the model itself predicts to be fastest at that size (``fabrics.network.analytical.FabricAnalytical``),
which is what such a table approximates. The complete-graph schedules have n(n−1) transfers per
phase (261 632 at n = 512): building them as ``Transfer`` objects takes seconds, so their arrays
are generated directly; ``tests/unit/test_fabric_network_native.py`` checks that they equal the
library's executable schedules transfer for transfer. Halving-doubling comes from the library.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from collectives.errors import SpecError

# The native set per collective, in TensorRT-LLM's order (small → large messages).
NATIVE_SCHEDULES: dict[str, tuple[str, ...]] = {
    "allreduce": ("one_shot", "two_shot", "halving_doubling"),
    "alltoall": ("direct",),
    "allgather": ("one_shot",),
    "reducescatter": ("one_shot",),
}
# alltoallv (expert dispatch/combine with a demand matrix) is priced as its uniform all-to-all.
COLLECTIVE_ALIASES = {"alltoallv": "alltoall"}


@dataclass(frozen=True, slots=True, eq=False)
class PhaseArrays:
    """One phase: transfer k sends ``fraction[k]``·σ from local rank ``src[k]`` to ``dst[k]``."""

    src: np.ndarray  # int64, local index in the group
    dst: np.ndarray
    fraction: np.ndarray  # float64, multiple of σ


def canonical_collective(collective: str) -> str:
    return COLLECTIVE_ALIASES.get(collective, collective)


def _log2(n: int) -> int:
    if n < 2 or n & (n - 1):
        raise SpecError(f"group of {n} ranks: native schedules here need a power-of-two group size ≥ 2 "
                        "(Cayley labels are bit strings); use a power-of-two degree")
    return n.bit_length() - 1


def _all_pairs(n: int, fraction: float) -> PhaseArrays:
    src, dst = np.divmod(np.arange(n * n, dtype=np.int64), n)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    return PhaseArrays(src=src, dst=dst, fraction=np.full(src.size, float(fraction)))


def library_phases(schedule) -> tuple[PhaseArrays, ...]:
    """A ``collectives.schedule.Schedule`` as arrays (its transfers' src, dst, fraction)."""
    out = []
    for ph in schedule.phases:
        ts = ph.transfers
        out.append(PhaseArrays(src=np.fromiter((t.src for t in ts), dtype=np.int64, count=len(ts)),
                               dst=np.fromiter((t.dst for t in ts), dtype=np.int64, count=len(ts)),
                               # n / d is float(Fraction(n, d)) exactly (CPython's __float__), without
                               # the Fraction method dispatch per transfer
                               fraction=np.fromiter((t.fraction.numerator / t.fraction.denominator for t in ts),
                                                    dtype=np.float64, count=len(ts))))
    return tuple(out)


def complete_graph(n: int):
    """K_n as a Cayley graph of (Z2)^log n (every non-zero mask a generator)."""
    from collectives.topology import CayleyTopology

    b = _log2(n)
    return CayleyTopology(n_bits=b, generators=tuple(range(1, n)), name=f"K{n}")


def native_topology(schedule: str, n: int):
    """The logical topology a native schedule runs on: the hypercube for halving-doubling,
    else the complete graph (one switched hop between any two ranks)."""
    from collectives.topology import hypercube

    return hypercube(_log2(n)) if schedule == "halving_doubling" else complete_graph(n)


@lru_cache(maxsize=256)  # explicit keyed cache: (collective, schedule, n) → arrays; cache_clear() is safe
def native_phases(collective: str, schedule: str, n: int) -> tuple[PhaseArrays, ...]:
    collective = canonical_collective(collective)
    if collective not in NATIVE_SCHEDULES or schedule not in NATIVE_SCHEDULES[collective]:
        choices = ", ".join(NATIVE_SCHEDULES.get(collective, ()))
        raise SpecError(f"schedule {schedule!r} is not a native {collective} schedule on an EPS fabric; "
                        f"choose auto or one of: {choices}")
    _log2(n)
    if schedule == "halving_doubling":
        from collectives.schedules import SCHEDULES

        return library_phases(SCHEDULES.get("halving_doubling").build(native_topology(schedule, n), collective))
    if collective == "allreduce" and schedule == "one_shot":
        return (_all_pairs(n, 1.0),)
    if collective == "allreduce" and schedule == "two_shot":
        return (_all_pairs(n, 1.0 / n), _all_pairs(n, 1.0 / n))
    return (_all_pairs(n, 1.0 / n),)  # direct all-to-all, one-shot all-gather / reduce-scatter


def native_schedules(collective: str) -> tuple[str, ...]:
    c = canonical_collective(collective)
    if c not in NATIVE_SCHEDULES:
        raise SpecError(f"collective {collective!r} has no native schedule; choose one of {sorted(NATIVE_SCHEDULES)}")
    return NATIVE_SCHEDULES[c]


__all__ = ["COLLECTIVE_ALIASES", "NATIVE_SCHEDULES", "PhaseArrays", "canonical_collective", "complete_graph",
           "library_phases", "native_phases", "native_schedules", "native_topology"]
