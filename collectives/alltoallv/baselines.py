"""Baseline AlltoAllv schedulers and the Table 3 ablations (paper 000, Sections 2.2, 6 and 6.3).

- ``nccl``: NCCL-like static pairwise exchange: stage k = 1..N-1 sends i -> (i+k) mod N, whole
  pair volume, each pair on its fixed nearest path (what NCCL picks at communicator setup).
  Stages may contend; the flow-level evaluator shows it.
- ``fixed_peers`` / ``fixed_paths`` / ``fixed_both`` (the Table 3 ablations) and ``greedy_joint``
  (their unrestricted reference): contention-free channels built greedily with VarioPath's
  quantum τ, credits and volumes (Eq. 9), with the cyclic peer rotation and/or each pair's
  nearest path imposed (``ChannelAblation``). A lane whose path would share a modelled resource
  waits for a later activation.
- ``fast``: FAST-like. Intra-node traffic is sent directly; inter-node traffic is first
  rebalanced inside the source node so each GPU carries an equal share of its node's traffic to
  every other node, then the node-level demand is Birkhoff-von Neumann decomposed into node
  matchings, each carried GPU k -> GPU k of the partner node, and finally forwarded inside the
  destination node. Relayed lanes name their commodity (origin, final).
- ``deepep``: DeepEP-like. Inter-node data goes to the GPU with the source's local index on the
  destination node, which forwards it inside that node; intra-node data is sent directly.
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np
from scipy.optimize import linear_sum_assignment

from collectives.alltoallv.activations import Activation, AlltoallvSchedule, Lane
from collectives.alltoallv.channels import ChannelTopology
from collectives.alltoallv.variopath import check_demand, quantum_s


def _schedule(name, topology, demand, acts, channels, t0, **meta) -> AlltoallvSchedule:
    planning_s = time.perf_counter() - t0
    acts = tuple(a for a in acts if a.lanes)
    return AlltoallvSchedule(scheduler=name, platform=topology.name, n_ranks=topology.n_ranks, demand=demand,
                             activations=acts, channels=channels,
                             meta={"planning_s": planning_s, "planning_s_per_activation": planning_s / max(1, len(acts)), **meta})


class _BaselineScheduler:
    """Shared start of the static baselines: the topology they plan on and a checked demand."""

    name = ""

    def __init__(self, topology: ChannelTopology):
        self.topology = topology

    def _start(self, demand):
        """(planning start time, topology, ranks, validated demand)."""
        topo = self.topology
        return time.perf_counter(), topo, topo.n_ranks, check_demand(demand, topo.n_ranks)


class NcclPairwise(_BaselineScheduler):
    name = "nccl"

    def plan(self, demand) -> AlltoallvSchedule:
        t0, topo, n, demand = self._start(demand)
        acts = []
        for k in range(1, n):
            lanes = tuple(Lane(src=i, dst=(i + k) % n, path=topo.nearest(i, (i + k) % n), bytes=int(demand[i, (i + k) % n]))
                          for i in range(n) if demand[i, (i + k) % n] > 0)
            acts.append(Activation(lanes=lanes))
        return _schedule(self.name, topo, demand, acts, False, t0)


class ChannelAblation:
    """Table 3 ablations: contention-free channels with peers and/or paths restricted.

    peers = "rotation": activation k uses only the cyclic peers i -> (i + k) mod N (k = 1..N-1,
    repeated); peers = "demand": any peers, chosen by demand. paths = "dynamic": any path option;
    paths = "nearest": only the pair's preassigned nearest path. Every activation is built
    greedily: candidate (pair, path) lanes in order of the same pressure-weighted useful-rate
    credit VarioPath uses, min(D/τ, bw) (1 + β load), each taken if its endpoints and modelled
    shared resources are still free; volumes by Eq. 9 with VarioPath's τ.
    """

    def __init__(self, topology: ChannelTopology, *, peers: str, paths: str, name: str,
                 k_target_per_rank: float = 3.0, rank_pressure: float = 4.0):
        self.topology, self.peers, self.paths, self.name = topology, peers, paths, name
        self.k, self.beta = k_target_per_rank, rank_pressure

    def plan(self, demand) -> AlltoallvSchedule:
        t0 = time.perf_counter()
        topo, n = self.topology, self.topology.n_ranks
        demand = check_demand(demand, n)
        rem = demand.astype(np.int64).copy()
        tau = quantum_s(demand, topo, self.k)
        options = {k: (v if self.paths == "dynamic" else v[:1]) for k, v in topo.paths.items()}
        acts = []
        rot = 0
        while rem.any():
            if self.peers == "rotation":
                rot = rot % (n - 1) + 1
                pairs = [(i, (i + rot) % n) for i in range(n) if rem[i, (i + rot) % n] > 0]
                if not pairs:
                    continue
            else:
                pairs = [tuple(p) for p in np.argwhere(rem > 0)]
            ls, lr = rem.sum(axis=1), rem.sum(axis=0)
            top = float(max(ls.max(), lr.max()))
            cands = []
            for i, j in pairs:
                press = 1.0 + self.beta * (ls[i] + lr[j]) / (2.0 * top)
                for p in options[(i, j)]:
                    cands.append((min(rem[i, j] / tau, p.rate_Bps) * press, p.rate_Bps, i, j, p))
            cands.sort(key=lambda c: (-c[0], -c[1], c[2], c[3]))
            used: set[str] = set()
            busy_src: set[int] = set()
            busy_dst: set[int] = set()
            lanes = []
            for _, rate, i, j, p in cands:
                if i in busy_src or j in busy_dst or not used.isdisjoint(p.shared):
                    continue
                x = int(min(max(1, int(tau * rate)), rem[i, j]))
                lanes.append(Lane(src=int(i), dst=int(j), path=p, bytes=x))
                busy_src.add(i)
                busy_dst.add(j)
                used.update(p.shared)
            for lane in lanes:
                rem[lane.src, lane.dst] -= lane.bytes
            acts.append(Activation(lanes=tuple(lanes)))
        return _schedule(self.name, topo, demand, acts, True, t0, tau_s=tau)


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(int(total), parts)
    return [base + (1 if k < extra else 0) for k in range(parts)]


def birkhoff_von_neumann(s: np.ndarray) -> list[tuple[np.ndarray, int]]:
    """Decompose a nonnegative integer matrix (zero diagonal allowed) into weighted permutations.

    The matrix is first padded to equal line sums (the standard augmentation), then a perfect
    matching on the positive support is peeled off with its minimum entry until nothing is left.
    Returns (permutation, weight) with weight in the *padded* matrix; callers cap by real demand.
    """
    m = np.asarray(s, dtype=np.int64).copy()
    n = m.shape[0]
    target = int(max(m.sum(axis=1).max(), m.sum(axis=0).max()))
    # pad greedily: raise entries where both the row and the column are short
    rows, cols = target - m.sum(axis=1), target - m.sum(axis=0)
    for i in range(n):
        for j in range(n):
            add = min(rows[i], cols[j])
            if add > 0:
                m[i, j] += add
                rows[i] -= add
                cols[j] -= add
    out = []
    while m.sum() > 0:
        cost = np.where(m > 0, 0.0, 1.0)  # a perfect matching on the support exists (Birkhoff)
        r, c = linear_sum_assignment(cost)
        if cost[r, c].sum() > 0:
            break  # numerical safety: should not happen for equal line sums
        w = int(m[r, c].min())
        out.append((c.copy(), w))
        m[r, c] -= w
    return out


class FastLike(_BaselineScheduler):
    name = "fast"

    def plan(self, demand) -> AlltoallvSchedule:
        t0, topo, n, demand = self._start(demand)
        nodes = np.array(topo.nodes or (0,) * n)
        node_ids = sorted(set(nodes.tolist()))
        members = {a: [r for r in range(n) if nodes[r] == a] for a in node_ids}
        gpn = len(members[node_ids[0]])
        phase1, phase3 = [], []
        for i in range(n):
            for j in range(n):
                if i != j and nodes[i] == nodes[j] and demand[i, j] > 0:
                    phase1.append(Lane(src=i, dst=j, path=topo.nearest(i, j), bytes=int(demand[i, j])))
        # carriers[(A, B)][k] = list of [(origin, final), bytes] the k-th GPU of A carries to node B
        carriers: dict[tuple[int, int], list[list]] = {}
        server = np.zeros((len(node_ids), len(node_ids)), dtype=np.int64)
        for ai, a in enumerate(node_ids):
            for bi, b in enumerate(node_ids):
                if a == b:
                    continue
                comm = [((i, j), int(demand[i, j])) for i in members[a] for j in members[b] if demand[i, j] > 0]
                total = sum(v for _, v in comm)
                server[ai, bi] = total
                if total == 0:
                    continue
                quota = _split(total, gpn)
                loads: list[list] = [[] for _ in range(gpn)]
                # keep each origin's bytes on its own GPU first (no move), then fill other carriers
                pending = []
                for (i, j), v in comm:
                    k = members[a].index(i)
                    keep = min(v, quota[k])
                    if keep:
                        loads[k].append([(i, j), keep])
                        quota[k] -= keep
                    if v - keep:
                        pending.append([(i, j), v - keep])
                for item in pending:
                    for k in range(gpn):
                        if item[1] == 0:
                            break
                        take = min(item[1], quota[k])
                        if take:
                            loads[k].append([item[0], take])
                            quota[k] -= take
                            item[1] -= take
                for k in range(gpn):
                    for (i, j), v in loads[k]:
                        c = members[a][k]
                        if c != i:
                            phase1.append(Lane(src=i, dst=c, path=topo.nearest(i, c), bytes=v, origin=i, final=j))
                carriers[(a, b)] = loads
        acts = [Activation(lanes=tuple(phase1))]
        if len(node_ids) > 1:
            for perm, w in birkhoff_von_neumann(server):
                lanes = []
                for ai, bi in enumerate(perm):
                    a, b = node_ids[ai], node_ids[int(bi)]
                    if a == b or (a, b) not in carriers:
                        continue
                    for k in range(gpn):
                        budget = _split(w, gpn)[k]
                        src, dst = members[a][k], members[b][k]
                        queue = carriers[(a, b)][k]
                        while budget > 0 and queue:
                            (i, j), v = queue[0]
                            take = min(v, budget)
                            lanes.append(Lane(src=src, dst=dst, path=topo.nearest(src, dst), bytes=take, origin=i, final=j))
                            if dst != j:
                                phase3.append(Lane(src=dst, dst=j, path=topo.nearest(dst, j), bytes=take, origin=i, final=j))
                            budget -= take
                            queue[0][1] -= take
                            if queue[0][1] == 0:
                                queue.pop(0)
                acts.append(Activation(lanes=tuple(lanes)))
            # padding can leave real bytes beyond the peeled weights: send them in one last stage
            rest = []
            for (a, b), loads in carriers.items():
                for k, queue in enumerate(loads):
                    src, dst = members[a][k], members[b][k]
                    for (i, j), v in queue:
                        if v > 0:
                            rest.append(Lane(src=src, dst=dst, path=topo.nearest(src, dst), bytes=v, origin=i, final=j))
                            if dst != j:
                                phase3.append(Lane(src=dst, dst=j, path=topo.nearest(dst, j), bytes=v, origin=i, final=j))
            acts.append(Activation(lanes=tuple(rest)))
        acts.append(Activation(lanes=tuple(_merge(phase3))))
        return _schedule(self.name, topo, demand, acts, False, t0)


def _merge(lanes: list[Lane]) -> list[Lane]:
    """One lane per (src, dst, commodity): forwards of several chunks of one commodity combine."""
    acc: dict = defaultdict(int)
    first: dict = {}
    for l in lanes:
        key = (l.src, l.dst, l.commodity)
        acc[key] += l.bytes
        first.setdefault(key, l)
    return [Lane(src=l.src, dst=l.dst, path=l.path, bytes=acc[k], origin=l.origin, final=l.final) for k, l in first.items()]


class DeepEpLike(_BaselineScheduler):
    name = "deepep"

    def plan(self, demand) -> AlltoallvSchedule:
        t0, topo, n, demand = self._start(demand)
        nodes = np.array(topo.nodes or (0,) * n)
        local = {}
        by_node: dict[int, list[int]] = defaultdict(list)
        for r in range(n):
            local[r] = len(by_node[nodes[r]])
            by_node[nodes[r]].append(r)
        first, second = [], []
        for i in range(n):
            for j in range(n):
                v = int(demand[i, j])
                if i == j or v == 0:
                    continue
                if nodes[i] == nodes[j]:
                    first.append(Lane(src=i, dst=j, path=topo.nearest(i, j), bytes=v))
                    continue
                relay = by_node[nodes[j]][local[i]]  # same-index GPU on the destination node
                first.append(Lane(src=i, dst=relay, path=topo.nearest(i, relay), bytes=v, origin=i, final=j))
                if relay != j:
                    second.append(Lane(src=relay, dst=j, path=topo.nearest(relay, j), bytes=v, origin=i, final=j))
        return _schedule(self.name, topo, demand, [Activation(lanes=tuple(first)), Activation(lanes=tuple(second))], False, t0)
