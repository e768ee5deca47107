"""The algorithm/protocol choice: least predicted time, as NCCL's tuner picks (enqueue.cc,
``topoGetAlgoInfo``: the first (algorithm, protocol) of minimal time in NCCL's loop order), with a
forced algorithm / protocol (``network.algorithm`` / ``network.protocol`` = NCCL_ALGO / NCCL_PROTO).

A forced algorithm the fabric lacks is refused when the model is built (``check_forced``). A forced
algorithm applies to the calls it can run; a call it cannot run (an all-gather under
``algorithm=tree``, a group inside one node under ``algorithm=nvls_tree``) takes the automatic
choice, as ``NCCL_ALGO="allreduce:tree"`` leaves the other functions to the tuner.
"""

from __future__ import annotations

from collectives.errors import SpecError
from fabrics.network.nccl import collnet, cost
from fabrics.network.nccl.cost import Estimate, Links, Placement
from fabrics.network.nccl.params import PROTOCOLS, SIMPLE_ONLY, Generation, NcclSpec

# NCCL's loop order (nccl.h: Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree); ties keep the first.
ORDER = ("tree", "ring", "nvls", "nvls_tree")
P2P_COLLECTIVES = ("alltoall", "alltoallv", "sendrecv")


def check_forced(spec: NcclSpec, *, nodes: int, nvls: bool, fabric: str, sharp: bool = False,
                 generation: str = "") -> None:
    """One line when the forced algorithm cannot run on this fabric at all."""
    algo = spec.algorithm
    if algo.startswith("collnet"):  # CollNet / SHARP (collnet.py)
        collnet.check_forced(algo, nodes=nodes, sharp=sharp, fabric=fabric, generation=generation,
                             has_params=collnet.params_for(spec.collnet, generation) is not None)
    if algo in ("nvls", "nvls_tree") and not nvls:
        raise SpecError(f"network.algorithm={algo} needs NVLink SHARP (in-switch reduction) but the NVSwitches "
                        f"of fabric={fabric} have none (accelerator nvls: false); use ring or auto")
    if algo in ("tree", "nvls_tree") and nodes < 2:
        raise SpecError(f"network.algorithm={algo} runs between nodes but fabric={fabric} is one node; "
                        "use ring, nvls or auto (or fabric=gpu_cluster with nodes >= 2)")


def candidates(gen: Generation, links: Links, place: Placement, collective: str,
               sharp: collnet.Sharp | None = None) -> list[tuple[str, str]]:
    """(algorithm, protocol) pairs NCCL would consider for this call (tuning.cc's enable rules)."""
    m, n = place.nodes, place.ranks
    rows = ["ring"]
    if collective == "allreduce":
        if m > 1:
            rows += ["tree"]
            if links.nvls and place.per_node > 1:
                rows += ["nvls_tree"]
        elif links.nvls and n > 1:
            rows += ["nvls"]
    elif collective in ("allgather", "reducescatter") and links.nvls and m == 1 and n > 1:
        rows += ["nvls"]  # NCCL disables NVLS all-gather / reduce-scatter across nodes without CollNet
    transports = {links.intra_transport} if m == 1 else {links.intra_transport, "net"}
    out = []
    for row in sorted(rows, key=ORDER.index):
        for proto in (("simple",) if row in SIMPLE_ONLY else PROTOCOLS):
            if all(gen.has(t, row, proto) for t in transports if t != links.intra_transport or place.per_node > 1):
                out.append((row, proto))
    return collnet.with_sharp(out, sharp, links, place, collective)  # CollNet / NVLS over SHARP


