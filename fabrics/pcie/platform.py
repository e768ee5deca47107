"""PCIe GPU servers and clusters as graphs of directed resources (paper 000, Sections 2-3, Table 2).

A server is data (``conf/platform/*.yaml``, turned into a ``PcieServer`` once at the config edge by
``pipelines.network.pcie_server_spec``): PCIe switches and CPU
root complexes (vertices), undirected PCIe links between them (each direction is a distinct
resource; a link listed twice is two parallel resources), GPUs and NICs hanging off vertices.
Multi-node clusters join the nodes' NICs through a two-tier leaf-spine network.

Resource ids are directed: ``n0.sw0>sw1`` (PCIe link), ``n0.g3>sw1`` (a GPU's attachment),
``n0.nic0>leaf0`` / ``leaf0>n0.nic0`` (a NIC port), ``leaf0>spine`` / ``spine>leaf1`` (leaf uplinks).

Units: every rate is in bytes/s (parsed at the config edge).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collectives.errors import SpecError

VERTEX_KINDS = ("switch", "cpu")


@dataclass(frozen=True, slots=True, kw_only=True)
class PcieLink:
    a: str
    b: str
    rate_Bps: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PcieServer:
    """One node's PCIe fabric (validated)."""

    name: str
    gpus_per_node: int
    gpu_link_Bps: float  # GPU <-> switch attachment, one way (default for every GPU)
    nic_rate_Bps: float  # NIC port, one way
    vertices: dict = field(compare=False)  # name -> "switch" | "cpu"
    gpu_vertex: tuple[str, ...]  # local GPU index -> vertex it hangs off
    nics: dict = field(compare=False)  # nic name -> (vertex, attachment link rate)
    links: tuple[PcieLink, ...]
    nodes_per_leaf: int = 8
    oversubscription: float = 1.0
    gpu_link_overrides: tuple = ()  # per-GPU attachment rates (e.g. from an NCCL dump); empty = default

    def gpu_rate(self, k: int) -> float:
        return self.gpu_link_overrides[k] if self.gpu_link_overrides else self.gpu_link_Bps

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1:
            raise SpecError(f"platform {self.name}: gpus_per_node={self.gpus_per_node} must be at least 1")
        for v, kind in self.vertices.items():
            if kind not in VERTEX_KINDS:
                raise SpecError(f"platform {self.name}: vertex {v} has kind {kind!r}; use one of {', '.join(VERTEX_KINDS)}")
        for k, v in enumerate(self.gpu_vertex):
            if v not in self.vertices:
                raise SpecError(f"platform {self.name}: GPU {k} hangs off unknown vertex {v!r}")
        for nic, (v, _) in self.nics.items():
            if v not in self.vertices:
                raise SpecError(f"platform {self.name}: NIC {nic} hangs off unknown vertex {v!r}")
        for link in self.links:
            for end in (link.a, link.b):
                if end not in self.vertices:
                    raise SpecError(f"platform {self.name}: link {link.a}-{link.b} names unknown vertex {end!r}")
        if self.nodes_per_leaf < 1:
            raise SpecError(f"platform {self.name}: network.nodes_per_leaf={self.nodes_per_leaf} must be at least 1")
        if not self.oversubscription >= 1.0:
            raise SpecError(f"platform {self.name}: network.oversubscription={self.oversubscription} must be >= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class PcieCluster:
    """``nodes`` copies of one server joined by a leaf-spine network."""

    server: PcieServer
    nodes: int

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise SpecError(f"nodes={self.nodes} must be at least 1")
        if self.nodes > 1 and not self.server.nics:
            raise SpecError(f"platform {self.server.name} has no NICs, so nodes={self.nodes} cannot talk; use nodes=1 or add nics")

    @property
    def name(self) -> str:
        return self.server.name if self.nodes == 1 else f"{self.server.name}x{self.nodes}"

    @property
    def n_ranks(self) -> int:
        return self.nodes * self.server.gpus_per_node

    def rank(self, node: int, local: int) -> int:
        return node * self.server.gpus_per_node + local

    def locate(self, rank: int) -> tuple[int, int]:
        return divmod(rank, self.server.gpus_per_node)

    def leaf_of(self, node: int) -> int:
        return node // self.server.nodes_per_leaf

    def capacities(self) -> dict[str, float]:
        """Every directed resource with its rate (bytes/s)."""
        s = self.server
        cap: dict[str, float] = {}
        for n in range(self.nodes):
            for k, v in enumerate(s.gpu_vertex):
                cap[f"n{n}.g{k}>{v}"] = s.gpu_rate(k)
                cap[f"n{n}.{v}>g{k}"] = s.gpu_rate(k)
            for nic, (v, rate) in s.nics.items():
                cap[f"n{n}.{v}>{nic}"] = rate
                cap[f"n{n}.{nic}>{v}"] = rate
                leaf = self.leaf_of(n)
                cap[f"n{n}.{nic}>leaf{leaf}"] = s.nic_rate_Bps
                cap[f"leaf{leaf}>n{n}.{nic}"] = s.nic_rate_Bps
            for link_id, link in link_ids(s):
                cap[f"n{n}.{link.a}>{link.b}{link_id}"] = link.rate_Bps
                cap[f"n{n}.{link.b}>{link.a}{link_id}"] = link.rate_Bps
        n_leaves = self.leaf_of(self.nodes - 1) + 1
        if n_leaves > 1:
            uplink = min(self.nodes, s.nodes_per_leaf) * len(s.nics) * s.nic_rate_Bps / s.oversubscription
            for leaf in range(n_leaves):
                cap[f"leaf{leaf}>spine"] = uplink
                cap[f"spine>leaf{leaf}"] = uplink
        return cap


def link_ids(server: PcieServer) -> list[tuple[str, PcieLink]]:
    """Parallel links get a ``#k`` suffix so that each is a distinct resource."""
    seen: dict[frozenset, int] = {}
    out = []
    for link in server.links:
        key = frozenset((link.a, link.b))
        k = seen.get(key, 0)
        seen[key] = k + 1
        out.append(("" if k == 0 else f"#{k}", link))
    return out
