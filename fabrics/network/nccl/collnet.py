"""CollNet: NCCL's algorithms over switches that reduce in the network (InfiniBand SHARP).

On a multi-node GPU cluster whose leaf/spine switches reduce (``fabric.sharp: true``; Quantum-2
/ Quantum-X800 with SHARP and NCCL's CollNet plugin), NCCL 2.30.7 enables three more all-reduce
algorithms (``src/graph/tuning.cc`` ``ncclTopoTuneModel``; ``src/enqueue.cc``
``updateCollCostTable``):

- **collnet_direct** (``src/device/all_reduce.h`` RunWorkColl<..., COLLNET_DIRECT, SIMPLE>):
  inside each node a direct reduce-scatter to ``h`` heads (the GPUs with a NIC,
  ``src/graph/connect.cc`` connectCollNet), each head's shard reduced by the switches across the
  nodes (one network round trip), then a direct broadcast back. The nodes' NICs carry S once per
  direction -- not 2(n-1)/n S as a ring does -- so the network is not the all-reduce's bus.
- **collnet_chain** (RunWorkColl<..., COLLNET_CHAIN, SIMPLE>): a chain through the node's GPUs up
  to its head, the switches' reduction, and the chain back down.
- **nvls** across nodes (NVLS + CollNet, ``tuning.cc``: NVLS on more than one node needs
  CollNet): the NVSwitch reduces inside the node, each GPU's reduced shard goes through its NIC
  to the switches' reduction and back, and the NVSwitch multicasts it.

All three run the Simple protocol only (tuning.cc: ``busBw = 0`` for CollNet LL / LL128; NVLS is
Simple). All-gather and reduce-scatter run on collnet_direct and nvls across nodes only with one
NIC per GPU (``localRanks <= nHeads``) and a plugin that has ``iallgather`` / ``ireducescatter``
(``CollNetParams.allgather_reducescatter``). NCCL disables CollNet for more than 8 local ranks
(``NCCL_MAX_DIRECT_ARITY + 1``, enqueue.cc) and CollNet Direct without NVSwitches.

The constants (``CollNetParams``) are NCCL's (conf/network/nccl.yaml ``collnet``); no
measurement in the calibration set exercises CollNet, so they are **uncalibrated**. The bytes
each GPU's NVLink and each node's NICs carry are this model's own, as in ``cost``; the rates and
their efficiencies on NVLink are the generation's ring / NVLS ones times NCCL's CollNet factors.
A CollNet call is priced at all its channels, as NCCL's time model does (``tuning.cc``
``ncclTopoGetAlgoTime``: latency + bytes / bandwidth); enqueue.cc trims CollNet channels for small
messages only after the choice (512 B per thread, x nHeads), which is not a slowdown NCCL predicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Mapping

from collectives.errors import SpecError
from fabrics.network.nccl import cost
from fabrics.network.nccl.cost import Estimate, Links, Placement
from fabrics.network.nccl.params import Generation

ROWS = ("collnet_direct", "collnet_chain", "nvls")  # nvls: NVLS + CollNet across nodes
COLLNET = ("collnet_direct", "collnet_chain")
# NCCL's loop order (nccl.h: Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree); ties keep the first
NCCL_ORDER = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree")
PASS_THROUGH = ("allreduce", "allgather", "reducescatter")


def _positive(where: str, value, *, whole: bool = False, low: float = 0.0, high: float | None = None) -> None:
    ok = not isinstance(value, bool) and isinstance(value, int if whole else (int, float)) and value == value
    if not ok or value < low or (high is not None and value > high):
        rule = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise SpecError(f"{where}={value!r} must be {'a whole number' if whole else 'a number'} {rule}")


@dataclass(frozen=True, slots=True, kw_only=True)
class CollNetParams:
    """One generation's CollNet constants (conf/network/nccl.yaml ``collnet.<generation>``)."""

    generation: str  # the generation (network.generations.<name>) these constants belong to
    max_local_ranks: int  # enqueue.cc: CollNet needs <= NCCL_MAX_DIRECT_ARITY + 1 GPUs per node
    base_latency_s: Mapping[str, float]  # row -> s (tuning.cc baseLatencies)
    intra_hop_latency_s: Mapping[str, float]  # collnet row -> s (hwLatencies NVLINK)
    net_hop_latency_s: Mapping[str, float]  # row -> s (hwLatencies NET)
    arity_latency_s: float  # tuning.cc: 0.4 us arity serialization per local rank (CollNet Direct)
    nvlink_factor: Mapping[str, float]  # collnet row -> share of the ring Simple NVLink efficiency
    net_efficiency: Mapping[str, float]  # row -> share of the NICs' rate
    allgather_reducescatter: bool = True  # the CollNet plugin has iallgather / ireducescatter

    def __post_init__(self) -> None:
        where = f"network.collnet.{self.generation}"
        _positive(f"{where}.max_local_ranks", self.max_local_ranks, whole=True, low=1)
        _positive(f"{where}.arity_latency", self.arity_latency_s, high=1e-3)
        for name, rows, high in (("base_latency", ROWS, 1e-3), ("intra_hop_latency", COLLNET, 1e-3),
                                 ("net_hop_latency", ROWS, 1e-3), ("nvlink_factor", COLLNET, 1.0),
                                 ("net_efficiency", ROWS, 1.0)):
            table = getattr(self, name if name.endswith(("factor", "efficiency")) else name + "_s")
            for row in rows:
                if row not in table:
                    raise SpecError(f"{where}.{name}.{row} is missing (see conf/network/nccl.yaml collnet)")
            for row, value in table.items():
                if row not in rows:
                    raise SpecError(f"{where}.{name}.{row} is not a CollNet row; use one of: {', '.join(rows)}")
                _positive(f"{where}.{name}.{row}", value, high=high)
        if not isinstance(self.allgather_reducescatter, bool):
            raise SpecError(f"{where}.allgather_reducescatter={self.allgather_reducescatter!r} must be true or false")


