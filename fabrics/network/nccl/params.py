"""The parameters of the NCCL-like model as typed, frozen data (parsed from conf/network/nccl.yaml).

The structure follows NCCL's own tuner (``src/graph/tuning.cc``): per algorithm and protocol a
**base latency** (``baseLatencies``), per *transport* -- the kind of hop a step crosses -- a
**per-hop latency** (``hwLatencies`` rows NVLINK / PCI / NET) and a **bandwidth efficiency** (the
share of the transport's rate the algorithm/protocol reaches with all its channels; NCCL's
``llMaxBw``, ``* .92`` and ``nvlsEfficiency`` refinements), plus **channels** per algorithm and the
protocol's thread count and per-thread threshold that decide how many channels a small message
uses (``enqueue.cc``: ``while (nBytes < nc * nt * threadThreshold) nc--``).

Transports are rows keyed by name (``nvlink``, ``net``; a PCIe bus is one more row, ``pci``, with
the same per-algorithm tables), so a new interconnect is data, not code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from collectives.errors import SpecError

ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain")
PROTOCOLS = ("ll", "ll128", "simple")
# Point-to-point (all-to-all, AlltoAllv, send/recv) is priced with its own row ``p2p``: NCCL runs
# them as grouped sends/receives outside the collective tuner.
ROWS = ("ring", "tree", "nvls", "nvls_tree", "p2p")
# PCIe servers (fabrics.network.nccl.pcie): ``pci`` = P2P between GPUs under one PCIe switch (NCCL
# PATH_PIX / PATH_PXB, tuning.cc hwLat row PCI); ``pci_rc`` = P2P through the CPU root complex
# (PATH_PHB / PATH_SYS, only where NCCL_P2P_LEVEL allows it); ``shm`` = NCCL's SHM transport
# through host memory on one socket; ``shm_sys`` = SHM across the sockets' interconnect.
TRANSPORTS = ("nvlink", "pci", "pci_rc", "shm", "shm_sys", "net")
# NCCL_P2P_LEVEL values, nearest first (paths.cc ncclTopoCheckP2p: P2P when path type <= level).
P2P_LEVELS = ("none", "pix", "pxb", "phb", "sys")
# NCCL runs NVLS and NVLS-tree with the Simple protocol only (tuning.cc: `p != NCCL_PROTO_SIMPLE`).
SIMPLE_ONLY = ("nvls", "nvls_tree")
# How an NCCL release spreads an NVLS all-reduce over its channels (enqueue.cc, per release):
# "loop" (<= 2.18): loops of channels x heads x chunk, channel c taking the c-th heads x chunk of each loop,
# so a small message runs on the first channel(s) only; "even" (>= 2.19): the count split evenly over
# the channels, each share rounded up to an alignment (4 KiB in 2.19-2.21, 16 KiB cells from 2.22).
NVLS_PARTITIONS = ("loop", "even")


def _check_number(where: str, value, low: float, high: float | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise SpecError(f"{where}={value!r} must be a number")
    if value < low or (high is not None and value > high):
        rule = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise SpecError(f"{where}={value!r} must be {rule}")


def _check_table(where: str, table: Mapping[str, Mapping[str, float]], low: float, high: float | None) -> None:
    for row, per_proto in table.items():
        if row not in ROWS:
            raise SpecError(f"{where}.{row} is not an algorithm row; use one of: {', '.join(ROWS)}")
        for proto, value in per_proto.items():
            if proto not in PROTOCOLS:
                raise SpecError(f"{where}.{row}.{proto} is not a protocol; use one of: {', '.join(PROTOCOLS)}")
            if row in SIMPLE_ONLY and proto != "simple":
                raise SpecError(f"{where}.{row}.{proto}: {row} runs the simple protocol only")
            _check_number(f"{where}.{row}.{proto}", value, low, high)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolShape:
    """How a protocol fills channels: NCCL's max threads per channel and bytes per thread."""

    threads: int  # device.h: NCCL_LL_MAX_NTHREADS 512, NCCL_LL128_MAX_NTHREADS 640, NCCL_SIMPLE_MAX_NTHREADS 512
    thread_threshold_bytes: int  # comm.h: NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD 8, 8, 64

    def __post_init__(self) -> None:
        for name in ("threads", "thread_threshold_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(f"network.generations.*.protocols.*.{name}={value!r} must be a whole number >= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclVersion:
    """What one NCCL release does differently that the model prices (conf/network/nccl.yaml ``versions``,
    each value with its NCCL source file and release in a comment)."""

    name: str = "default"
    nvls_partition: str = "even"  # one of NVLS_PARTITIONS
    nvls_align_bytes: int = 4096  # "even": a channel's share is rounded up to this many bytes

    def __post_init__(self) -> None:
        where = f"network.versions.{self.name}"
        if self.nvls_partition not in NVLS_PARTITIONS:
            raise SpecError(f"{where}.nvls_partition={self.nvls_partition!r} is unknown; choose one of: "
                            f"{', '.join(NVLS_PARTITIONS)}")
        value = self.nvls_align_bytes
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"{where}.nvls_align_bytes={value!r} must be a whole number of bytes >= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class TuningTable:
    """NCCL's own tuner table for one generation at one release (``src/graph/tuning.cc``): what NCCL
    *predicts* and chooses by, not what the hardware takes (the fitted tables price the time)."""

    link_GBps: float  # NCCL's NVLink bandwidth per link (src/graph/topo.h SM90_NVLINK_BW 20.6, SM100 40.1)
    ll_max_GBps: float  # llMaxBws[compCap][one node]
    ring_ll128_per_channel_GBps: float  # perChMaxRingLL128Bws[compCap][one node]
    nvls_efficiency: float  # nvlsEfficiency[compCap]
    base_latency_us: Mapping[str, Mapping[str, float]]  # baseLatencies: ring / nvls -> protocol -> us
    hop_latency_us: Mapping[str, Mapping[str, float]]  # hwLatencies[NVLINK]: ring / nvls -> protocol -> us

    def __post_init__(self) -> None:
        for name in ("link_GBps", "ll_max_GBps", "ring_ll128_per_channel_GBps"):
            _check_number(f"network.generations.*.tuning.{name}", getattr(self, name), 1e-9)
        _check_number("network.generations.*.tuning.nvls_efficiency", self.nvls_efficiency, 0.0, 1.0)
        for where, table in (("base_latency", self.base_latency_us), ("hop_latency", self.hop_latency_us)):
            for row in ("ring", "nvls"):
                if row not in table:
                    raise SpecError(f"network.generations.*.tuning.{where}.{row} is missing (tuning.cc)")
            _check_table(f"network.generations.*.tuning.{where}", table, 0.0, 1e3)


@dataclass(frozen=True, slots=True, kw_only=True)
class Generation:
    """One system generation's parameters (e.g. Hopper HGX NVSwitch, Blackwell NVL72)."""

    name: str
    accelerators: tuple[str, ...]  # accelerator names (conf/accelerator/<name>.yaml) this generation covers
    channels: Mapping[str, int]  # row -> channels used at full size (NVLS: fixed, nvls.cc NVLS_NCHANNELS_*)
    protocols: Mapping[str, ProtocolShape]
    base_latency_s: Mapping[str, Mapping[str, float]]  # row -> protocol -> s (tuning.cc baseLatencies)
    hop_latency_s: Mapping[str, Mapping[str, Mapping[str, float]]]  # transport -> row -> protocol -> s
    efficiency: Mapping[str, Mapping[str, Mapping[str, float]]]  # transport -> row -> protocol -> share of rate
    nvls_chunk_bytes: int = 131072  # nvls.cc: NCCL_NVLS_CHUNKSIZE default 128 KiB per channel
    # chunks per channel an NVLS all-reduce moves before its reduce and broadcast halves overlap
    # (the pipeline's fill, see cost.nvls_bytes); fitted
    nvls_overlap_chunks: float = 1.0
    # one NVLS channel's (one SM's) rate through its scatter / multimem reduce / gather pipeline: the
    # busiest channel's bytes (cost.nvls_channel_bytes, set by the release's partition) over this rate
    # bound the time of a small or unevenly spread message; fitted (0: no per-channel bound)
    nvls_channel_Bps: float = 0.0
    # NVLS latency per GPU of the domain: the one-node NVLS kernel's scatter and gather walk the heads
    # (one per GPU) one after another (src/device/all_reduce.h + prims_simple.h ScatterGatherOp, v2.28.7-1);
    # fitted where the set has NVLS latency rows at several GPU counts
    nvls_rank_latency_s: float = 0.0
    # the per-collective launch cost a CUDA graph removes (the calibration tables run graph off, nccl-tests
    # without -G; NVIDIA/nccl #1259 gives a small all-reduce with graphs); fitted where the set has a row
    cuda_graph_saving_s: float = 0.0
    version: NcclVersion = field(default_factory=NcclVersion)  # the NCCL release priced (NcclSpec.nccl_version)
    # NCCL's own tuner table per release (the algorithm/protocol CHOICE inside one node); a release
    # without one chooses by least fitted time
    tuning: Mapping[str, TuningTable] = field(default_factory=dict)
    p2p_ll_threshold_bytes: int = 16384  # enqueue.cc: NCCL_P2P_LL_THRESHOLD (LL below, Simple above)
    ring_ll_threshold_per_rank: bool = True  # tuning.cc: ring LL thread threshold *= nRanks
    # PCIe servers only: the farthest path P2P is used on (NCCL_P2P_LEVEL); beyond it NCCL uses SHM.
    # paths.cc: default PATH_SYS, PATH_PXB on Intel x86 (and ARM, Zhaoxin) CPUs.
    p2p_level: str = "sys"
    fitted: tuple[str, ...] = field(default=(), compare=False)  # parameter paths set by pipelines.fit_nccl

    def __post_init__(self) -> None:
        where = f"network.generations.{self.name}"
        if not self.accelerators:
            raise SpecError(f"{where}.accelerators is empty; list the accelerators (e.g. [h100, h200])")
        for row, n in self.channels.items():
            if row not in ROWS:
                raise SpecError(f"{where}.channels.{row} is not an algorithm row; use one of: {', '.join(ROWS)}")
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise SpecError(f"{where}.channels.{row}={n!r} must be a whole number >= 1")
        for proto in PROTOCOLS:
            if proto not in self.protocols:
                raise SpecError(f"{where}.protocols.{proto} is missing (threads, thread_threshold_bytes)")
        _check_table(f"{where}.base_latency", self.base_latency_s, 0.0, 1e-3)
        for table_name, table, low, high in (("hop_latency", self.hop_latency_s, 0.0, 1e-3),
                                             ("efficiency", self.efficiency, 0.0, 1.0)):
            for transport, rows in table.items():
                if transport not in TRANSPORTS:
                    raise SpecError(f"{where}.{table_name}.{transport} is not a transport; use one of: "
                                    f"{', '.join(TRANSPORTS)}")
                _check_table(f"{where}.{table_name}.{transport}", rows, low, high)
        if self.p2p_level not in P2P_LEVELS:
            raise SpecError(f"{where}.p2p_level={self.p2p_level!r} is unknown; choose one of: {', '.join(P2P_LEVELS)}")
        _check_number(f"{where}.nvls_overlap_chunks", self.nvls_overlap_chunks, 0.0, 64.0)
        _check_number(f"{where}.nvls_channel_Bps", self.nvls_channel_Bps, 0.0)
        _check_number(f"{where}.nvls_rank_latency_s", self.nvls_rank_latency_s, 0.0, 1e-3)
        _check_number(f"{where}.cuda_graph_saving_s", self.cuda_graph_saving_s, 0.0, 1e-3)
        for name in ("nvls_chunk_bytes", "p2p_ll_threshold_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(f"{where}.{name}={value!r} must be a whole number of bytes >= 1")

    # -- lookups (one line when a row is missing) ---------------------------------------------
    def base(self, row: str, proto: str) -> float:
        return _lookup(self.base_latency_s, (row, proto), f"network.generations.{self.name}.base_latency")

    def hop(self, transport: str, row: str, proto: str) -> float:
        return _lookup(self.hop_latency_s, (transport, row, proto), f"network.generations.{self.name}.hop_latency")

    def eff(self, transport: str, row: str, proto: str) -> float:
        return _lookup(self.efficiency, (transport, row, proto), f"network.generations.{self.name}.efficiency")

    def has(self, transport: str, row: str, proto: str) -> bool:
        return proto in self.efficiency.get(transport, {}).get(row, {}) and \
            proto in self.hop_latency_s.get(transport, {}).get(row, {})

    def channel_count(self, row: str) -> int:
        return _lookup(self.channels, (row,), f"network.generations.{self.name}.channels")


def _lookup(table, path: tuple[str, ...], where: str):
    node = table
    try:
        for key in path:
            node = node[key]
        return node
    except KeyError:
        node = table
        for i, key in enumerate(path):
            if key not in node:
                raise SpecError(f"{where}.{'.'.join(path[:i + 1])} is missing from conf/network/nccl.yaml; "
                                "add it or choose another algorithm/protocol") from None
            node = node[key]
        raise


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclSpec:
    """``network=nccl``: the forced choice (NCCL_ALGO / NCCL_PROTO) and the generations' parameters."""

    algorithm: str = "auto"  # auto | one of ALGORITHMS
    protocol: str = "auto"  # auto | one of PROTOCOLS
    generations: tuple[Generation, ...] = ()  # each carries the NcclVersion named by nccl_version
    nccl_version: str = "default"  # the NCCL release priced (network.nccl_version), a key of versions
    versions: Mapping[str, NcclVersion] = field(default_factory=dict)
    # collectives launched inside a CUDA graph (network.cuda_graph; pipelines resolves auto from the engine)
    cuda_graph: bool = False
    # CollNet / SHARP constants per generation (fabrics.network.nccl.collnet.CollNetParams; used on
    # fabric=gpu_cluster with fabric.sharp=true)
    collnet: tuple = ()

    def __post_init__(self) -> None:
        if self.algorithm != "auto" and self.algorithm not in ALGORITHMS:
            raise SpecError(f"network.algorithm={self.algorithm!r} is unknown; choose auto or one of: "
                            f"{', '.join(ALGORITHMS)}")
        if self.protocol != "auto" and self.protocol not in PROTOCOLS:
            raise SpecError(f"network.protocol={self.protocol!r} is unknown; choose auto or one of: "
                            f"{', '.join(PROTOCOLS)}")
        if self.algorithm in SIMPLE_ONLY and self.protocol not in ("auto", "simple"):
            raise SpecError(f"network.algorithm={self.algorithm} runs the simple protocol only, not "
                            f"network.protocol={self.protocol}; use network.protocol=simple or auto")
        if not self.generations:
            raise SpecError("network.generations is empty; conf/network/nccl.yaml must list at least one")
        if not isinstance(self.cuda_graph, bool):
            raise SpecError(f"network.cuda_graph={self.cuda_graph!r} must be true or false (or auto in the config)")
        if self.versions and self.nccl_version not in self.versions:
            raise SpecError(f"network.nccl_version={self.nccl_version!r} is not a known NCCL release; choose one of: "
                            f"{', '.join(self.versions)} (conf/network/nccl.yaml versions)")
        seen: dict[str, str] = {}
        for gen in self.generations:
            for acc in gen.accelerators:
                if acc in seen:
                    raise SpecError(f"accelerator {acc} is listed by two generations ({seen[acc]}, {gen.name}) "
                                    "in network.generations; list it once")
                seen[acc] = gen.name

    def generation_for(self, accelerator: str) -> Generation:
        """The generation whose ``accelerators`` list names ``accelerator`` (one line when none does)."""
        for gen in self.generations:
            if accelerator in gen.accelerators:
                return gen
        known = ", ".join(a for g in self.generations for a in g.accelerators)
        raise SpecError(f"network=nccl has no parameters for accelerator {accelerator}; known: {known} "
                        "(add it to a generation's accelerators in conf/network/nccl.yaml)")


__all__ = ["ALGORITHMS", "PROTOCOLS", "ROWS", "TRANSPORTS", "P2P_LEVELS", "SIMPLE_ONLY", "NVLS_PARTITIONS", "ProtocolShape",
           "NcclVersion", "TuningTable", "Generation", "NcclSpec"]
