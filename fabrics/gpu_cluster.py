"""Ideal (Hockney) collectives on GPU systems: NVSwitch domains joined by a rail-optimised NIC network.

The ideal model of the ``gpu`` fabric family (``fabric=nvswitch | gpu_cluster``,
``network=analytical``): no software latency, no protocol overhead, only link latency and line
rate -- the bound a real library (``network=nccl``) approaches from above.

* **Inside one NVLink domain** every GPU reaches every other through one NVSwitch hop at its
  whole NVLink bandwidth (``nvlink_ports x nvlink_rate_Bps``), which is exactly the single-level
  switched fabric of paper 003, Eq. 1: the domain is priced with
  ``fabrics.network.analytical.native_time_s`` (one-shot / two-shot all-reduce, one-shot
  all-to-all, all-gather, reduce-scatter), λ = one NVSwitch hop, L·R = the GPU's NVLinks.
* **Across domains** the GPUs of a node share its NICs (``nics_per_node x nic_rate_Bps``, one
  direction): each GPU's share is that over the node's GPUs. On a rail-optimised network the
  NICs of one rail (local GPU index) meet on one leaf, so the rail-aligned transfers of a
  hierarchical schedule cross one leaf while the nodes fit ``nodes_per_leaf``; beyond it they go
  leaf -> spine -> leaf (``spine_latency`` more, and the leaf's ``oversubscription`` divides the
  rate). A group of ``g`` GPUs on each of ``m`` nodes runs the hierarchical schedules NCCL and the
  literature use (intra-node reduce-scatter, inter-node all-reduce of the 1/g shard, intra-node
  all-gather; all-gather and reduce-scatter as their two halves), each level priced by the same
  single-level closed form and the levels pipelined (latencies add; the NVLink levels and the NIC
  level overlap, so the busier of the two counts); all-to-all is one-shot, its NVLink and NIC
  parts in parallel.

Each call is priced independently (no contention between concurrent collectives), as the
paper's analytical backend does (B.4).
"""

from __future__ import annotations

from dataclasses import dataclass

from collectives.errors import SpecError
from fabrics.network.analytical import SingleLevelParams, native_phase_bytes, native_time_s
from fabrics.network.protocol import CollectiveCall, Completion, DemandEntry, IndependentCalls, check_in_demand
from fabrics.nvswitch import NvSwitchDomain

