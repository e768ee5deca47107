"""Closed-form cost of a schedule (paper 003, Section 3.4, Appendix A.2).

``Cost(h, v, u)``: serialized phases h, bottleneck volume v in multiples of the buffer size
sigma (sum over phases of the most loaded logical edge, Eq. 10), and ports driven per node u.
A closed form receives only the topology: lambda, R and p belong to the planner, which forms
T = h*lambda + v*sigma/(p*R) (Eq. 1, ``collectives.selection.hockney_time_s``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    h: int  # serialized phases
    v: Fraction  # bottleneck volume, multiples of sigma
    u: int  # logical ports (generators) a rank drives, sending or receiving

    def volume_bytes(self, sigma_bytes: int) -> float:
        return float(self.v * sigma_bytes)

    def dominates(self, other: "Cost") -> bool:
        """No worse in phases and volume, better in one (Table 5's 'dominated')."""
        return self.h <= other.h and self.v <= other.v and (self.h < other.h or self.v < other.v)
