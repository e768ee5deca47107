"""Schedules as data (paper 003, Section 3.4, Appendix A.2-A.3).

A schedule is an ordered tuple of phases; a phase is a set of transfers that proceed
concurrently. Each transfer names its logical edge (the Cayley generator mask ``src ^ dst``
for Cayley topologies, or an explicit edge id for rings/circulants), the chunk ids it carries
and its size as an exact fraction of the per-rank buffer σ. From this data the verifier
derives h (number of phases) and v (bottleneck bytes on any logical edge summed over
phases), network models derive per-phase traffic, and the data-flow executor proves the
collective's meaning on real buffers.

This format is the contract between ``collectives`` (producer) and ``fabrics`` (Simlette,
analytical models: consumers). Extend it compatibly; do not rename fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction


@dataclass(frozen=True, slots=True, kw_only=True)
class Transfer:
    src: int
    dst: int
    edge: int  # logical edge id: generator mask for Cayley graphs
    fraction: Fraction  # bytes carried = fraction * sigma (sigma = per-rank buffer bytes)
    chunks: tuple[int, ...] = ()  # chunk ids carried (for the data-flow executor)
    reduce: bool = False  # True: receiver reduces (adds) the chunks; False: receiver stores them


@dataclass(frozen=True, slots=True, kw_only=True)
class Phase:
    transfers: tuple[Transfer, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    name: str  # registry key, e.g. "coset_factored_parallel"
    collective: str  # "allreduce" | "alltoall" | "allgather" | "reducescatter"
    n_ranks: int
    n_chunks: int  # how sigma is split into chunks for the executor
    phases: tuple[Phase, ...]
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def bytes_of(self, transfer: Transfer, sigma_bytes: int) -> float:
        return float(transfer.fraction * sigma_bytes)