HIERARCHICAL = "hierarchical"


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuFabricOptions:
    """Latencies of the ideal models on GPU fabrics (``fabric.hop_latency`` ...; seconds)."""

    hop_latency_s: float  # one GPU-to-GPU access through one NVSwitch hop
    nic_latency_s: float = 0.0  # one NIC-to-NIC transfer through one leaf (both NICs included)
    spine_latency_s: float = 0.0  # added when the transfer goes leaf -> spine -> leaf
    # the leaf/spine switches reduce in the network (InfiniBand SHARP): network=nccl adds CollNet
    # (fabrics/network/nccl/collnet.py); the ideal models ignore it
    sharp: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.sharp, bool):
            raise SpecError(f"fabric.sharp={self.sharp!r} must be true or false")
        for name in ("hop_latency_s", "nic_latency_s", "spine_latency_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise SpecError(f"fabric.{name.removesuffix('_s')}={value!r} s must be a non-negative time")


def nvlink_params(domain: NvSwitchDomain, options: GpuFabricOptions) -> SingleLevelParams:
    """One NVSwitch domain as the single-level fabric of Eq. 1 (λ one hop, L NVLinks of R)."""
    return SingleLevelParams(hop_latency_s=options.hop_latency_s, link_rate_Bps=domain.nvlink_rate_Bps,
                             ports=domain.nvlink_ports)


def nic_params(cluster, options: GpuFabricOptions, nodes: tuple[int, ...]) -> SingleLevelParams:
    """The scale-out network as seen by one GPU of a group spanning ``nodes``: its share of the
    node's NICs, one leaf hop, or leaf-spine-leaf (oversubscribed) when the nodes span leaves."""
    so = cluster.scale_out
    if so is None or so.nics_per_node == 0:
        raise SpecError(f"fabric={cluster.name}: a group spans nodes {list(nodes)} but the nodes have no NICs; "
                        "set fabric.nics_per_node")
    share_Bps = so.nics_per_node * so.nic_rate_Bps / cluster.node.gpus
    leaves = {n // so.nodes_per_leaf for n in nodes}
    latency_s = options.nic_latency_s
    if len(leaves) > 1:
        latency_s += options.spine_latency_s
        share_Bps /= so.oversubscription
    return SingleLevelParams(hop_latency_s=latency_s, link_rate_Bps=share_Bps, ports=1)


def group_shape(group: tuple[int, ...], gpus_per_node: int) -> tuple[tuple[int, ...], int]:
    """(the nodes a group spans, its most GPUs on one node)."""
    per_node: dict[int, int] = {}
    for rank in group:
        node = rank // gpus_per_node
        per_node[node] = per_node.get(node, 0) + 1
    return tuple(sorted(per_node)), max(per_node.values())


def _level_s(params: SingleLevelParams, collective: str, n: int, sigma_bytes: float) -> tuple[float, float]:
    """(latency, bandwidth) seconds of one level's best native schedule (Eq. 1 split in its two terms)."""
    total_s, schedule = native_time_s(params, collective, n, sigma_bytes)
    latency_s = params.hop_latency_s * len(native_phase_bytes(collective, schedule, n, 1))
    return latency_s, total_s - latency_s


def hierarchical_time_s(collective: str, sigma_bytes: float, g: int, m: int, intra: SingleLevelParams,
                        inter: SingleLevelParams) -> float:
    """g GPUs on each of m nodes (g, m >= 2): the two-level schedule's ideal time. The levels are
    pipelined in chunks (as NCCL's tree and NVLS-tree pipeline across nodes): their latencies add,
    and the busier of the two resources -- the NVLinks (both intra-node levels use them) and the
    NICs -- sets the rest."""
    if collective == "allreduce":  # RS(σ) in the node, AR(σ/g) across nodes, AG(σ) in the node
        levels = [(intra, "reducescatter", g, sigma_bytes), (inter, "allreduce", m, sigma_bytes / g),
                  (intra, "allgather", g, sigma_bytes)]
    elif collective == "allgather":  # σ = the gathered result: across nodes to σ/g, then in the node
        levels = [(inter, "allgather", m, sigma_bytes / g), (intra, "allgather", g, sigma_bytes)]
    elif collective == "reducescatter":  # in the node to σ/g, then across nodes
        levels = [(intra, "reducescatter", g, sigma_bytes), (inter, "reducescatter", m, sigma_bytes / g)]
    else:
        raise SpecError(f"collective {collective!r} has no hierarchical schedule")
    latency_s, busy_s = 0.0, {"nvlink": 0.0, "nic": 0.0}
    for level in levels:
        lat, bw = _level_s(*level)
        latency_s += lat
        busy_s["nvlink" if level[0] is intra else "nic"] += bw
    return latency_s + max(busy_s.values())


def one_shot_alltoall_s(sigma_bytes: float, g: int, m: int, intra: SingleLevelParams,
                        inter: SingleLevelParams) -> float:
    """All-to-all of σ per rank over g x m GPUs: (g-1)/n σ over NVLink while (n-g)/n σ leaves by NIC."""
    n = g * m
    t_nvlink = 0.0 if g == 1 else intra.hop_latency_s + (g - 1) / n * sigma_bytes / (intra.ports * intra.link_rate_Bps)
    t_nic = inter.hop_latency_s + (n - g) / n * sigma_bytes / (inter.ports * inter.link_rate_Bps)
    return max(t_nvlink, t_nic)


class GpuClusterAnalytical(IndependentCalls):
    """NetworkModel: ideal Hockney times on ``nvswitch`` / ``gpu_cluster`` fabrics (see module doc)."""

    def __init__(self, cluster, options: GpuFabricOptions):
        if not isinstance(cluster.node, NvSwitchDomain):
            raise SpecError(f"fabric={cluster.name} is not a GPU fabric (NVSwitch domains)")
        self.cluster = cluster
        self.options = options
        self.intra = nvlink_params(cluster.node, options)
        self._demand: tuple[DemandEntry, ...] = ()
        self._pending: list[Completion] = []
        self._prices: dict = {}
        self.schedules_used: dict[tuple[str, str, str], str] = {}

    def prepare(self, demand: tuple[DemandEntry, ...], world: int) -> None:
        if world > self.cluster.accelerators:
            raise SpecError(f"world={world} ranks do not fit fabric={self.cluster.name} "
                            f"({self.cluster.accelerators} GPUs)")
        self._demand = tuple(demand)
        self._pending = []
        self.schedules_used = {}

    def price_group(self, collective: str, group: tuple[int, ...], sigma_bytes: float) -> tuple[float, str]:
        """(time, schedule) of one group's collective of σ bytes per rank."""
        collective = "alltoall" if collective == "alltoallv" else collective
        nodes, g = group_shape(group, self.cluster.node.gpus)
        if len(group) <= 1 or collective == "none":
            return 0.0, "none"
        if len(nodes) == 1:
            return native_time_s(self.intra, collective, g, sigma_bytes)
        inter = nic_params(self.cluster, self.options, nodes)
        m = len(nodes)
        if collective == "alltoall":
            return one_shot_alltoall_s(sigma_bytes, g, m, self.intra, inter), "one_shot"
        if g == 1:
            return native_time_s(inter, collective, m, sigma_bytes)
        return hierarchical_time_s(collective, sigma_bytes, g, m, self.intra, inter), HIERARCHICAL

    def price(self, call: CollectiveCall) -> tuple[float, str]:
        """The slowest group of the call (groups are priced independently; they share no link)."""
        key = (call.collective, call.groups, call.payload_bytes)
        hit = self._prices.get(key)
        if hit is None:
            hit = max((self.price_group(call.collective, grp, call.payload_bytes) for grp in call.groups),
                      key=lambda ts: ts[0])
            self._prices[key] = hit
        return hit

    def call_price(self, call: CollectiveCall) -> tuple[float, str]:
        check_in_demand(call, self._demand)
        return self.price(call)


__all__ = ["GpuFabricOptions", "GpuClusterAnalytical", "nvlink_params", "nic_params", "group_shape",
           "hierarchical_time_s", "one_shot_alltoall_s"]