def nccl_predicted_us(table, links: Links, place: Placement, collective: str, pair: tuple[str, str], channels: int,
                      size_bytes: int) -> float:
    """NCCL's own predicted time (us) of one pair inside one node (src/graph/tuning.cc ncclTopoTuneModel and
    ncclTopoGetAlgoTime, v2.28.7 / v2.30.7): lat + bytes / (1000 x bw), bw a bus bandwidth from the
    graph's NVLink bandwidth (links x NCCL's per-link figure) and protocol caps, over nRanks / nsteps."""
    row, proto = pair
    n = place.ranks
    total = links.ports * table.link_GBps
    nsteps = 2 * (n - 1) if collective == "allreduce" else n - 1
    if row == "nvls":
        bus = total * table.nvls_efficiency * (channels - 1) / channels
        bus *= 2.0 if collective == "allreduce" else (n - 1) / n  # "AllReduce pipelines two operations"
        algbw = bus * n / nsteps if collective == "allreduce" else bus  # AG/RS: no conversion off ring
        latency = table.hop_latency_us["nvls"]["simple"]  # latencies = intraLat
    else:
        bus = {"ll": min(table.ll_max_GBps, total * 0.5),
               "ll128": min(total * 0.92, channels * table.ring_ll128_per_channel_GBps),
               "simple": total}[proto]
        algbw = bus * n / nsteps
        latency = table.base_latency_us["ring"][proto] + nsteps * table.hop_latency_us["ring"][proto]
    return latency + size_bytes / (1000.0 * algbw)


def nccl_tuned_pair(gen: Generation, links: Links, place: Placement, collective: str, size_bytes: int,
                    pairs: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The pair NCCL's own table picks among ``pairs`` (first of least time in NCCL's order), or None where
    the model has no table for the call (another release, several nodes, a row outside ring / NVLS, PCIe)."""
    table = gen.tuning.get(gen.version.name)
    if table is None or place.nodes > 1 or links.ports < 1 or collective not in ("allreduce", "allgather",
                                                                                   "reducescatter"):
        return None
    if any(row not in ("ring", "nvls") for row, _ in pairs):
        return None
    best, best_us = None, float("inf")
    for pair in pairs:
        us = nccl_predicted_us(table, links, place, collective, pair, gen.channel_count(pair[0]), size_bytes)
        if us < best_us:
            best, best_us = pair, us
    return best


def allowed(gen: Generation, links: Links, place: Placement, collective: str, algorithm: str,
            protocol: str, sharp: collnet.Sharp | None = None) -> list[tuple[str, str]]:
    """The candidate pairs after a forced algorithm / protocol (each ignored where it leaves none)."""
    pairs = candidates(gen, links, place, collective, sharp)
    if algorithm != "auto":
        pairs = [p for p in pairs if p[0] == algorithm] or pairs
    if protocol != "auto":
        pairs = [p for p in pairs if p[1] == protocol] or pairs
    if not pairs:
        raise SpecError(f"network=nccl: no algorithm of generation {gen.name} runs {collective} on "
                        f"{place.ranks} ranks over {place.nodes} node(s); add its rows to conf/network/nccl.yaml")
    return pairs


def choose(gen: Generation, links: Links, place: Placement, collective: str, size_bytes: int, *,
           algorithm: str = "auto", protocol: str = "auto", sharp: collnet.Sharp | None = None) -> Estimate:
    """The estimate of the pair NCCL would run: chosen by NCCL's own tuner table where the generation has
    one for the release (``nccl_tuned_pair``), else by least predicted time; priced by the fitted tables."""
    pairs = allowed(gen, links, place, collective, algorithm, protocol, sharp)
    tuned = nccl_tuned_pair(gen, links, place, collective, size_bytes, pairs)
    if tuned is not None:
        pairs = [tuned]
    best: Estimate | None = None
    for row, proto in pairs:
        est = collnet.cost_of(row, place, sharp)(gen, links, place, collective, proto, size_bytes)
        if best is None or est.time_s < best.time_s:
            best = est
    assert best is not None
    return best


def p2p_protocol(gen: Generation, per_peer_bytes: float, protocol: str) -> str:
    """LL for small point-to-point messages (enqueue.cc: NCCL_P2P_LL_THRESHOLD), Simple otherwise;
    a forced protocol wins (LL128 is not used for point-to-point: Simple)."""
    if protocol in ("ll", "simple"):
        return protocol
    if protocol == "ll128":
        return "simple"
    return "ll" if per_peer_bytes <= gen.p2p_ll_threshold_bytes else "simple"


__all__ = ["ORDER", "P2P_COLLECTIVES", "check_forced", "candidates", "allowed", "nccl_predicted_us", "nccl_tuned_pair",
           "choose", "p2p_protocol"]
