"""The registry of network models (``network=analytical|flow|simlette|nccl``), one entry per model.

An entry names the fabric families it runs on (``fabrics.spec.FAMILIES``) and a builder taking
typed specs only: ``build(cluster: ClusterSpec, spec, world, topology) -> NetworkModel``. A pair
the entry does not declare is refused with one line before anything runs. Adding a model is one
``@register_network_model`` function (see docs/architecture.md).

| model      | scale-up fabrics                                   | PCIe clusters                         | GPU fabrics (nvswitch, gpu_cluster)      |
|------------|----------------------------------------------------|---------------------------------------|------------------------------------------|
| analytical | Hockney phases, bottleneck capacity (Section 5.4)  | --                                    | ideal: Eq. 1 per NVSwitch domain, NICs   |
| flow       | the same schedules, max-min sharing of capacities  | max-min over PCIe/NIC/leaf resources  | --                                       |
| simlette   | flit-level simulation on SimPy (Section 5)         | --                                    | --                                       |
| nccl       | --                                                 | NCCL's ring / pairwise on the flow evaluator, NCCL latency | ring, tree, NVLS, CollNet x protocols |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from collectives.errors import SpecError
from collectives.registry import Registry
from fabrics.network.protocol import NetworkModel
from fabrics.spec import GPU, PCIE, SCALEUP, ClusterSpec

ANALYTICAL_MODELS = ("fabric", "single_level")


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalyticalSpec:
    model: str = "fabric"  # fabric: the fabric-aware model; single_level: λ + bytes/(L·R) per phase (Eq. 1)

    def __post_init__(self) -> None:
        if self.model not in ANALYTICAL_MODELS:
            raise SpecError(f"network.model={self.model!r} is unknown; choose one of: {', '.join(ANALYTICAL_MODELS)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowSpec:
    """The flow-level model has no parameters of its own: capacities come from the fabric."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkModelEntry:
    name: str
    families: tuple[str, ...]
    build: Callable[..., NetworkModel]
    summary: str


NETWORK_MODELS: Registry[NetworkModelEntry] = Registry("network")


def register_network_model(name: str, *, families: tuple[str, ...], summary: str):
    def deco(build: Callable[..., NetworkModel]) -> Callable[..., NetworkModel]:
        NETWORK_MODELS.add(name, NetworkModelEntry(name=name, families=families, build=build, summary=summary))
        return build

    return deco


def supporting(family: str) -> list[str]:
    return [n for n, e in NETWORK_MODELS.items() if family in e.families]


def check_family(name: str, fabric: str, family: str) -> NetworkModelEntry:
    """The entry of ``network=name``; one line when it does not run on fabrics of ``family``."""
    entry = NETWORK_MODELS.get(name)
    if family not in entry.families:
        raise SpecError(f"network={name} does not run on fabric={fabric} ({family} fabrics); "
                        f"choose network={' or network='.join(supporting(family))}")
    return entry


def check_supported(name: str, cluster: ClusterSpec) -> NetworkModelEntry:
    return check_family(name, cluster.name, cluster.family)


def build_network_model(name: str, cluster: ClusterSpec, spec, world: int, *, topology=None) -> NetworkModel:
    """The model ``name`` on ``cluster`` for ``world`` ranks (call ``prepare`` next)."""
    return check_supported(name, cluster).build(cluster, spec, world, topology)


def _scaleup_kwargs(cluster: ClusterSpec) -> dict:
    o = cluster.options
    return dict(schedule=o.schedule, planner_hop_latency_s=o.planner_hop_latency_s, allocation=o.allocation)


@register_network_model("analytical", families=(SCALEUP, GPU),
                        summary="Hockney phases on the fabric's shared capacities (bottleneck bound)")
def _analytical(cluster: ClusterSpec, spec: AnalyticalSpec, world: int, topology=None) -> NetworkModel:
    from fabrics.network.analytical import AnalyticalSingleLevel, FabricAnalytical, SingleLevelParams
    from fabrics.scaleup.physical import build_fabric

    if cluster.family == GPU:  # one NVSwitch domain is a single-level fabric already: both models agree
        from fabrics.gpu_cluster import GpuClusterAnalytical

        return GpuClusterAnalytical(cluster, cluster.options)
    if spec.model == "single_level":
        lam = cluster.options.hop_latency_s
        if lam is None:
            raise SpecError("fabric.hop_latency is not set; give e.g. fabric.hop_latency=0.81us")
        return AnalyticalSingleLevel(SingleLevelParams(hop_latency_s=lam, link_rate_Bps=cluster.node.link_rate_Bps,
                                                       ports=cluster.node.ports))
    return FabricAnalytical(build_fabric(cluster.node), **_scaleup_kwargs(cluster))


@register_network_model("flow", families=(SCALEUP, PCIE),
                        summary="max-min fair sharing of the fabric's capacities by the transfers of a phase")
def _flow(cluster: ClusterSpec, spec: FlowSpec, world: int, topology=None) -> NetworkModel:
    if cluster.family == PCIE:
        from fabrics.pcie.platform import PcieCluster
        from fabrics.network.pcie import PcieNetwork

        return PcieNetwork(PcieCluster(server=cluster.node, nodes=cluster.nodes), cluster.options)
    from fabrics.network.flow import FabricFlow
    from fabrics.scaleup.physical import build_fabric

    return FabricFlow(build_fabric(cluster.node), **_scaleup_kwargs(cluster))


@register_network_model("simlette", families=(SCALEUP,),
                        summary="flit-level discrete-event simulation (links, buffers, credits)")
def _simlette(cluster: ClusterSpec, spec, world: int, topology=None) -> NetworkModel:
    from fabrics.network.simlette.build import build_simlette

    return build_simlette(cluster, spec, world=world, topology=topology)


@register_network_model("nccl", families=(GPU, PCIE),
                        summary="NCCL-like algorithm x protocol cost model (ring, tree, NVLS; LL, LL128, Simple)")
def _nccl(cluster: ClusterSpec, spec, world: int, topology=None) -> NetworkModel:
    from fabrics.network.nccl.model import build_nccl

    if cluster.family == PCIE:  # the PCIe NCCL baseline's pricing (fabrics/network/nccl/pcie_network.py)
        from fabrics.network.nccl.pcie_network import build_pcie_nccl

        return build_pcie_nccl(cluster, spec, world)

    return build_nccl(cluster, spec, world)


__all__ = ["NETWORK_MODELS", "AnalyticalSpec", "FlowSpec", "register_network_model", "build_network_model",
           "check_supported", "supporting"]
