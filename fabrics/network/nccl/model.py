"""``NcclNetwork``: the NetworkModel of ``network=nccl`` on GPU fabrics (NVLink domains + NICs).

Each registered call is priced on its own, as the analytical model does (paper 003, B.4): the
groups of one call share their nodes' NICs (a node's NIC bandwidth is split over the call's ranks
on it), but concurrent calls do not slow each other down. A call's time is that of its slowest
group; its completion carries ``schedule="<algorithm>/<protocol>"`` and ``parts`` {latency_s,
bandwidth_s}; ``report().details["choices"]`` maps "region/axis/collective" to the choice.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from fabrics.network.nccl import collnet, tuner
from fabrics.network.nccl.cost import Estimate, Links, Placement, graph_launched, p2p
from fabrics.network.nccl.params import NcclSpec
from fabrics.network.protocol import (CollectiveCall, Completion, DemandEntry, NetworkReport, check_in_demand,
                                      schedules_by_row)


class GpuSystem:
    """What the model needs of a ``ClusterSpec`` of the gpu family: GPUs per node, rates, NVLS.

    The model reads only these attributes and ``links``; another system (a PCIe server) is another
    adapter with the same attributes (``intra_transport="pci"``, its bus rate as ``intra_Bps``)."""

    intra_transport = "nvlink"  # the hop-latency / efficiency row of the intra-node bus

    def __init__(self, cluster):
        node = cluster.node
        self.name = cluster.name
        self.nodes = cluster.nodes
        self.gpus_per_node = node.gpus
        self.accelerator = node.name
        self.intra_Bps = node.nvlink_bandwidth_Bps
        self.nvls = bool(node.nvls)
        self.ports = int(getattr(node, "nvlink_ports", 0) or 0)
        out = cluster.scale_out
        self.nic_Bps = 0.0 if out is None else out.nics_per_node * out.nic_rate_Bps
        self.nodes_per_leaf = 1 if out is None else out.nodes_per_leaf
        self.oversubscription = 1.0 if out is None else out.oversubscription
        # the scale-out switches reduce in the network (fabric.sharp: InfiniBand SHARP, CollNet)
        self.sharp = bool(getattr(cluster.options, "sharp", False))
        self.nics_per_node = 0 if out is None else out.nics_per_node

    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node

    def links(self, group: Sequence[int], active: Counter) -> tuple[Links, Placement]:
        """Rates and placement of one group; ``active``: the call's ranks per node (NIC sharing)."""
        per_node = Counter(self.node_of(r) for r in group)
        nodes = len(per_node)
        busiest = max(per_node, key=lambda k: (active[k], k))
        nic = self.nic_Bps
        if nodes > self.nodes_per_leaf:  # rail traffic leaves the leaf: the spine's oversubscription applies
            nic /= self.oversubscription
        share = per_node[busiest] / active[busiest]
        links = Links(intra_transport=self.intra_transport, intra_Bps=self.intra_Bps, inter_Bps=nic * share if nodes > 1 else 0.0,
                      gpu_nic_Bps=nic / active[busiest], nvls=self.nvls, ports=self.ports)
        return links, Placement(ranks=len(group), nodes=nodes, per_node=max(per_node.values()))


