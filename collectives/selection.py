"""Pricing and choosing schedules (paper 003, Eq. 1, Table 5, Appendix A.3).

T = h*lambda + v*sigma/(p*R) (Eq. 1), with h and v from the closed form (v in multiples of sigma)
and the deployment parameters lambda (per-phase latency), R (bytes/s per physical link) and p
(parallel circuits per logical edge) owned by the caller. The planner selects by argmin T among
the schedules whose validity predicate holds and that no other valid schedule dominates
(fewer-or-equal phases and volume); ties are broken by fewer phases, then lower volume, then
name, so the choice is deterministic. Comparison uses exact rational arithmetic.
"""

from __future__ import annotations

from fractions import Fraction

from collectives.cost import Cost
from collectives.errors import SpecError
from collectives.schedules import SCHEDULES, normalize_collective, schedules_for


def hockney_time_s(cost: Cost, sigma_bytes: float, hop_latency_s: float, link_rate_Bps: float,
                   multiplicity: int = 1) -> float:
    """Eq. 1: h*lambda + v*sigma/(p*R)."""
    return cost.h * hop_latency_s + float(cost.v) * sigma_bytes / (multiplicity * link_rate_Bps)


def _exact_time(cost: Cost, sigma_bytes, hop_latency_s, link_rate_Bps, multiplicity) -> Fraction:
    return cost.h * Fraction(hop_latency_s) + cost.v * Fraction(sigma_bytes) / (multiplicity * Fraction(link_rate_Bps))


def _check_params(sigma_bytes, hop_latency_s, link_rate_Bps, multiplicity) -> None:
    if sigma_bytes < 0:
        raise SpecError(f"size={sigma_bytes} bytes must be non-negative")
    if hop_latency_s < 0:
        raise SpecError(f"hop_latency={hop_latency_s} s must be non-negative")
    if link_rate_Bps <= 0:
        raise SpecError(f"link_rate={link_rate_Bps} B/s must be positive")
    if isinstance(multiplicity, bool) or not isinstance(multiplicity, int) or multiplicity < 1:
        raise SpecError(f"multiplicity={multiplicity!r} must be an integer >= 1")


def price_all(collective: str, topology, sigma_bytes: int, hop_latency_s: float, link_rate_Bps: float,
              multiplicity: int | None = None, names=None) -> dict[str, dict]:
    """{name: {valid, phases, volume_bytes, time_s, reason?, u}} for every schedule of the collective
    (or only ``names``). Invalid schedules are listed with their reason and never priced."""
    c = normalize_collective(collective)
    p = topology.effective_multiplicity if multiplicity is None else multiplicity
    _check_params(sigma_bytes, hop_latency_s, link_rate_Bps, p)
    out: dict[str, dict] = {}
    for name in (names if names is not None else schedules_for(c)):
        alg = SCHEDULES.get(name).for_collective(c)
        reason = alg.why_invalid(topology)
        if reason is not None:
            out[name] = {"valid": False, "phases": None, "volume_bytes": None, "time_s": None, "reason": reason}
            continue
        cost = alg.closed_form(topology)
        out[name] = {
            "valid": True,
            "phases": cost.h,
            "volume_bytes": float(cost.v * sigma_bytes),
            "time_s": hockney_time_s(cost, sigma_bytes, hop_latency_s, link_rate_Bps, p),
            "ports": cost.u,
            "volume_sigma": str(cost.v),
        }
    return out


def non_dominated(costs: dict[str, Cost]) -> list[str]:
    return sorted(n for n, c in costs.items() if not any(o.dominates(c) for m, o in costs.items() if m != n))


def best_schedule(collective: str, topology, sigma_bytes: int, hop_latency_s: float, link_rate_Bps: float,
                  multiplicity: int | None = None, names=None) -> str:
    """argmin T over valid, non-dominated schedules; deterministic tie-break (h, v, name)."""
    c = normalize_collective(collective)
    p = topology.effective_multiplicity if multiplicity is None else multiplicity
    _check_params(sigma_bytes, hop_latency_s, link_rate_Bps, p)
    costs: dict[str, Cost] = {}
    for name in (names if names is not None else schedules_for(c)):
        alg = SCHEDULES.get(name).for_collective(c)
        if alg.valid(topology):
            costs[name] = alg.closed_form(topology)
    if not costs:
        raise SpecError(f"no {c} schedule is valid on {topology.describe()}")
    front = non_dominated(costs)
    return min(front, key=lambda n: (_exact_time(costs[n], sigma_bytes, hop_latency_s, link_rate_Bps, p),
                                     costs[n].h, costs[n].v, n))
