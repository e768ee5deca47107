"""NCCL-like pricing on PCIe servers (``fabric=pcie`` with ``scheduler=nccl``): the PCIe NCCL baseline.

What NCCL does on a PCIe server (NVIDIA/nccl):

- between two GPUs of one node it uses **P2P** (``src/transport/p2p.cc``) when the path type is
  within ``NCCL_P2P_LEVEL`` (``src/graph/paths.cc`` ``ncclTopoCheckP2p``: default PATH_SYS, PATH_PXB
  on Intel x86 hosts, i.e. P2P only under PCIe switches) and the GPUs support P2P; otherwise **SHM**
  (``src/transport/shm.cc``): the sender writes into host memory, the receiver reads it, so the
  data crosses both GPUs' links and the root complex (across sockets: the socket interconnect);
- between nodes **NET** through the NIC nearest the GPU;
- all-reduce / all-gather / reduce-scatter run as rings (tree needs >= 2 nodes), LL or Simple
  (LL128 is enabled by default on NVLink only, ``src/graph/tuning.cc``); all-to-all and AlltoAllv
  as grouped sends/receives (pairwise peer order, ``src/enqueue.cc`` p2p schedule).

Mechanism. The bandwidth part is the flow evaluator's contention-aware completion of NCCL's own
schedule on the platform (``fabrics.pcie.evaluator``: the ring steps or the pairwise stages, each
pair on its nearest path), with every lane's bytes divided by the efficiency of its transport --
a protocol or transport that moves data at ``eff`` x the path rate occupies its path ``1/eff`` as
long, and so also delays the lanes it shares resources with (an SHM lane that crawls through the
root complex holds the root port longer). The rates therefore stay the platform's (PCIe links,
switch uplinks, NIC ports, leaf uplinks), the topology's contention stays the evaluator's, and
NCCL's tuner adds what an ideal flow model lacks: base latency + steps x hop latency per
transport, the protocol choice by least predicted time, and channels (``cost.channels_used``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from collectives.alltoallv.activations import Activation, AlltoallvSchedule, Lane
from fabrics.network.nccl.cost import Estimate, channels_used
from fabrics.network.nccl.params import P2P_LEVELS, Generation
from fabrics.network.nccl.tuner import p2p_protocol
from fabrics.pcie.evaluator import evaluate, run_stage

# PathOption.kind -> NCCL path type rank (topo.h: PATH_PIX < PATH_PXB < PATH_PHB < PATH_SYS)
_KIND_LEVEL = {"PIX": 1, "PXB": 2, "PHB": 3, "SYS": 4}
# hop latency of a step: the slowest transport it crosses sets it
_LATENCY_ORDER = ("pci", "pci_rc", "shm", "shm_sys", "net")
RING_COLLECTIVES = ("allreduce", "allgather", "reducescatter")


def lane_transport(kind: str, p2p_level: str) -> str:
    """The NCCL transport a pair uses, from its nearest path's kind and NCCL_P2P_LEVEL."""
    if kind == "NIC":
        return "net"
    if P2P_LEVELS.index(p2p_level) >= _KIND_LEVEL[kind]:
        return "pci" if kind in ("PIX", "PXB") else "pci_rc"
    return "shm_sys" if kind == "SYS" else "shm"


def nccl_path_type(path, cpus) -> str:
    """NCCL's path type of a ``PathOption``: its kind, except that two GPUs on root ports of one CPU
    (one vertex, a ``cpu``) are PATH_PHB to NCCL (the path crosses the host bridge), not PIX."""
    if path.kind == "PIX" and path.resources and path.resources[0].split(">")[-1] in cpus:
        return "PHB"
    return path.kind


def slowest(transports) -> str:
    return max(transports, key=_LATENCY_ORDER.index)


