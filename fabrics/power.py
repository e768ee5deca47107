"""System power model (paper 003, Appendix D.4, Table 12).

TDP basis, independent of traffic. Counted from the physical fabric's construction:

* accelerators — every accelerator of the system (spares included), at its per-XPU figure that
  already contains its share of host CPU, NICs, fans (D.4);
* switching chips — *all* physical ports of every EPS and OCS chip, used or not (C.7: "the
  energy-efficiency results … account for the full port count of each fabric");
* transceivers — every fiber cable end at an electrical device needs a module: a pluggable at an
  EPS port, co-packaged optics (CPO) at an accelerator (all-OCS fabrics use CPO at the
  accelerator, D.4); an OCS end is passive and needs none. Copper cables need none.

For the 576-accelerator fabrics this gives all-EPS 720 EPS chips × 72 ports and 10 368
pluggables, hybrid 648 EPS + 72 OCS chips and 5 184 pluggables, all-OCS 936 OCS chips and
20 736 CPO ports, hence the all-EPS / all-OCS ratio 1.33 at 400 G and 1.60 at 1.6 T (Appendix E).
"""

from __future__ import annotations

from dataclasses import dataclass

from collectives.errors import SpecError
from fabrics.scaleup.physical import ACCELERATOR, EPS, PhysicalFabric

GBPS = 1e9 / 8  # bytes/s per Gb/s

# Table 12, W per component, keyed by the unidirectional port rate in Gb/s.
EPS_PORT_W = {400: 11.81, 800: 15.35, 1600: 19.95}
OCS_PORT_W = {200: 1.36, 400: 1.50, 800: 1.65, 1600: 1.82}
PLUGGABLE_W = {400: 9.0, 800: 17.0, 1600: 30.0}
CPO_PORT_W = {400: 2.75, 800: 4.50, 1600: 7.00}
# Per accelerator including host share (Table 12).
ACCELERATOR_W = {"B200": 1454.0, "B300": 1663.0, "RX00": 2631.0, "Rubin": 2631.0}


def rate_key(link_rate_Bps: float) -> int:
    """The Table 12 column (Gb/s) of a link rate in bytes/s."""
    gbps = link_rate_Bps / GBPS
    for key in sorted(set(EPS_PORT_W) | set(OCS_PORT_W)):
        if abs(gbps - key) <= 1e-6 * key:
            return key
    raise SpecError(
        f"link_rate={gbps:g}Gb/s has no power figures in Table 12; use 400Gb/s, 800Gb/s or 1.6Tb/s"
    )


def _lookup(table: dict[int, float], key: int, what: str) -> float:
    if key not in table:
        raise SpecError(f"Table 12 gives no {what} power at {key}Gb/s; use one of {sorted(table)} Gb/s")
    return table[key]


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerBreakdown:
    link_rate_Bps: float
    accelerators: int
    eps_ports: int
    ocs_ports: int
    pluggables: int
    cpo_ports: int
    accelerators_W: float
    eps_W: float
    ocs_W: float
    pluggables_W: float
    cpo_W: float

    @property
    def network_W(self) -> float:
        return self.eps_W + self.ocs_W + self.pluggables_W + self.cpo_W

    @property
    def total_W(self) -> float:
        return self.accelerators_W + self.network_W

    def as_dict(self) -> dict[str, float]:
        return {
            "accelerators": self.accelerators, "eps_ports": self.eps_ports, "ocs_ports": self.ocs_ports,
            "pluggables": self.pluggables, "cpo_ports": self.cpo_ports,
            "accelerators_W": self.accelerators_W, "eps_W": self.eps_W, "ocs_W": self.ocs_W,
            "pluggables_W": self.pluggables_W, "cpo_W": self.cpo_W,
            "network_W": self.network_W, "total_W": self.total_W,
        }


def transceiver_counts(fabric: PhysicalFabric) -> tuple[int, int]:
    """(pluggables, CPO ports): one module per fiber end at an EPS chip or an accelerator."""
    kind = {d.id: d.kind for d in fabric.devices}
    pluggables = cpo = 0
    for cable in fabric.cables:
        if cable.medium != "fiber":
            continue
        for end in (cable.a, cable.b):
            if kind[end] == EPS:
                pluggables += 1
            elif kind[end] == ACCELERATOR:
                cpo += 1
    return pluggables, cpo


def power_breakdown(fabric: PhysicalFabric, accelerator_power_W: float, link_rate_Bps: float | None = None) -> PowerBreakdown:
    """Component power of ``fabric``; ``link_rate_Bps`` selects the Table 12 column (default: the fabric's)."""
    if not accelerator_power_W > 0:
        raise SpecError(f"accelerator_power_W={accelerator_power_W!r} must be positive (RX00: 2631 W)")
    rate = fabric.spec.link_rate_Bps if link_rate_Bps is None else link_rate_Bps
    key = rate_key(rate)
    counts = fabric.component_counts()
    pluggables, cpo = transceiver_counts(fabric)
    eps_w = counts["eps_ports"] * _lookup(EPS_PORT_W, key, "EPS port") if counts["eps_ports"] else 0.0
    ocs_w = counts["ocs_ports"] * _lookup(OCS_PORT_W, key, "OCS port") if counts["ocs_ports"] else 0.0
    plug_w = pluggables * _lookup(PLUGGABLE_W, key, "pluggable") if pluggables else 0.0
    cpo_w = cpo * _lookup(CPO_PORT_W, key, "CPO port") if cpo else 0.0
    return PowerBreakdown(
        link_rate_Bps=rate, accelerators=counts["accelerators"], eps_ports=counts["eps_ports"],
        ocs_ports=counts["ocs_ports"], pluggables=pluggables, cpo_ports=cpo,
        accelerators_W=counts["accelerators"] * accelerator_power_W, eps_W=eps_w, ocs_W=ocs_w,
        pluggables_W=plug_w, cpo_W=cpo_w,
    )


def system_power_W(fabric: PhysicalFabric, accelerator_power_W: float, link_rate_Bps: float | None = None) -> float:
    return power_breakdown(fabric, accelerator_power_W, link_rate_Bps).total_W


def tokens_per_s_per_MW(tokens_per_s: float, power_W: float) -> float:
    """Energy-normalised throughput (Section 6, Figure 7)."""
    if not power_W > 0:
        raise ValueError("power_W must be positive")
    return tokens_per_s / (power_W / 1e6)


__all__ = [
    "ACCELERATOR_W", "CPO_PORT_W", "EPS_PORT_W", "OCS_PORT_W", "PLUGGABLE_W", "PowerBreakdown",
    "power_breakdown", "rate_key", "system_power_W", "tokens_per_s_per_MW", "transceiver_counts",
]
