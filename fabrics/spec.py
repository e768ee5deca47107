"""The cluster model every fabric is an instance of (typed, frozen; built once at the config edge).

A cluster is ``nodes`` copies of one node -- accelerators plus an intra-node domain -- whose NICs
meet in a scale-out network:

* the **scale-up fabrics** of paper 003 (``single_eps``, ``single_ocs``, ``all_eps``, ``hybrid``,
  ``all_ocs``) are one node whose domain is the whole rail-optimised scale-up fabric
  (``fabrics.scaleup.physical.FabricSpec``: hundreds of accelerators, one or two switching levels) and
  no scale-out network;
* the **GPU systems** of today (``nvswitch``, ``gpu_cluster``): ``nodes`` NVLink/NVSwitch domains
  (``fabrics.nvswitch.NvSwitchDomain``: an HGX baseboard of 8 GPUs or an NVL72 rack) joined, when
  there are several, by a rail-optimised leaf-spine network of NICs (``ScaleOutSpec``);
* the **PCIe servers** of paper 000 are ``nodes`` copies of a PCIe tree
  (``fabrics.pcie.platform.PcieServer``: switches, CPU root complexes, GPUs, NICs) joined by a
  two-tier leaf-spine network (``ScaleOutSpec``: NIC rate, nodes per leaf, oversubscription).

Network models declare the families they run on (``family``: ``scaleup`` | ``pcie``); the
registry (``fabrics.network.registry``) refuses an unsupported pair with one line. How a model
uses a fabric (a forced schedule, the OCS planner's allocation and λ, PCIe's AlltoAllv scheduler
and its planning charge) travels with the cluster as ``options``, so every model sees the same
choices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from collectives.errors import SpecError
from fabrics.nvswitch import NvSwitchDomain
from fabrics.pcie.platform import PcieServer
from fabrics.scaleup.physical import FABRIC_KINDS, FabricSpec

SCALEUP, PCIE, GPU = "scaleup", "pcie", "gpu"
FAMILIES = (SCALEUP, PCIE, GPU)
# leaf_spine: any NIC to any leaf (paper 000); rail_optimized: NIC r of every node on the leaf of
# rail r (the GPU-cluster layout: same-rail traffic crosses one leaf, cross-rail goes via spines).
SCALE_OUT_TOPOLOGIES = ("leaf_spine", "rail_optimized")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleOutSpec:
    """NICs of every node joined by a two-tier leaf-spine network (paper 000, Section 2), or rail-optimised."""

    topology: str = "leaf_spine"
    nics_per_node: int
    nic_rate_Bps: float  # one NIC port, one direction
    nodes_per_leaf: int = 8
    oversubscription: float = 1.0  # leaf down : up capacity

    def __post_init__(self) -> None:
        if self.topology not in SCALE_OUT_TOPOLOGIES:
            raise SpecError(f"scale-out topology {self.topology!r} is unknown; choose one of: "
                            f"{', '.join(SCALE_OUT_TOPOLOGIES)}")
        if isinstance(self.nics_per_node, bool) or not isinstance(self.nics_per_node, int) or self.nics_per_node < 0:
            raise SpecError(f"nics_per_node={self.nics_per_node!r} must be a whole number >= 0")
        if not self.nic_rate_Bps > 0:
            raise SpecError(f"nic_rate={self.nic_rate_Bps!r} B/s must be positive")
        if isinstance(self.nodes_per_leaf, bool) or not isinstance(self.nodes_per_leaf, int) or self.nodes_per_leaf < 1:
            raise SpecError(f"nodes_per_leaf={self.nodes_per_leaf!r} must be a whole number >= 1")
        if not self.oversubscription >= 1.0:
            raise SpecError(f"oversubscription={self.oversubscription!r} must be >= 1 (1 = non-blocking)")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleUpOptions:
    """How network models use a scale-up fabric (the ``fabric.*`` choices beside its shape)."""

    schedule: str = "auto"  # auto: the model's best (native on EPS, the plan's on OCS), or a schedule name
    allocation: str = "shared_host"  # OCS planner allocation (Appendix A.1-A.2)
    planner_hop_latency_s: float | None = None  # λ of the OCS planner; None: one OCS hop of Table 9
    hop_latency_s: float | None = None  # λ of the single-level Hockney model (``network.model=single_level``)

    def __post_init__(self) -> None:
        if not isinstance(self.schedule, str) or not self.schedule:
            raise SpecError(f"fabric.schedule={self.schedule!r} must be auto or a schedule name")
        if not isinstance(self.allocation, str) or not self.allocation:
            raise SpecError(f"fabric.allocation={self.allocation!r} must be an allocation name (shared_host)")
        for name in ("planner_hop_latency_s", "hop_latency_s"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise SpecError(f"fabric.hop_latency={value!r} s must be a non-negative time")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSpec:
    """``nodes`` x (accelerators + intra-node domain) + NICs + a scale-out network."""

    name: str  # the fabric option (conf/fabric/<name>.yaml)
    nodes: int
    node: Union[FabricSpec, PcieServer, NvSwitchDomain]  # the intra-node domain
    scale_out: ScaleOutSpec | None = None
    options: object = None  # ScaleUpOptions (scale-up) | fabrics.network.pcie.PcieNetworkParams (PCIe) | None (GPU)

    def __post_init__(self) -> None:
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or self.nodes < 1:
            raise SpecError(f"nodes={self.nodes!r} must be a whole number >= 1")
        if isinstance(self.node, FabricSpec):
            if self.nodes != 1 or self.scale_out is not None:
                raise SpecError(f"fabric={self.name} is one scale-up domain: nodes must be 1 and it has no "
                                "scale-out network")
            if not isinstance(self.options, ScaleUpOptions):
                raise SpecError(f"fabric={self.name}: scale-up options missing")
        elif isinstance(self.node, PcieServer):
            if self.nodes > 1 and (self.scale_out is None or self.scale_out.nics_per_node == 0):
                raise SpecError(f"platform {self.node.name} has no NICs, so nodes={self.nodes} cannot talk; "
                                "use nodes=1 or add nics")
        elif isinstance(self.node, NvSwitchDomain):
            if self.nodes > 1 and (self.scale_out is None or self.scale_out.nics_per_node == 0):
                raise SpecError(f"fabric={self.name}: {self.nodes} NVLink domains need NICs to talk; "
                                "set fabric.nics_per_node and fabric.nic_rate, or use nodes=1")
        else:
            raise SpecError(f"fabric={self.name}: node must be a scale-up FabricSpec, a PcieServer or an "
                            "NvSwitchDomain, "
                            f"got {type(self.node).__name__}")

    @property
    def family(self) -> str:
        if isinstance(self.node, FabricSpec):
            return SCALEUP
        return GPU if isinstance(self.node, NvSwitchDomain) else PCIE

    @property
    def accelerators_per_node(self) -> int:
        return self.node.gpus_per_node if isinstance(self.node, PcieServer) else self.node.accelerators

    @property
    def accelerators(self) -> int:
        return self.nodes * self.accelerators_per_node

    def describe(self) -> str:
        if self.family == SCALEUP:
            return f"{self.name} ({self.node.accelerators} accelerators, {self.node.ports} ports)"
        if self.family == GPU:
            return f"{self.name} ({self.nodes} x {self.node.gpus} {self.node.name} NVLink domain)"
        return f"{self.name} ({self.nodes} x {self.node.name}, {self.node.gpus_per_node} GPUs per node)"


def scaleup_kind(name: str) -> bool:
    return name in FABRIC_KINDS


__all__ = ["ClusterSpec", "ScaleOutSpec", "ScaleUpOptions", "NvSwitchDomain", "SCALEUP", "PCIE", "GPU", "FAMILIES"]
