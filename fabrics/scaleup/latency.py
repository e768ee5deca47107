"""Remote-access latency decomposition (paper 003, Section 5.3, Appendix C.6, Table 9).

One accelerator-to-accelerator access through one EPS switch costs 810 ns in every case of
Table 9. It is made of a fixed 260 ns (SM→L2 70, accelerator TX 30, two cables of 10, accelerator
RX 70, L2→SM 70), the switch total (switch RX 70 + switch core + switch TX 30) and the
accelerator's MMU + TLB share, which is 550 ns − switch total, split 155:95 into GPU MMU and link
TLB (the nominal ratio, 62 % / 38 %). The three cases only move latency between the switch core
(100 / 200 / 400 ns) and the accelerator, keeping 810 ns per switched hop.

An OCS replaces the whole switch total by its optical pass-through (≈ 10 ns), so one OCS hop costs
260 + MMU/TLB + 10 = 520 ns at the nominal split: the λ ≈ 0.52 µs of Section 5.3.

A path with k switching devices crosses k + 1 cables; the endpoint terms are paid once per path
(the data is relayed in the network, not through accelerators). Latency of accelerator relays is
the schedule's business: each schedule phase pays one path latency.
"""

from __future__ import annotations

from dataclasses import dataclass

from collectives.errors import SpecError

NS = 1e-9

# Table 9: switch-core latency per attribution case; everything else follows from the rules above.
SWITCH_CORE_NS = {"low": 100.0, "nominal": 200.0, "high": 400.0}
# Fixed terms of Table 9 (ns).
SM_TO_L2_NS = 70.0
ACC_TX_NS = 30.0
ACC_RX_NS = 70.0
L2_TO_SM_NS = 70.0
CABLE_NS = 10.0
SWITCH_RX_NS = 70.0
SWITCH_TX_NS = 30.0
ACCESS_BUDGET_NS = 550.0  # switch total + MMU/TLB (Table 9 footnote)
GPU_MMU_SHARE = 155.0 / 250.0  # nominal GPU-MMU : link-TLB ratio
OCS_PASS_THROUGH_NS = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyBudget:
    """Per-component latencies (seconds) of one remote access, for one Table 9 case."""

    case: str = "nominal"
    switch_core_s: float | None = None  # None: the case's Table 9 value
    ocs_pass_through_s: float = OCS_PASS_THROUGH_NS * NS
    cable_s: float = CABLE_NS * NS  # accelerator ↔ level-1 cable
    level2_cable_s: float = CABLE_NS * NS  # level-1 ↔ level-2 fiber (rack to rack)

    def __post_init__(self) -> None:
        if self.case not in SWITCH_CORE_NS:
            raise SpecError(
                f"latency case {self.case!r} is not one of Table 9's cases; choose one of: "
                f"{', '.join(SWITCH_CORE_NS)}"
            )
        if self.switch_core_s is None:
            object.__setattr__(self, "switch_core_s", SWITCH_CORE_NS[self.case] * NS)
        for name in ("switch_core_s", "ocs_pass_through_s", "cable_s", "level2_cable_s"):
            value = getattr(self, name)
            if not value >= 0:
                raise SpecError(f"latency {name}={value!r} must be a non-negative number of seconds")
        if self.switch_total_s > ACCESS_BUDGET_NS * NS + 1e-15:
            raise SpecError(
                f"switch total {self.switch_total_s * 1e9:.0f} ns exceeds the 550 ns access budget of "
                "Table 9; lower switch_core"
            )

    # --- components (Table 9) -------------------------------------------------------------
    @property
    def switch_total_s(self) -> float:
        """EPS forwarding: switch RX + core + switch TX."""
        return SWITCH_RX_NS * NS + self.switch_core_s + SWITCH_TX_NS * NS

    @property
    def mmu_tlb_s(self) -> float:
        return ACCESS_BUDGET_NS * NS - self.switch_total_s

    @property
    def gpu_mmu_s(self) -> float:
        return self.mmu_tlb_s * GPU_MMU_SHARE

    @property
    def link_tlb_s(self) -> float:
        return self.mmu_tlb_s - self.gpu_mmu_s

    @property
    def endpoint_s(self) -> float:
        """Accelerator-side terms paid once per access (both ends, no cables)."""
        return (SM_TO_L2_NS + ACC_TX_NS + ACC_RX_NS + L2_TO_SM_NS) * NS + self.mmu_tlb_s

    # --- per path -------------------------------------------------------------------------
    def components_s(self, *, eps_hops: int, ocs_passes: int, level2_cables: int = 0) -> dict[str, float]:
        """Breakdown of one path: endpoint, cables, EPS switching, OCS pass-through (seconds)."""
        if eps_hops < 0 or ocs_passes < 0 or level2_cables < 0:
            raise ValueError("hop counts must be non-negative")
        devices = eps_hops + ocs_passes
        cables = devices + 1
        return {
            "endpoint_s": self.endpoint_s,
            "cable_s": (cables - level2_cables) * self.cable_s + level2_cables * self.level2_cable_s,
            "eps_switch_s": eps_hops * self.switch_total_s,
            "ocs_pass_s": ocs_passes * self.ocs_pass_through_s,
        }

    def path_latency_s(self, *, eps_hops: int, ocs_passes: int, level2_cables: int = 0) -> float:
        return sum(self.components_s(eps_hops=eps_hops, ocs_passes=ocs_passes, level2_cables=level2_cables).values())

    @property
    def switched_hop_s(self) -> float:
        """One access through one EPS switch: 810 ns in every Table 9 case."""
        return self.path_latency_s(eps_hops=1, ocs_passes=0)

    @property
    def ocs_hop_s(self) -> float:
        """One access through one OCS pass-through: λ ≈ 0.52 µs at the nominal split."""
        return self.path_latency_s(eps_hops=0, ocs_passes=1)

    def table9_row_ns(self) -> dict[str, float]:
        """The row of Table 9 this budget produces (ns), for reports and tests."""
        return {
            "switch_total": self.switch_total_s / NS,
            "switch_core": self.switch_core_s / NS,
            "mmu_tlb": self.mmu_tlb_s / NS,
            "gpu_mmu": self.gpu_mmu_s / NS,
            "link_tlb": self.link_tlb_s / NS,
            "total_per_switched_hop": self.switched_hop_s / NS,
        }
