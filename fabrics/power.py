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

Today's GPU systems (``ClusterSpec`` of ``NvSwitchDomain`` nodes, docs/power.md) are counted for
what the deployment uses instead: the GPUs it occupies (whole compute trays on NVL72) with their
board TDP and host share, their share of the NVLink switches, and -- across nodes -- its NICs, the
leaf/spine ports they use and the transceivers of those links. ``gpu_power_breakdown`` does that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from collectives.errors import SpecError
from fabrics.nvswitch import NvSwitchDomain
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


def deployment_share_W(breakdown: PowerBreakdown, world: int) -> float:
    """What ``world`` of the fabric's accelerators draw: the system less its idle accelerators and the
    CPO ports on them; the switching network and its pluggables are built for, and shared by, the
    whole fabric, so they stay (C.7: every port counted)."""
    if not 1 <= world <= breakdown.accelerators:
        raise SpecError(f"world={world} must be between 1 and the fabric's {breakdown.accelerators} accelerators")
    idle = breakdown.accelerators - world
    return breakdown.total_W - idle * (breakdown.accelerators_W + breakdown.cpo_W) / breakdown.accelerators


# --- today's GPU systems: power counted for what the deployment uses ------------------------------

def _positive(what: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise SpecError(f"{what}={value!r} must be a positive number")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferenceSystem:
    """The system whose rated power an accelerator's ``host_power_W`` shares out (DGX H100: 8 GPUs,
    4 NVSwitch chips, 8 NICs; GB200 NVL72: 72 GPUs, 9 switch trays, 72 NICs; conf/power/gpu.yaml)."""

    name: str
    gpus: int
    switches: int  # NVSwitch chips on an HGX baseboard, NVLink switch trays of an NVL72 rack
    switch_W: float  # one of them
    nics: int  # scale-out NICs of the system
    nic_W: float  # one of them, without its transceiver

    def __post_init__(self) -> None:
        for what in ("gpus", "switches", "nics"):
            value = getattr(self, what)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if what == "gpus" else 0):
                raise SpecError(f"power reference system {self.name}: {what}={value!r} must be a whole number")
        _positive(f"power reference system {self.name}: switch_W", self.switch_W)
        _positive(f"power reference system {self.name}: nic_W", self.nic_W)

    @property
    def switch_W_per_gpu(self) -> float:
        return self.switches * self.switch_W / self.gpus

    def host_rest_W(self, host_power_W: float) -> float:
        """The per-GPU host share without the system's NVSwitches and scale-out NICs (CPUs, memory,
        DPUs, fans, power conversion): those two are charged for what a deployment uses."""
        rest = host_power_W - self.switch_W_per_gpu - self.nics * self.nic_W / self.gpus
        if not rest > 0:
            raise SpecError(f"host_power_W={host_power_W:g} of {self.name} does not cover its NVSwitches and NICs "
                            f"({host_power_W - rest:g} W per GPU); raise accelerator.host_power_W")
        return rest


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuPowerFigures:
    """Reference systems by accelerator name and scale-out NIC power by port rate (Gb/s)."""

    systems: Mapping[str, ReferenceSystem]
    nic_W: Mapping[int, float]

    def system(self, accelerator: str) -> ReferenceSystem:
        try:
            return self.systems[accelerator]
        except KeyError:
            raise SpecError(f"accelerator {accelerator} has no reference system in conf/power/gpu.yaml (known: "
                            f"{', '.join(sorted(self.systems))}); add its NVSwitches and NICs there") from None

    def nic_power_W(self, rate_Bps: float) -> float:
        gbps = rate_Bps / GBPS
        for key, watts in self.nic_W.items():
            if abs(gbps - key) <= 1e-6 * key:
                return watts
        raise SpecError(f"nic_rate={gbps:g}Gb/s has no NIC power figure in conf/power/gpu.yaml; "
                        f"use one of {sorted(self.nic_W)} Gb/s")


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuPowerBreakdown:
    """Counts and watts of what a GPU deployment uses (TDP basis)."""

    nodes: int  # nodes (NVLink domains) the deployment occupies
    gpus: int  # GPUs it runs on
    gpus_charged: int  # GPUs whose power it is charged: whole compute trays on NVL72
    compute_trays: int  # NVL72 compute trays occupied (0 on HGX nodes)
    switch_units: float  # its share of NVSwitch chips (HGX) or switch trays (NVL72)
    nics: int
    switch_ports: int  # scale-out leaf and spine ports its NICs use
    transceivers: int  # pluggable modules at both ends of those links
    gpu_boards_W: float
    host_W: float
    nvswitch_W: float
    nics_W: float
    switch_ports_W: float
    transceivers_W: float

    @property
    def network_W(self) -> float:
        return self.nics_W + self.switch_ports_W + self.transceivers_W

    @property
    def total_W(self) -> float:
        return self.gpu_boards_W + self.host_W + self.nvswitch_W + self.network_W

    def as_dict(self) -> dict[str, float]:
        counts = ("nodes", "gpus", "gpus_charged", "compute_trays", "switch_units", "nics", "switch_ports",
                  "transceivers")
        watts = ("gpu_boards_W", "host_W", "nvswitch_W", "nics_W", "switch_ports_W", "transceivers_W")
        return {**{k: getattr(self, k) for k in counts + watts}, "network_W": self.network_W,
                "total_W": self.total_W}


