"""Cost functions of the NCCL-like model: one algorithm x protocol for one group of one call.

Every function returns an ``Estimate`` (latency part + bandwidth part, seconds). They take:

- ``gen``: the system generation's parameters (``fabrics.network.nccl.params.Generation``);
- ``links``: the rates the group sees (``Links``: its intra-node transport and rate per GPU, the
  node's NIC share for the group, whether the switch reduces in-network);
- ``place``: where the group sits (``Placement``: ranks, nodes, ranks per node);
- ``collective``, ``protocol``, ``size_bytes`` (the per-rank buffer as nccl-tests counts it:
  all-reduce / reduce-scatter input, all-gather output).

The formulas carry over NCCL's structure (``src/graph/tuning.cc``, ``src/enqueue.cc``): latency =
base[algorithm][protocol] + steps x hop[transport][algorithm][protocol]; bandwidth = the bytes the
busiest direction of a GPU (or a node's NICs) carries over rate x efficiency x (channels used /
channels). The bytes per algorithm are this model's own (derived below from what each algorithm
moves), not NCCL's bus-bandwidth conversions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fabrics.network.nccl.params import Generation

REDUCING = ("allreduce", "reducescatter")


@dataclass(frozen=True, slots=True)
class Placement:
    """One group of a call: ``ranks`` GPUs on ``nodes`` nodes, at most ``per_node`` on one node."""

    ranks: int
    nodes: int
    per_node: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Links:
    """Rates (bytes/s, one direction) one group of a call sees."""

    intra_transport: str  # "nvlink" (one NVSwitch domain); "pci" for PCIe servers
    intra_Bps: float  # one GPU's intra-node bandwidth (NvSwitchDomain.nvlink_bandwidth_Bps)
    inter_Bps: float  # the node's NIC bandwidth share of this group (0 on one node)
    gpu_nic_Bps: float  # one GPU's share of its node's NICs (point-to-point traffic)
    nvls: bool  # the switch reduces in-network (NVLink SHARP)
    ports: int = 0  # NVLinks per GPU (NCCL's tuner counts its bandwidth per link)


@dataclass(frozen=True, slots=True)
class Estimate:
    algorithm: str
    protocol: str
    latency_s: float
    bandwidth_s: float

    @property
    def time_s(self) -> float:
        return self.latency_s + self.bandwidth_s

    @property
    def schedule(self) -> str:
        return f"{self.algorithm}/{self.protocol}"


def channels_used(gen: Generation, row: str, protocol: str, ranks: int, size_bytes: int) -> int:
    """Channels a message of ``size_bytes`` runs on (enqueue.cc): NVLS rows use all their channels;
    ring/tree drop channels while ``size < channels x threads x threshold`` (ring LL: threshold x
    ranks, tuning.cc), so a small message spreads over few channels."""
    full = gen.channel_count(row)
    if row in ("nvls", "nvls_tree"):
        return full
    shape = gen.protocols[protocol]
    threshold = shape.thread_threshold_bytes
    if row == "ring" and protocol == "ll" and gen.ring_ll_threshold_per_rank:
        threshold *= ranks
    per_channel = shape.threads * threshold
    return max(1, min(full, size_bytes // per_channel))


def _rate(gen: Generation, transport: str, row: str, protocol: str, rate_Bps: float) -> float:
    return rate_Bps * gen.eff(transport, row, protocol)


def _share(gen: Generation, row: str, protocol: str, place: Placement, size_bytes: int) -> float:
    return channels_used(gen, row, protocol, place.ranks, size_bytes) / gen.channel_count(row)


def ring(gen: Generation, links: Links, place: Placement, collective: str, protocol: str,
         size_bytes: int) -> Estimate:
    """Ring: 2(n-1) steps (all-reduce) or n-1 (all-gather, reduce-scatter), each GPU sending
    2(n-1)/n (or (n-1)/n) of the buffer to its ring neighbour; rings cross each node boundary once
    per channel, so a node's NICs carry what one GPU sends. Inter-node steps: 2(m-1) or m-1."""
    n, m = place.ranks, place.nodes
    allreduce = collective == "allreduce"
    steps = 2 * (n - 1) if allreduce else n - 1
    inter_steps = 0 if m == 1 else (2 * (m - 1) if allreduce else m - 1)
    latency = gen.base("ring", protocol) + inter_steps * gen.hop("net", "ring", protocol)
    if steps > inter_steps:
        latency += (steps - inter_steps) * gen.hop(links.intra_transport, "ring", protocol)
    traffic = (2.0 if allreduce else 1.0) * (n - 1) / n * size_bytes
    rate = math.inf
    if place.per_node > 1:
        rate = _rate(gen, links.intra_transport, "ring", protocol, links.intra_Bps)
    if m > 1:
        rate = min(rate, _rate(gen, "net", "ring", protocol, links.inter_Bps))
    rate *= _share(gen, "ring", protocol, place, size_bytes)
    return Estimate("ring", protocol, latency, traffic / rate)