@dataclass(frozen=True, slots=True)
class Sharp:
    """What the tuner needs of a SHARP fabric: the generation's CollNet constants and the NICs per node."""

    params: CollNetParams
    nics_per_node: int

    def heads(self, per_node: int) -> int:
        """GPUs of a node that lead a CollNet Direct shard: one per NIC (connect.cc connectCollNet)."""
        return max(1, min(per_node, self.nics_per_node))


def params_for(collnet: tuple, generation: str) -> CollNetParams | None:
    return next((p for p in collnet if p.generation == generation), None)


def sharp_for(spec, gen: Generation, *, sharp: bool, nics_per_node: int) -> Sharp | None:
    """The CollNet context of a fabric: None unless its switches reduce and ``gen`` has constants."""
    params = params_for(getattr(spec, "collnet", ()), gen.name)
    if not sharp or params is None:
        return None
    return Sharp(params=params, nics_per_node=nics_per_node)


def check_forced(algorithm: str, *, nodes: int, sharp: bool, has_params: bool, fabric: str, generation: str) -> None:
    """One line when a forced collnet_* cannot run: no SHARP switches, one node, or no constants."""
    if not sharp:
        raise SpecError(f"network.algorithm={algorithm} needs switches that reduce in the network (CollNet/SHARP) "
                        f"but fabric={fabric} has none; set fabric.sharp=true on fabric=gpu_cluster "
                        "(InfiniBand SHARP), or use ring, tree, nvls_tree or auto")
    if nodes < 2:
        raise SpecError(f"network.algorithm={algorithm} runs between nodes but fabric={fabric} is one node; "
                        "use ring, nvls or auto (or fabric.nodes >= 2)")
    if not has_params:
        raise SpecError(f"network.algorithm={algorithm}: generation {generation} has no CollNet constants; "
                        f"add network.collnet.{generation} to conf/network/nccl.yaml or use auto")


# -- which algorithms a SHARP fabric adds ----------------------------------------------------------

def rows(sharp: Sharp | None, links: Links, place: Placement, collective: str) -> list[str]:
    """CollNet rows NCCL enables for this call (tuning.cc / enqueue.cc enable rules)."""
    p, m = place.per_node, place.nodes
    if sharp is None or m < 2 or collective not in PASS_THROUGH:
        return []
    nvls = links.nvls and p > 1
    if collective == "allreduce":
        out = list(COLLNET) if p <= sharp.params.max_local_ranks else []
        return out + (["nvls"] if nvls else [])
    # all-gather / reduce-scatter: one NIC per GPU and the plugin's iallgather / ireducescatter
    if not sharp.params.allgather_reducescatter or sharp.heads(p) < p:
        return []
    out = ["collnet_direct"] if p <= sharp.params.max_local_ranks else []
    return out + (["nvls"] if nvls else [])


def with_sharp(pairs: list[tuple[str, str]], sharp: Sharp | None, links: Links, place: Placement,
               collective: str) -> list[tuple[str, str]]:
    """``pairs`` (the tuner's candidates) plus the SHARP rows, in NCCL's loop order."""
    extra = [(row, "simple") for row in rows(sharp, links, place, collective) if (row, "simple") not in pairs]
    if not extra:
        return pairs
    return sorted(pairs + extra, key=lambda rp: NCCL_ORDER.index(rp[0]))


def cost_of(row: str, place: Placement, sharp: Sharp | None):
    """The cost function of ``row`` for this call: a SHARP one across nodes, else ``cost``'s."""
    if sharp is not None and place.nodes > 1 and row in ROWS:
        return partial(SHARP_COSTS[row], sharp)
    return cost.COLLECTIVE_ALGORITHMS[row]


# -- costs ---------------------------------------------------------------------------------------