def gpus_per_node_used(nodes: int, gpus_per_node: int, world: int) -> list[int]:
    """GPUs used in each occupied node when ``world`` ranks fill the nodes in order."""
    if not 1 <= world <= nodes * gpus_per_node:
        raise SpecError(f"world={world} must be between 1 and the cluster's {nodes * gpus_per_node} GPUs")
    full, rest = divmod(world, gpus_per_node)
    return [gpus_per_node] * full + ([rest] if rest else [])


def charged_gpus(domain: NvSwitchDomain, gpus: int) -> int:
    """GPUs charged for ``gpus`` used in one domain: an NVL72 compute tray (4 GPUs, 2 Grace CPUs) is
    powered whole; an HGX node is shared out per GPU, as cloud instances of 1-8 GPUs slice it."""
    tray = domain.gpus_per_tray
    return gpus if tray is None else min(math.ceil(gpus / tray) * tray, domain.max_gpus)


def scale_out_counts(scale_out, nodes: int) -> tuple[int, int, int]:
    """(NICs, switch ports, transceivers) of ``nodes`` joined by a two-tier (rail-optimised) leaf-spine
    network: each NIC takes a leaf port, the leaf's uplinks (down / oversubscription) a spine port
    each; every link is optical across racks, a pluggable at each end (as paper 003 D.4 assumes
    between racks)."""
    if nodes < 2 or scale_out is None or scale_out.nics_per_node == 0:
        return 0, 0, 0  # one node talks over NVLink only: its NICs carry nothing and are not charged
    nics = nodes * scale_out.nics_per_node
    uplinks = math.ceil(nics / scale_out.oversubscription)
    return nics, nics + 2 * uplinks, 2 * nics + 2 * uplinks


def gpu_power_breakdown(cluster, *, world: int, board_power_W: float, host_power_W: float,
                        figures: GpuPowerFigures) -> GpuPowerBreakdown:
    """Power of ``world`` GPUs of a GPU cluster (``ClusterSpec`` of ``NvSwitchDomain`` nodes): the
    GPUs charged with board TDP + host share (less the NVSwitches and NICs, counted apart), the
    NVSwitch share of every node whose GPUs talk over NVLink, and across nodes the NICs, the
    leaf/spine ports and transceivers of their links (Table 12 EPS port and pluggable figures)."""
    domain = cluster.node
    if not isinstance(domain, NvSwitchDomain):
        raise SpecError(f"fabric={cluster.name} is not a GPU cluster of NVLink domains")
    _positive(f"accelerator {domain.name}: board_power_W", board_power_W)
    _positive(f"accelerator {domain.name}: host_power_W", host_power_W)
    ref = figures.system(domain.name)
    used = gpus_per_node_used(cluster.nodes, domain.gpus, world)
    charged = [charged_gpus(domain, g) for g in used]
    switch_units = sum(c for g, c in zip(used, charged) if g >= 2) * ref.switches / ref.gpus
    nics, ports, modules = scale_out_counts(cluster.scale_out, len(used))
    rate = cluster.scale_out.nic_rate_Bps if nics else None
    key = rate_key(rate) if nics else None
    return GpuPowerBreakdown(
        nodes=len(used), gpus=world, gpus_charged=sum(charged),
        compute_trays=sum(charged) // domain.gpus_per_tray if domain.gpus_per_tray else 0,
        switch_units=switch_units, nics=nics, switch_ports=ports, transceivers=modules,
        gpu_boards_W=sum(charged) * board_power_W, host_W=sum(charged) * ref.host_rest_W(host_power_W),
        nvswitch_W=switch_units * ref.switch_W,
        nics_W=nics * figures.nic_power_W(rate) if nics else 0.0,
        switch_ports_W=ports * _lookup(EPS_PORT_W, key, "EPS port") if nics else 0.0,
        transceivers_W=modules * _lookup(PLUGGABLE_W, key, "pluggable") if nics else 0.0,
    )


def tokens_per_s_per_MW(tokens_per_s: float, power_W: float) -> float:
    """Energy-normalised throughput (Section 6, Figure 7)."""
    if not power_W > 0:
        raise ValueError("power_W must be positive")
    return tokens_per_s / (power_W / 1e6)


__all__ = [
    "ACCELERATOR_W", "CPO_PORT_W", "EPS_PORT_W", "OCS_PORT_W", "PLUGGABLE_W", "GpuPowerBreakdown",
    "GpuPowerFigures", "PowerBreakdown", "ReferenceSystem", "charged_gpus", "deployment_share_W",
    "gpu_power_breakdown", "gpus_per_node_used", "power_breakdown", "rate_key", "scale_out_counts",
    "system_power_W", "tokens_per_s_per_MW", "transceiver_counts",
]