def _log2_ceil(m: int) -> int:
    return max(1, math.ceil(math.log2(m)))


def _tree_inter_bytes(nodes: int, size_bytes: int) -> float:
    """A node's NICs per direction in NCCL's double binary tree: S/2 per tree up and down as an
    inner node of one tree and a leaf of the other = 2S; two nodes just swap S."""
    return float(size_bytes) if nodes == 2 else 2.0 * size_bytes


def tree(gen: Generation, links: Links, place: Placement, collective: str, protocol: str,
         size_bytes: int) -> Estimate:
    """Tree all-reduce across nodes: a chain inside each node (2S per direction per GPU: reduce
    up, broadcast down), a double binary tree between nodes; latency 2((p-1) intra + log2 m inter)
    hops (tuning.cc)."""
    p, m = place.per_node, place.nodes
    latency = gen.base("tree", protocol) + 2 * _log2_ceil(m) * gen.hop("net", "tree", protocol)
    bw_s = _tree_inter_bytes(m, size_bytes) / _rate(gen, "net", "tree", protocol, links.inter_Bps)
    if p > 1:
        latency += 2 * (p - 1) * gen.hop(links.intra_transport, "tree", protocol)
        chain = 2.0 * size_bytes / _rate(gen, links.intra_transport, "tree", protocol, links.intra_Bps)
        bw_s = max(bw_s, chain)
    return Estimate("tree", protocol, latency, bw_s / _share(gen, "tree", protocol, place, size_bytes))


def nvls_bytes(collective: str, per_node: int, size_bytes: int, fill_bytes: int) -> float:
    """Bytes on a GPU's busier NVLink direction for NVLS on ``per_node`` GPUs.

    All-reduce = a reduce-scatter by multimem loads (the switch reads every GPU's shards: S out of
    each GPU, S/n back) and an all-gather by multimem stores (S/n out, S in). Pipelined, a
    direction carries S(n+1)/n; the first chunk round (channels x NVLS chunk) cannot overlap its
    two halves, which adds (n-1)/n of it (``fill_bytes`` = overlap chunks x channels x chunk size).
    All-gather: S(n-1)/n in; reduce-scatter: S out."""
    n = per_node
    if collective == "allreduce":
        return size_bytes * (n + 1) / n + min(size_bytes, fill_bytes) * (n - 1) / n
    if collective == "allgather":
        return size_bytes * (n - 1) / n
    return float(size_bytes)


