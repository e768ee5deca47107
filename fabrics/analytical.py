"""Analytical (Hockney) network model on a single-level packet-switched fabric.

This is the first network model of the spine (paper 003, Eq. 1 and Appendix C.2): a phase
costs one switched-hop latency λ plus its bottleneck bytes over the bandwidth available to
them, T = Σ_k (λ + max_e b_{k,e} / (p·R)). On a single-level EPS every accelerator reaches
every other through one switch hop and sprays its traffic over all of its L ports, so the
bottleneck of a phase is the per-rank egress bytes over L·R.

Schedules are the *native* ones of current frameworks (Section 3.1: TensorRT-LLM chooses
between one-shot and two-shot all-reduce; its MoE all-to-all is one-shot):
- all-reduce: one-shot (1 phase, each rank sends its whole buffer σ to the N-1 others) or
  two-shot (reduce-scatter then all-gather, 2 phases of (N-1)/N·σ each); the cheaper one is
  used, which is what the size-keyed tables of TensorRT-LLM approximate;
- all-to-all, all-gather, reduce-scatter: one-shot (1 phase, (N-1)/N·σ out of each rank,
  σ being the full per-rank buffer: the gathered result for all-gather, the input for
  reduce-scatter and all-to-all).

Each collective is priced independently (no contention between concurrent groups), as the
paper's analytical backend does (B.4); Simlette is the model that captures contention.
"""

from __future__ import annotations

from dataclasses import dataclass

from collectives.errors import SpecError
from fabrics.network_model import (
    CollectiveCall,
    Completion,
    DemandEntry,
    check_in_demand,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SingleLevelParams:
    hop_latency_s: float  # λ per switched hop (0.81 µs through one EPS switch, Table 9)
    link_rate_Bps: float  # R per port, one direction
    ports: int  # L ports per accelerator

    def __post_init__(self) -> None:
        if self.hop_latency_s < 0:
            raise SpecError(f"hop_latency={self.hop_latency_s} s must be non-negative")
        if self.link_rate_Bps <= 0:
            raise SpecError(f"link_rate={self.link_rate_Bps} B/s must be positive")
        if self.ports < 1:
            raise SpecError(f"ports={self.ports} must be at least 1")


def native_phase_bytes(collective: str, schedule: str, n_ranks: int, sigma_bytes: int) -> tuple[float, ...]:
    """Per-rank egress bytes of each phase of a native schedule on a full crossbar."""
    n = n_ranks
    if n <= 1 or collective == "none":
        return ()
    share = (n - 1) / n * sigma_bytes
    if collective == "allreduce":
        if schedule == "one_shot":
            return ((n - 1) * float(sigma_bytes),)
        if schedule == "two_shot":
            return (share, share)
    elif collective in ("alltoall", "allgather", "reducescatter", "alltoallv") and schedule in ("one_shot", "direct"):
        return (share,)
    raise SpecError(f"schedule {schedule!r} is not a native schedule for {collective}")


NATIVE_SCHEDULES = {
    "allreduce": ("one_shot", "two_shot"),
    "alltoall": ("one_shot",),
    "alltoallv": ("one_shot",),
    "allgather": ("one_shot",),
    "reducescatter": ("one_shot",),
}


def native_time_s(params: SingleLevelParams, collective: str, n_ranks: int, sigma_bytes: int) -> tuple[float, str]:
    """Best native schedule's Hockney time (Eq. 1); ties keep the first listed schedule."""
    if n_ranks <= 1 or collective == "none":
        return 0.0, "none"
    if collective not in NATIVE_SCHEDULES:
        raise SpecError(f"collective {collective!r} has no native schedule; choose one of {sorted(NATIVE_SCHEDULES)}")
    best: tuple[float, str] | None = None
    bandwidth = params.ports * params.link_rate_Bps
    for name in NATIVE_SCHEDULES[collective]:
        phases = native_phase_bytes(collective, name, n_ranks, sigma_bytes)
        t = sum(params.hop_latency_s + b / bandwidth for b in phases)
        if best is None or t < best[0]:
            best = (t, name)
    assert best is not None
    return best


class AnalyticalSingleLevel:
    """NetworkModel: each registered collective completes at start + its Hockney time."""

    def __init__(self, params: SingleLevelParams):
        self.params = params
        self._demand: tuple[DemandEntry, ...] = ()
        self._pending: list[Completion] = []
        self._price_cache: dict[tuple[str, int, int], tuple[float, str]] = {}

    def prepare(self, demand: tuple[DemandEntry, ...], world: int) -> None:
        self._demand = tuple(demand)
        self._pending = []

    def price(self, collective: str, n_ranks: int, sigma_bytes: int) -> tuple[float, str]:
        key = (collective, n_ranks, sigma_bytes)
        hit = self._price_cache.get(key)
        if hit is None:
            hit = self._price_cache[key] = native_time_s(self.params, collective, n_ranks, sigma_bytes)
        return hit

    def register(self, call: CollectiveCall, earliest_start_s: float) -> None:
        check_in_demand(call, self._demand)
        duration_s, schedule = self.price(call.collective, len(call.groups[0]), call.payload_bytes)
        self._pending.append(
            Completion(call_id=call.call_id, start_s=earliest_start_s,
                       end_s=earliest_start_s + duration_s, schedule=schedule)
        )

    def advance(self) -> list[Completion]:
        done, self._pending = self._pending, []
        return done
