"""Simlette layer 3: which schedule a collective call runs (paper 003, Section 3.4, C.1).

* EPS: the native schedules of current frameworks on the complete graph the switch provides
  (Section 3.1; the same choice as ``fabrics.network.analytical``): all-reduce one-shot or two-shot,
  whichever Eq. 1 prices lower; all-to-all ``direct``; all-gather ``one_shot``; reduce-scatter
  ``one_shot``. A forced ``schedule=<name>`` must be valid on the complete graph.
* OCS: every schedule of ``collectives.schedules`` that is valid on the group's logical topology
  (the sub-topology of the circuits' Cayley graph on the group's label bits), priced by Eq. 1
  T = h*lambda + v*sigma/(p*R) with the circuits' effective multiplicity p; the cheapest wins
  (ties: first name in sorted order). A forced schedule must be valid there.

Group-local rank i runs on accelerator ``group[i]``. On OCS a group must be a coset of the
label bits where its members differ (an axis of the mesh, Appendix A.1), listed in label order.
"""

from __future__ import annotations

from fractions import Fraction

from collectives.errors import SpecError
from collectives.schedule import Schedule
from collectives.schedules import SCHEDULES, normalize_collective, schedules_for
from collectives.topology import CayleyTopology, block_fold, circulant

EPS_NATIVE = {"alltoall": "direct", "allgather": "one_shot", "reducescatter": "one_shot"}


def native_eps_phases(collective: str, name: str, n: int):
    """The send order of the native EPS kernels, as ``fabrics.scaleup.native.PhaseArrays`` (None: use the
    library schedule's order). Appendix C.4 describes two orders, and we follow both:

    * two-shot all-reduce (Figure 21): "in each phase, all accelerators send to the others in the
      same order, so they all target the same destination at the same time" - every rank walks
      its peers 0, 1, ..., n-1 (``fabrics.scaleup.native.native_phases``, TensorRT-LLM's peer loops);
    * one-shot all-reduce (Figure 20, "without link contention"), direct all-to-all and one-shot
      all-gather: rank s sends its i-th transfer to s XOR i, so each step is a permutation and no
      two sources target one destination at once (the order of the library's schedules on K_n).
    """
    import numpy as np

    from fabrics.scaleup.native import PhaseArrays, canonical_collective, native_phases

    if n < 2 or n & (n - 1):
        return None
    coll = canonical_collective(collective)
    if coll == "allreduce" and name == "two_shot":
        return native_phases(coll, name, n)
    if (coll, name) in (("allreduce", "one_shot"), ("alltoall", "direct"), ("allgather", "one_shot")):
        src = np.repeat(np.arange(n, dtype=np.int64), n - 1)
        dst = src ^ np.tile(np.arange(1, n, dtype=np.int64), n)
        frac = 1.0 if coll == "allreduce" else 1.0 / n
        return (PhaseArrays(src=src, dst=dst, fraction=np.full(src.size, frac)),)
    return None


def complete_topology(n: int):
    """The logical graph an EPS offers a group of n ranks: every pair one switched hop apart."""
    if n >= 2 and n & (n - 1) == 0:
        return block_fold((n.bit_length() - 1,))
    if n < 2:
        raise SpecError(f"a collective group needs at least 2 ranks, got {n}")
    return circulant(n, tuple(range(1, n // 2 + 1)))


def group_subtopology(circuits: CayleyTopology, group: tuple[int, ...]) -> tuple[CayleyTopology, int]:
    """(local topology, effective multiplicity) of a group that is a coset of some label bits."""
    base = group[0]
    diff = 0
    for a in group:
        diff |= a ^ base
    bits = [b for b in range(circuits.n_bits) if diff >> b & 1]
    ok = len(group) == 1 << len(bits) and all(
        group[i] == base ^ sum(((i >> j) & 1) << b for j, b in enumerate(bits)) ^ (base & diff) for i in range(len(group))
    )
    if not ok:
        raise SpecError(
            f"OCS group {group[:4]}... is not an axis coset in label order; Simlette maps group rank i to "
            "label base|bits(i) on single_ocs (Appendix A.1)"
        )
    mult = circuits.multiplicity
    mult = dict(zip(circuits.generators, (mult,) * circuits.degree if isinstance(mult, int) else mult))
    gens, ps = [], []
    for g in circuits.generators:
        if g & ~diff == 0:
            gens.append(sum(((g >> b) & 1) << i for i, b in enumerate(bits)))
            ps.append(mult[g])
    if not gens:
        raise SpecError(f"no OCS circuit lies inside group {group[:4]}...; add generators on its label bits")
    topo = CayleyTopology(n_bits=len(bits), generators=tuple(gens), multiplicity=tuple(ps),
                          name=f"{circuits.describe()}[bits {bits}]")
    return topo, min(ps)


def build_named(name: str, collective: str, topo) -> Schedule:
    entry = SCHEDULES.get(name)
    return entry.build(topo, normalize_collective(collective))


def price_s(cost, sigma_bytes: int, hop_latency_s: float, rate_Bps: float, multiplicity: int) -> float:
    """Eq. 1: T = h*lambda + v/(p*R) with v = cost.v * sigma."""
    return cost.h * hop_latency_s + float(cost.v * sigma_bytes) / (multiplicity * rate_Bps)


def best_on_topology(collective: str, topo, sigma_bytes: int, hop_latency_s: float, rate_Bps: float,
                     multiplicity: int) -> tuple[str, float]:
    """The cheapest valid schedule of the library on ``topo`` by Eq. 1 (ties: sorted name order)."""
    best: tuple[float, str] | None = None
    for name in schedules_for(collective):
        entry = SCHEDULES.get(name)
        if not entry.valid(topo, collective):
            continue
        t = price_s(entry.closed_form(topo, collective), sigma_bytes, hop_latency_s, rate_Bps, multiplicity)
        if best is None or t < best[0]:
            best = (t, name)
    if best is None:
        raise SpecError(f"no {collective} schedule is valid on {topo.describe()}")
    return best[1], best[0]


def eq10_time_s(schedule: Schedule, sigma_bytes: int, hop_latency_s: float, rate_Bps: float,
                multiplicity=None) -> float:
    """Appendix C.2, Eq. 10 from an executable schedule: sum_k (lambda + max_e b_ke / (p_e R)).

    ``multiplicity``: None (p = 1), an int, or a dict generator -> p. Logical edge = directed pair.
    """
    total = 0.0
    for phase in schedule.phases:
        load: dict[tuple[int, int], Fraction] = {}
        for t in phase.transfers:
            load[(t.src, t.dst)] = load.get((t.src, t.dst), Fraction(0)) + t.fraction
        worst = 0.0
        for (s, d), f in load.items():
            if multiplicity is None:
                p = 1
            elif isinstance(multiplicity, int):
                p = multiplicity
            else:
                p = multiplicity[s ^ d]
            worst = max(worst, float(f * sigma_bytes) / (p * rate_Bps))
        total += hop_latency_s + worst
    return total


def eps_egress_time_s(schedule: Schedule, sigma_bytes: int, hop_latency_s: float, rate_Bps: float, ports: int) -> float:
    """The analytical EPS time of a schedule (fabrics.network.analytical): per phase lambda + busiest egress / (L R)."""
    total = 0.0
    for phase in schedule.phases:
        egress: dict[int, Fraction] = {}
        for t in phase.transfers:
            egress[t.src] = egress.get(t.src, Fraction(0)) + t.fraction
        total += hop_latency_s + float(max(egress.values()) * sigma_bytes) / (ports * rate_Bps)
    return total