class NcclNetwork:
    """NetworkModel: NCCL-like algorithm x protocol costs for every call (see the package docstring)."""

    name = "nccl"

    def __init__(self, system: GpuSystem, spec: NcclSpec):
        self.system = system
        self.spec = spec
        self.gen = spec.generation_for(system.accelerator)
        tuner.check_forced(spec, nodes=system.nodes, nvls=system.nvls, fabric=system.name,
                           sharp=getattr(system, "sharp", False), generation=self.gen.name)
        self.sharp = collnet.sharp_for(spec, self.gen, sharp=getattr(system, "sharp", False),
                                       nics_per_node=getattr(system, "nics_per_node", 0))
        self._demand: tuple[DemandEntry, ...] = ()
        self._pending: list[Completion] = []
        self._prices: dict = {}
        self.choices: dict[tuple[str, str, str], str] = {}

    # -- protocol ---------------------------------------------------------------------------
    def prepare(self, demand: tuple[DemandEntry, ...], world: int) -> None:
        self._demand = tuple(demand)
        self._pending = []
        self.choices = {}

    def register(self, call: CollectiveCall, earliest_start_s: float) -> None:
        check_in_demand(call, self._demand)
        est = self.price(call)
        self.choices[(call.region, call.axis, call.collective)] = est.schedule
        self._pending.append(Completion(call_id=call.call_id, start_s=earliest_start_s,
                                        end_s=earliest_start_s + est.time_s, schedule=est.schedule,
                                        parts={"latency_s": est.latency_s, "bandwidth_s": est.bandwidth_s}))

    def advance(self) -> list[Completion]:
        done, self._pending = self._pending, []
        return done

    def report(self) -> NetworkReport:
        rows = schedules_by_row(self.choices)
        return NetworkReport(model=self.name, schedules=rows,
                             details={"choices": rows, "generation": self.gen.name})

    # -- pricing ----------------------------------------------------------------------------
    def price(self, call: CollectiveCall) -> Estimate:
        """The slowest group's estimate (cached per call structure and payload unless a demand matrix
        is given)."""
        if call.demand is None:
            key = (call.collective, len(call.groups), len(call.groups[0]), call.payload_bytes)
            hit = self._prices.get(key)
            if hit is not None and (hit[0] is call.groups or hit[0] == call.groups):
                return hit[1]
        active = Counter(self.system.node_of(r) for g in call.groups for r in g)
        worst: Estimate | None = None
        seen: dict = {}
        for group in call.groups:
            links, place = self.system.links(group, active)
            sig = (links, place)
            est = seen.get(sig)
            if est is None:
                est = seen[sig] = self.estimate(call.collective, group, call.payload_bytes, links, place, call.demand)
            if worst is None or est.time_s > worst.time_s:
                worst = est
        assert worst is not None
        if call.demand is None:
            self._prices[key] = (call.groups, worst)
        return worst

    def estimate(self, collective: str, group: Sequence[int], size_bytes: int, links: Links, place: Placement,
                 demand=None) -> Estimate:
        """One group's estimate for ``collective`` of ``size_bytes`` per rank (graph-launched where
        ``spec.cuda_graph``)."""
        est = self._estimate(collective, group, size_bytes, links, place, demand)
        return graph_launched(self.gen, est) if self.spec.cuda_graph else est

    def _estimate(self, collective: str, group: Sequence[int], size_bytes: int, links: Links, place: Placement,
                  demand=None) -> Estimate:
        if place.ranks <= 1 or collective == "none" or size_bytes <= 0 and demand is None:
            return Estimate("none", "none", 0.0, 0.0)
        if collective in tuner.P2P_COLLECTIVES:
            intra, inter, per_peer = self._p2p_bytes(collective, group, size_bytes, demand)
            proto = tuner.p2p_protocol(self.gen, per_peer, self.spec.protocol)
            return p2p(self.gen, links, proto, intra, inter)
        return tuner.choose(self.gen, links, place, collective, size_bytes,
                            algorithm=self.spec.algorithm, protocol=self.spec.protocol, sharp=self.sharp)

    def _p2p_bytes(self, collective: str, group: Sequence[int], size_bytes: int, demand) -> tuple[float, float, float]:
        """(intra-node bytes, inter-node bytes, bytes per peer) of the busiest rank, sending or receiving."""
        nodes = np.array([self.system.node_of(r) for r in group])
        n = len(group)
        if collective == "sendrecv":  # each rank sends its buffer to the next rank of the group
            matrix = np.zeros((n, n))
            matrix[np.arange(n), (np.arange(n) + 1) % n] = size_bytes
        elif demand is not None:
            matrix = np.asarray(demand, dtype=float)
        else:  # uniform all-to-all: sigma is each rank's whole buffer, sigma/n to every rank
            matrix = np.full((n, n), size_bytes / n)
        matrix = matrix.copy()
        np.fill_diagonal(matrix, 0.0)
        same = nodes[:, None] == nodes[None, :]
        intra = max((matrix * same).sum(axis=1).max(), (matrix * same).sum(axis=0).max())
        inter = max((matrix * ~same).sum(axis=1).max(), (matrix * ~same).sum(axis=0).max())
        peers = max(1, int((matrix > 0).sum(axis=1).max()))
        per_peer = float(matrix.sum(axis=1).max()) / peers
        return float(intra), float(inter), per_peer


def build_nccl(cluster, spec: NcclSpec, world: int) -> NcclNetwork:
    """The registry's builder (``network=nccl`` on ``fabric=nvswitch | gpu_cluster``)."""
    return NcclNetwork(GpuSystem(cluster), spec)


__all__ = ["GpuSystem", "NcclNetwork", "build_nccl"]