def _inter_latency(sharp: Sharp, gen: Generation, row: str, per_node: int) -> float:
    """tuning.cc: interLat = hwLat[NET][a][Simple]; with one GPU per node the Tree's NET latency."""
    if per_node == 1:
        return gen.hop("net", "tree", "simple")
    return sharp.params.net_hop_latency_s[row]


def _nvlink_Bps(sharp: Sharp, gen: Generation, links: Links, row: str) -> float:
    """NVLink rate of a CollNet row: the ring Simple efficiency times NCCL's CollNet factor
    (tuning.cc: CollNet busBw = nChannels x bwIntra, Direct x .85 on compute capability >= 9.0)."""
    return links.intra_Bps * gen.eff(links.intra_transport, "ring", "simple") * sharp.params.nvlink_factor[row]


def _net_s(sharp: Sharp, row: str, links: Links, node_bytes: float) -> float:
    """A node's NICs carry ``node_bytes`` per direction through the reducing switches."""
    return node_bytes / (links.inter_Bps * sharp.params.net_efficiency[row])


def collnet_direct(sharp: Sharp, gen: Generation, links: Links, place: Placement, collective: str, protocol: str,
                   size_bytes: int) -> Estimate:
    """CollNet Direct. Latency (tuning.cc): 2 (min(1, p-1) hwLat[NVLINK] + (p-1) x 0.4 us) + interLat.
    All-reduce: a head's busier NVLink direction carries (p + h - 2) S / h (scatter to the h heads,
    broadcast of its shard); each node's NICs S per direction. All-gather / reduce-scatter (one head
    per GPU): (p-1)/p S on NVLink, S through the node's NICs."""
    p, prm = place.per_node, sharp.params
    h = sharp.heads(p)
    latency = (prm.base_latency_s["collnet_direct"] + _inter_latency(sharp, gen, "collnet_direct", p)
               + 2 * (min(1, p - 1) * prm.intra_hop_latency_s["collnet_direct"] + (p - 1) * prm.arity_latency_s))
    nvlink = (p + h - 2) * size_bytes / h if collective == "allreduce" else (p - 1) * size_bytes / p
    bw_s = _net_s(sharp, "collnet_direct", links, size_bytes)
    if p > 1:
        bw_s = max(bw_s, nvlink / _nvlink_Bps(sharp, gen, links, "collnet_direct"))
    return Estimate("collnet_direct", "simple", latency, bw_s)


def collnet_chain(sharp: Sharp, gen: Generation, links: Links, place: Placement, collective: str, protocol: str,
                  size_bytes: int) -> Estimate:
    """CollNet Chain all-reduce. Latency (tuning.cc): 2 (p-1) hwLat[NVLINK] + interLat. A GPU inside
    the chain carries 2S per direction (reduce up, broadcast down; S at its ends, so S for p = 2);
    each node's NICs S per direction (the head's)."""
    p, prm = place.per_node, sharp.params
    latency = (prm.base_latency_s["collnet_chain"] + _inter_latency(sharp, gen, "collnet_chain", p)
               + 2 * (p - 1) * prm.intra_hop_latency_s["collnet_chain"])
    bw_s = _net_s(sharp, "collnet_chain", links, size_bytes)
    if p > 1:
        chain = (2.0 if p > 2 else 1.0) * size_bytes
        bw_s = max(bw_s, chain / _nvlink_Bps(sharp, gen, links, "collnet_chain"))
    return Estimate("collnet_chain", "simple", latency, bw_s)


def nvls_sharp(sharp: Sharp, gen: Generation, links: Links, place: Placement, collective: str, protocol: str,
               size_bytes: int) -> Estimate:
    """NVLS across nodes over SHARP. Latency (tuning.cc): hwLat[NVLINK][NVLS] + interLat (NET NVLS).
    NVLink: the node-local NVLS bytes (``cost.nvls_bytes``) at the NVLS efficiency; each node's NICs
    S per direction (each GPU its reduced S/p shard); the two pipelined, the busier sets the pace."""
    p = place.per_node
    fill = int(gen.nvls_overlap_chunks * gen.channel_count("nvls") * gen.nvls_chunk_bytes)
    latency = (sharp.params.base_latency_s["nvls"] + gen.hop(links.intra_transport, "nvls", "simple")
               + _inter_latency(sharp, gen, "nvls", p))
    intra = cost.nvls_bytes(collective, p, size_bytes, fill) / (
        links.intra_Bps * gen.eff(links.intra_transport, "nvls", "simple"))
    return Estimate("nvls", "simple", latency, max(intra, _net_s(sharp, "nvls", links, size_bytes)))


SHARP_COSTS = {"collnet_direct": collnet_direct, "collnet_chain": collnet_chain, "nvls": nvls_sharp}


__all__ = ["CollNetParams", "Sharp", "ROWS", "COLLNET", "NCCL_ORDER", "params_for", "sharp_for", "check_forced",
           "rows", "with_sharp", "cost_of", "collnet_direct", "collnet_chain", "nvls_sharp", "SHARP_COSTS"]
