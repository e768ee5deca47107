"""``network=nccl`` on ``fabric=pcie``: every collective as NCCL runs it on a PCIe server.

The same pricing as the PCIe NCCL baseline (``fabric=pcie scheduler=nccl``, ``fabrics.network.pcie``
with ``fabrics.network.nccl.pcie.PcieNccl``): ring all-reduce / all-gather / reduce-scatter and the
static pairwise all-to-all / AlltoAllv (NCCL's grouped sends and receives -- whatever
``scheduler`` says: NCCL has no other AlltoAllv), each lane at its NCCL transport's efficiency
(P2P, SHM, NET) plus NCCL's latency. This module only chooses that model on the registry's
request and reports like the nccl model on GPU fabrics: ``report().model == "nccl"``, the
choices "<algorithm>/<protocol>" and the transports each row crossed (``details["transports"]``).

``network.algorithm`` may be ``auto`` or ``ring`` (NCCL's PCIe servers run rings; tree needs
NVLink-less multi-node trees this model does not price), ``network.protocol`` ``auto``, ``ll``
or ``simple`` (LL128 is off on PCIe, tuning.cc). NCCL_P2P_LEVEL is the generation's
``p2p_level`` (``network.generations.pcie_server.p2p_level=none|pix|pxb|phb|sys``).
"""

from __future__ import annotations

from dataclasses import replace

from collectives.errors import SpecError
from fabrics.network.pcie import PcieNetwork
from fabrics.network.protocol import CollectiveCall, NetworkReport, schedules_by_row
from fabrics.pcie.platform import PcieCluster

PCIE_ALGORITHMS = ("auto", "ring")
PCIE_PROTOCOLS = ("auto", "ll", "simple")


class PcieNcclNetwork(PcieNetwork):
    """``PcieNetwork`` of the NCCL baseline, reporting as ``network=nccl``."""

    name = "nccl"

    def __init__(self, cluster: PcieCluster, params, gen, *, protocol: str = "auto"):
        super().__init__(cluster, replace(params, scheduler="nccl", scheduler_params={}, nccl=None))
        self.use_nccl(gen, protocol=protocol)
        self.transports_used: dict[tuple[str, str, str], str] = {}

    def prepare(self, demand, world: int) -> None:
        super().prepare(demand, world)
        self.transports_used = {}

    def register(self, call: CollectiveCall, earliest_start_s: float) -> None:
        super().register(call, earliest_start_s)
        self.transports_used[(call.region, call.axis, call.collective)] = self.nccl.transports(
            call.collective, call.groups, call.demand)

    def report(self) -> NetworkReport:
        flow = super().report()
        rows = schedules_by_row(self.schedules_used)
        transports = schedules_by_row(self.transports_used)
        details = dict(flow.details or {})  # its "nccl" entry too, read as the PCIe baseline's
        details.update(choices=rows, generation=self.nccl.gen.name, p2p_level=self.nccl.p2p_level,
                       transports=transports)
        return NetworkReport(model=self.name, schedules=rows, details=details)


def generation_of(spec, cluster):
    """The generation the config edge chose for this PCIe cluster (``PcieNetworkParams.nccl``: the
    accelerator's own with PCIe rows, else ``pcie_server``), as ``spec`` (the network group) has it."""
    chosen = cluster.options.nccl
    name = "pcie_server" if chosen is None else chosen.name
    for gen in spec.generations:
        if gen.name == name:
            return gen
    raise SpecError(f"network=nccl on fabric=pcie needs the generation {name} in network.generations "
                    "(conf/network/nccl.yaml)")


def check_forced(spec) -> None:
    if spec.algorithm not in PCIE_ALGORITHMS:
        raise SpecError(f"network.algorithm={spec.algorithm} does not run on fabric=pcie: NCCL's PCIe servers run "
                        f"rings (and grouped sends for all-to-all); use network.algorithm=ring or auto")
    if spec.protocol not in PCIE_PROTOCOLS:
        raise SpecError(f"network.protocol={spec.protocol} is off on fabric=pcie (NCCL enables LL128 on NVLink "
                        "only, tuning.cc); use network.protocol=ll, simple or auto")


def build_pcie_nccl(cluster, spec, world: int) -> PcieNcclNetwork:
    """The registry's builder for ``network=nccl`` on ``fabric=pcie``."""
    check_forced(spec)
    return PcieNcclNetwork(PcieCluster(server=cluster.node, nodes=cluster.nodes), cluster.options,
                           generation_of(spec, cluster), protocol=spec.protocol)


__all__ = ["PcieNcclNetwork", "build_pcie_nccl", "generation_of", "check_forced"]
