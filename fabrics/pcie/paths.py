"""Path enumeration per ordered GPU pair (paper 000, Sections 2.3 and 5, "Topology, path, and rate model").

For GPUs i (node n, switch s) and j (node m, switch t) the options are
- PCIe peer-to-peer when n == m: PIX (same switch), PXB (through switches only), PHB (through one
  CPU root complex), SYS (through two or more CPUs over the socket interconnect) - every simple
  route in the node's vertex graph (a ring of switches gives two);
- NIC paths GPU -> switch -> NIC -> network -> NIC -> switch -> GPU, also between GPUs of one
  node, through the NICs nearest to s and to t (a NIC never loops back to itself).

Each option carries its full directed footprint, the modelled shared subset U (without the two
endpoint-local GPU attachments and without the leaf-spine core) and its rate (the slowest
resource). Footprints beyond the attachments depend only on (node, switch) pairs, so the routes
are enumerated once per switch pair and reused for every GPU pair.
"""

from __future__ import annotations

import networkx as nx

from collectives.alltoallv.channels import KIND_RANK, ChannelTopology, PathOption, nearest_first
from fabrics.pcie.platform import PcieCluster, PcieServer, link_ids


def vertex_graph(server: PcieServer) -> nx.MultiGraph:
    g = nx.MultiGraph()
    g.add_nodes_from(server.vertices)
    for suffix, link in link_ids(server):
        g.add_edge(link.a, link.b, key=suffix)
    return g


def _routes(g: nx.MultiGraph, s: str, t: str) -> list[tuple[list[str], list[str]]]:
    """Every simple route s -> t as (vertex sequence, directed link ids without node prefix)."""
    if s == t:
        return [([s], [])]
    out = []
    for edge_path in nx.all_simple_edge_paths(g, s, t):
        verts, links = [s], []
        here = s
        for (u, v, key) in edge_path:
            nxt = v if u == here else u
            links.append(f"{here}>{nxt}{key}")
            verts.append(nxt)
            here = nxt
        out.append((verts, links))
    return out


def _shortest(routes):
    best = min(len(r[1]) for r in routes)
    return [r for r in routes if len(r[1]) == best]


def _p2p_kind(server: PcieServer, verts: list[str]) -> str:
    if len(verts) == 1:
        return "PIX"
    cpus = sum(1 for v in verts if server.vertices[v] == "cpu")
    return "PXB" if cpus == 0 else ("PHB" if cpus == 1 else "SYS")


def local_nics(server: PcieServer, g: nx.MultiGraph, s: str) -> list[str]:
    """The NICs nearest to vertex s (fewest PCIe hops), as NCCL's NIC affinity picks them."""
    if not server.nics:
        return []
    dist = nx.single_source_shortest_path_length(g, s)
    hops = {nic: dist.get(v, 10**9) for nic, (v, _) in server.nics.items()}
    best = min(hops.values())
    return sorted(nic for nic, h in hops.items() if h == best and h < 10**9)