def nvls_chunk(gen: Generation, heads: int, channels: int, size_bytes: int) -> int:
    """NVLS chunk size for a message (enqueue.cc, the same rule in 2.18.5, 2.20.5 and 2.30.7): from
    NCCL_NVLS_CHUNKSIZE down to 64 / 32 / 16 KiB below 64 / 8 / 2 x channels x heads x chunk bytes."""
    chunk = gen.nvls_chunk_bytes
    ops = channels * heads
    for factor, smaller in ((64, 65536), (8, 32768), (2, 16384)):
        if size_bytes < factor * ops * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def nvls_channel_bytes(gen: Generation, heads: int, channels: int, size_bytes: int) -> int:
    """Bytes the busiest NVLS channel carries under the release's partition (params.NVLS_PARTITIONS).

    "loop" (enqueue.cc / all_reduce.h v2.18.5-1): channel ``bid`` takes ``heads x chunk`` at offset
    ``gridOffset + bid x heads x chunk`` of each loop of ``channels x heads x chunk``: channel 0 carries
    the whole of a message up to heads x chunk (128 KiB on 8 GPUs). "even" (enqueue.cc v2.20.5-1
    ``countPerChannels = DIVUP(count, nChannels)`` aligned to NCCL_SIMPLE_ALIGNMENT 4 KiB; v2.22+ in
    cells of MinTrafficPerChannel / 2 = 16 KiB for all-reduce): 1/channels of it, rounded up."""
    version = gen.version
    if version.nvls_partition == "loop":
        per_loop = heads * nvls_chunk(gen, heads, channels, size_bytes)
        loops, rest = divmod(size_bytes, channels * per_loop)
        return loops * per_loop + min(per_loop, rest)
    share = -(-size_bytes // channels)
    align = version.nvls_align_bytes
    return min(size_bytes, -(-share // align) * align)


def nvls(gen: Generation, links: Links, place: Placement, collective: str, protocol: str,
         size_bytes: int) -> Estimate:
    """NVLS (in-switch reduction) inside one NVLink domain: latency base + one NVLS hop (tuning.cc:
    latency = intraLat) + a per-GPU term (the kernel walks the n heads); bandwidth over the GPU's NVLink at the NVLS efficiency, all NVLS channels, or
    the busiest channel's bytes at one channel's rate where that is slower (all-reduce)."""
    channels = gen.channel_count("nvls")
    fill = int(gen.nvls_overlap_chunks * channels * gen.nvls_chunk_bytes)
    latency = (gen.base("nvls", "simple") + gen.hop(links.intra_transport, "nvls", "simple")
               + place.ranks * gen.nvls_rank_latency_s)
    rate = _rate(gen, links.intra_transport, "nvls", "simple", links.intra_Bps)
    bw_s = nvls_bytes(collective, place.ranks, size_bytes, fill) / rate
    if collective == "allreduce" and gen.nvls_channel_Bps > 0:
        bw_s = max(bw_s, nvls_channel_bytes(gen, place.ranks, channels, size_bytes) / gen.nvls_channel_Bps)
    return Estimate("nvls", "simple", latency, bw_s)


def nvls_tree(gen: Generation, links: Links, place: Placement, collective: str, protocol: str,
              size_bytes: int) -> Estimate:
    """NVLS inside each node, a tree of NICs between nodes (tuning.cc: intraLat + 2 log2(m) interLat);
    the node-local NVLS and the inter-node tree are pipelined, the busier one sets the pace."""
    p, m = place.per_node, place.nodes
    latency = (gen.base("nvls_tree", "simple") + gen.hop(links.intra_transport, "nvls_tree", "simple")
               + p * gen.nvls_rank_latency_s + 2 * _log2_ceil(m) * gen.hop("net", "nvls_tree", "simple"))
    inter = _tree_inter_bytes(m, size_bytes) / _rate(gen, "net", "nvls_tree", "simple", links.inter_Bps)
    intra = 0.0
    if p > 1:
        fill = int(gen.nvls_overlap_chunks * gen.channel_count("nvls_tree") * gen.nvls_chunk_bytes)
        intra = nvls_bytes("allreduce", p, size_bytes, fill) / _rate(gen, links.intra_transport, "nvls_tree",
                                                                     "simple", links.intra_Bps)
    return Estimate("nvls_tree", "simple", latency, max(inter, intra))


def p2p(gen: Generation, links: Links, protocol: str, intra_bytes: float, inter_bytes: float) -> Estimate:
    """Grouped sends/receives (all-to-all, AlltoAllv, send/recv): the busiest rank's bytes to peers
    in its node over its intra-node link and to other nodes over its NIC share, concurrently; one
    p2p hop of latency on the farthest transport used."""
    transport = "net" if inter_bytes > 0 else links.intra_transport
    latency = gen.base("p2p", protocol) + gen.hop(transport, "p2p", protocol)
    bw_s = 0.0
    if intra_bytes > 0:
        bw_s = intra_bytes / _rate(gen, links.intra_transport, "p2p", protocol, links.intra_Bps)
    if inter_bytes > 0:
        bw_s = max(bw_s, inter_bytes / _rate(gen, "net", "p2p", protocol, links.gpu_nic_Bps))
    return Estimate("p2p", protocol, latency, bw_s)


def graph_launched(gen: Generation, est: Estimate) -> Estimate:
    """``est`` launched inside a CUDA graph: the generation's launch saving off its latency (not below 0)."""
    if est.algorithm == "none" or gen.cuda_graph_saving_s <= 0:
        return est
    return Estimate(est.algorithm, est.protocol, max(0.0, est.latency_s - gen.cuda_graph_saving_s), est.bandwidth_s)


COLLECTIVE_ALGORITHMS = {"ring": ring, "tree": tree, "nvls": nvls, "nvls_tree": nvls_tree}

__all__ = ["Placement", "Links", "Estimate", "channels_used", "ring", "tree", "nvls", "nvls_tree", "p2p",
           "nvls_bytes", "nvls_chunk", "graph_launched", "nvls_channel_bytes", "COLLECTIVE_ALGORITHMS"]