class PcieNccl:
    """NCCL-like times of collectives on a PCIe cluster's ``ChannelTopology`` and capacities."""

    def __init__(self, gen: Generation, topology, capacity: dict, *, protocol: str = "auto",
                 overhead_s: float = 0.0, p2p_level: str | None = None, cpus=()):
        self.gen, self.topology, self.capacity = gen, topology, capacity
        self.protocol, self.overhead_s = protocol, overhead_s
        self.p2p_level = gen.p2p_level if p2p_level is None else p2p_level
        self.cpus = frozenset(cpus)
        self._stage_cache: dict = {}

    def transport(self, i: int, j: int) -> str:
        return lane_transport(nccl_path_type(self.topology.nearest(i, j), self.cpus), self.p2p_level)

    def transports(self, collective: str, groups, demand=None) -> str:
        """The NCCL transports a call crosses, nearest first ("shm", "pci_rc+net"): its groups' ring
        edges (ring collectives) or the pairs it sends between (point-to-point)."""
        if collective in RING_COLLECTIVES:
            pairs = {(g[k], g[(k + 1) % len(g)]) for g in groups if len(g) > 1 for k in range(len(g))}
        elif demand is not None:
            g = groups[0]
            pairs = {(g[a], g[b]) for a, b in zip(*np.nonzero(np.asarray(demand))) if a != b}
        else:
            pairs = {(i, j) for g in groups for i in g for j in g if i != j}
        used = {self.transport(i, j) for i, j in pairs}
        return "+".join(sorted(used, key=_LATENCY_ORDER.index))

    def _lane(self, i: int, j: int, nbytes: float, row: str, proto: str, **kw) -> Lane:
        eff = self.gen.eff(self.transport(i, j), row, proto)
        return Lane(src=i, dst=j, path=self.topology.nearest(i, j), bytes=max(1, int(round(nbytes / eff))), **kw)

    def _stage_s(self, lanes: tuple, row: str, proto: str) -> float:
        key = (lanes, row, proto)
        hit = self._stage_cache.get(key)
        if hit is None:
            ls = [self._lane(i, j, b, row, proto) for i, j, b in lanes if b > 0]
            hit = self._stage_cache[key] = float(run_stage(ls, self.capacity).max()) if ls else 0.0
        return hit

    def _protocols(self) -> tuple[str, ...]:
        if self.protocol == "auto":
            return ("ll", "simple")  # tuning.cc: LL128 enabled by default only on NVLink
        return ("simple",) if self.protocol == "ll128" else (self.protocol,)

    # -- ring collectives -----------------------------------------------------------------------
    def ring(self, collective: str, stages, groups, payload_bytes: int) -> Estimate:
        """Ring all-reduce / all-gather / reduce-scatter: ``stages`` are the ring steps' (src, dst,
        bytes) lanes of all groups (one flow evaluation per distinct step); the least-time protocol."""
        group = max(groups, key=len)
        n = len(group)
        nodes = {self.topology.nodes[r] for r in group} if self.topology.nodes else {0}
        m = len(nodes)
        steps = 2 * (n - 1) if collective == "allreduce" else n - 1
        inter = (2 * (m - 1) if collective == "allreduce" else m - 1) if m > 1 else 0
        edges = [(group[k], group[(k + 1) % n]) for k in range(n)]
        intra = slowest(self.transport(i, j) for i, j in edges if self.transport(i, j) != "net") \
            if any(self.transport(i, j) != "net" for i, j in edges) else "pci"
        best = None
        for proto in self._protocols():
            latency = (self.gen.base("ring", proto) + (steps - inter) * self.gen.hop(intra, "ring", proto)
                       + inter * self.gen.hop("net", "ring", proto))
            share = channels_used(self.gen, "ring", proto, n, int(payload_bytes)) / self.gen.channel_count("ring")
            bw = sum(self.overhead_s + self._stage_s(lanes, "ring", proto) for lanes in stages) / share
            est = Estimate("ring", proto, latency, bw)
            if best is None or est.time_s < best.time_s:
                best = est
        assert best is not None
        return best

    # -- point-to-point (all-to-all, AlltoAllv) -------------------------------------------------
    def p2p_protocol(self, demand: np.ndarray) -> str:
        d = np.asarray(demand)
        peers = max(1, int((d > 0).sum(axis=1).max()))
        return p2p_protocol(self.gen, float(d.sum(axis=1).max()) / peers, self.protocol)

    def pairwise(self, schedule: AlltoallvSchedule) -> Estimate:
        """A static pairwise AlltoAllv schedule (the nccl baseline's): the flow evaluator's completion
        of its stages with every lane at its transport's efficiency, plus one p2p latency of the
        slowest transport used (NCCL posts all sends/receives of a group call at once)."""
        proto = self.p2p_protocol(schedule.demand)
        acts = tuple(Activation(lanes=tuple(self._lane(l.src, l.dst, l.bytes, "p2p", proto) for l in a.lanes
                                            if l.bytes > 0)) for a in schedule.activations)
        ev = evaluate(replace(schedule, activations=acts), self.capacity, self.overhead_s)
        used = {self.transport(l.src, l.dst) for a in schedule.activations for l in a.lanes if l.bytes > 0}
        if not used:
            return Estimate("p2p", proto, 0.0, 0.0)
        latency = self.gen.base("p2p", proto) + self.gen.hop(slowest(used), "p2p", proto)
        return Estimate("p2p", proto, latency, ev.completion_s)


__all__ = ["PcieNccl", "lane_transport", "nccl_path_type", "slowest", "RING_COLLECTIVES"]