def channel_topology(cluster: PcieCluster) -> ChannelTopology:
    server = cluster.server
    cap = cluster.capacities()
    g = vertex_graph(server)
    switches = sorted(set(server.gpu_vertex), key=lambda v: server.gpu_vertex.index(v))
    nics_of = {s: local_nics(server, g, s) for s in switches}
    route_cache: dict[tuple[str, str], list] = {}

    def routes(a: str, b: str):
        if (a, b) not in route_cache:
            route_cache[(a, b)] = _routes(g, a, b)
        return route_cache[(a, b)]

    def templates(n: int, s: str, m: int, t: str) -> list[tuple[str, list[str]]]:
        """(kind, middle resources) for switch s of node n -> switch t of node m."""
        out = []
        if n == m:
            for verts, links in routes(s, t):
                out.append((_p2p_kind(server, verts), [f"n{n}.{x}" for x in links]))
        for nic_a in nics_of[s]:
            va = server.nics[nic_a][0]
            for nic_b in nics_of[t]:
                if n == m and nic_a == nic_b:
                    continue  # a NIC does not hairpin to itself
                vb = server.nics[nic_b][0]
                la, lb = cluster.leaf_of(n), cluster.leaf_of(m)
                net = [f"n{n}.{nic_a}>leaf{la}"] + ([f"leaf{la}>spine", f"spine>leaf{lb}"] if la != lb else []) + [f"leaf{lb}>n{m}.{nic_b}"]
                for _, up in _shortest(routes(s, va)):
                    for _, down in _shortest(routes(vb, t)):
                        out.append(("NIC", [f"n{n}.{x}" for x in up] + [f"n{n}.{va}>{nic_a}"] + net
                                    + [f"n{m}.{nic_b}>{vb}"] + [f"n{m}.{x}" for x in down]))
        return out

    # the k-th GPU under a switch prefers that switch's (k mod #local NICs)-th NIC (as NCCL does)
    affinity = {}
    for k, v in enumerate(server.gpu_vertex):
        pos = [kk for kk, vv in enumerate(server.gpu_vertex) if vv == v].index(k)
        affinity[k] = nics_of[v][pos % len(nics_of[v])] if nics_of[v] else ""
    groups: dict[tuple[int, str], list[int]] = {}
    for n in range(cluster.nodes):
        for k, v in enumerate(server.gpu_vertex):
            groups.setdefault((n, v), []).append(cluster.rank(n, k))
    tmpl_cache: dict = {}
    paths: dict[tuple[int, int], tuple[PathOption, ...]] = {}
    for i in range(cluster.n_ranks):
        n, k = cluster.locate(i)
        s = server.gpu_vertex[k]
        for j in range(cluster.n_ranks):
            if i == j:
                continue
            m, l = cluster.locate(j)
            t = server.gpu_vertex[l]
            key = (n, s, m, t)
            if key not in tmpl_cache:
                tmpl_cache[key] = templates(n, s, m, t)
            opts = []
            for kind, middle in tmpl_cache[key]:
                full = (f"n{n}.g{k}>{s}", *middle, f"n{m}.{t}>g{l}")
                shared = tuple(r for r in middle if not (r.endswith(">spine") or r.startswith("spine>")))
                opts.append(PathOption(src=i, dst=j, kind=kind, resources=full, shared=shared,
                                       rate_Bps=min(cap[r] for r in full)))
            # NCCL-like NIC affinity: among equally near NIC paths, the source GPU's own NIC out
            # and the destination GPU's own NIC in come first (they are the "nearest path")
            out_port, in_port = f"n{n}.{affinity[k]}>leaf", f">n{m}.{affinity[l]}"

            def affine(p: PathOption) -> int:
                return (any(r.startswith(out_port) for r in p.shared)
                        + any(r.startswith("leaf") and r.endswith(in_port) for r in p.shared))

            paths[(i, j)] = tuple(sorted(nearest_first(tuple(opts)),
                                         key=lambda p: (KIND_RANK[p.kind], -p.rate_Bps, -affine(p))))
    return ChannelTopology(name=cluster.name, n_ranks=cluster.n_ranks,
                           groups=tuple(tuple(v) for v in groups.values()), paths=paths, capacity_Bps=cap,
                           nodes=tuple(cluster.locate(r)[0] for r in range(cluster.n_ranks)),
                           port_class=port_classes(cluster))


def port_classes(cluster: PcieCluster) -> dict[str, tuple[str, int]]:
    """NICs of one node on the same vertex with the same rates are interchangeable, per direction."""
    s = cluster.server
    by_vertex: dict[tuple, list[str]] = {}
    for nic, (v, rate) in s.nics.items():
        by_vertex.setdefault((v, rate), []).append(nic)
    out: dict[str, tuple[str, int]] = {}
    for n in range(cluster.nodes):
        leaf = cluster.leaf_of(n)
        for (v, rate), nics in by_vertex.items():
            for k, nic in enumerate(nics):
                out[f"n{n}.{nic}>leaf{leaf}"] = (f"n{n}.{v}@{rate}/out", k)
                out[f"leaf{leaf}>n{n}.{nic}"] = (f"n{n}.{v}@{rate}/in", k)
    return out
