"""VarioPath online scheduler: channel-guided demand decomposition (paper 000, Section 4.2, Algorithm 2).

Per activation:
1. aggregate the remaining demand by rank-group pair, D̂_ad = Σ_{i∈V_a, j∈V_d} D^rem_ij (Eq. 5),
   and pick the shape M* = argmax Σ D̂_ad M_ad (Eq. 6, bottleneck pressure);
2. for every family B in the bucket B[M*], bind endpoints with the multi-start Alternating
   Algorithm on the credits h_ijr = min(D^rem_ij / τ, bw(r)) (Eqs. 7-8): fix destinations and
   solve one g x g assignment per source group, then fix sources and solve one per destination
   group, until no sweep improves F_B or I_AA sweeps ran;
3. EVALUATE each candidate: x_i = min(τ bw(p_i), D^rem_{i,π(i)}) (Eq. 9), utility
   U_B = Σ x / (λ + max x_i / bw(p_i)) (Eq. 10); append the best activation and subtract it.

τ is one invocation-wide quantum derived from K_target (Section 5, "Global execution
granularity"): a lower bound of the completion (busiest rank at the fastest path rate, busiest
rank group at its best contention-free rate) divided by K_target = k * N rounds (the paper uses
N ... 3N, i.e. k in [1, 3]).

All families of one shape list their lanes in the same (source group, destination group) order,
so a bucket is bound as one batch over (families x starts) in numpy.

Ours (VarioPathParams): credits and EVALUATE weight each pair by its pressure -- the busiest
ranks' remaining load as (load / max load)^p, the heaviest pairs, and, on several nodes, the
remaining lower bound of the nodes' NIC traffic (a lane that keeps a bottleneck NIC busy weighs
more than one inside a node) -- and the shape scores (Eq. 6) may use the weighted D̂, so the
shape beam offers the AA families with lanes where the pressure is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from collectives.alltoallv.activations import Activation, AlltoallvSchedule, Lane
from collectives.alltoallv.assignment import perm_selector, batched_assignment
from collectives.alltoallv.catalog import Catalog
from collectives.alltoallv.kernel import MODULE as KERNEL_MODULE
from collectives.alltoallv.kernel import BoundKernel, Kernel, load_kernel
from collectives.alltoallv.channels import ChannelTopology
from collectives.errors import SpecError

_FORBID = -1e30  # credit of a self-pair (i == j), never chosen while a derangement exists


@dataclass(frozen=True, slots=True, kw_only=True)
class VarioPathParams:
    # Defaults = conf/scheduler/variopath.yaml (chosen on the tuning seeds of tuning.py, reported on
    # its held-apart test seeds; docs/pcie-variopath.md)
    k_target_per_rank: float = 8.0  # K_target = k * N rounds (paper: N ... 3N); the tail's granularity
    n_start: int = 10  # N_start: AA starts per family
    aa_sweeps: int = 1  # I_AA: sweeps per start
    overhead_s: float = 0.0  # λ, per-activation overhead used in EVALUATE
    seed: int = 0
    assignment: str = "auto"  # "auto" | "lsa" | "enumerate" (see assignment.py)
    rank_pressure: float = 8.0  # ours, 0 = paper: credits weighted by 1 + β (u_i + v_j) / 2, u = (load / max load)^p ...
    pair_pressure: float = 4.0  # ... + γ D_ij / max D (ours, 0 = paper)
    weighted_utility: bool = True  # ours (False = paper): Eq. 10 counts pressure-weighted bytes
    shape_beam: int = 2  # shapes bound per activation: 1 = the paper's M* only; >1 also the next-best (one batch)
    shape_score: str = "weighted"  # "paper": Eq. 6; "capped" (ours): Σ_ad min(τ x lane rates, D̂_ad); "weighted" (ours): Eq. 6 on Σ w_ij D_ij
    kernel: str = "auto"  # "auto": the compiled loop when it was built at install, else numpy; "numpy" | "c"
    coarse_rounds_per_rank: float = 1.5  # ours: >0 lets an activation last up to the remaining lower bound / (c N) (0 = paper: τ fixed)
    reuse: int = 2  # ours: activations taken from one AA run's bound channels (1 = the paper: re-bind every activation)
    reuse_floor: float = 0.97  # ours: a reused channel must keep this fraction of the AA pick's utility
    synth_min_groups: int = 16  # ours, compiled loop only: >= this many rank groups -> also bind a family synthesized online from D̂ (0 = never)
    max_aa_rows: int = 256  # ours: (family, start) rows per AA batch; starts shrink for large beams
    max_quanta: int = 1  # ours: a chosen channel may carry up to this many quanta while its full lanes stay full
    pressure_power: int = 4  # ours: rank loads enter the pressure weight as (load / max load)^p (1 = linear)
    node_pressure: float = 8.0  # ours, 0 = off: + ν (T_out(node_i) + T_in(node_j)) / (2 T*) for pairs on different nodes
    warm_starts: int = 0  # ours, 0 = off: a family's first starts are its best bindings of its last AA run in this plan
    start_patience: int = 0  # ours, 0 = off: a family's starts stop after this many in a row without a better F_B
    shape_candidates: int = 16  # ours, 0 = off: between full scorings only the last full scoring's best shapes compete
    shape_rescore: int = 12  # ours: AA runs per full scoring of all shapes (with shape_candidates)

    def __post_init__(self) -> None:
        if not self.k_target_per_rank > 0:
            raise SpecError(f"k_target_per_rank={self.k_target_per_rank} must be positive (paper: K_target = N..3N, i.e. 1..3)")
        if self.n_start < 1 or self.aa_sweeps < 1 or self.shape_beam < 1:
            raise SpecError(f"n_start={self.n_start}, aa_sweeps={self.aa_sweeps} and shape_beam={self.shape_beam} must be at least 1")
        if self.overhead_s < 0:
            raise SpecError(f"overhead_s={self.overhead_s} must be non-negative")
        if self.kernel not in ("auto", "numpy", "c"):
            raise SpecError(f"kernel={self.kernel!r}; choose auto, numpy or c")
        if self.max_aa_rows < 1:
            raise SpecError(f"max_aa_rows={self.max_aa_rows} must be at least 1")
        if self.reuse < 1 or not 0 <= self.reuse_floor <= 1 or self.coarse_rounds_per_rank < 0:
            raise SpecError(f"reuse={self.reuse} must be >= 1, reuse_floor={self.reuse_floor} in [0, 1], "
                            f"coarse_rounds_per_rank={self.coarse_rounds_per_rank} >= 0 (0 = off)")
        if self.shape_score not in ("paper", "capped", "weighted"):
            raise SpecError(f"shape_score={self.shape_score!r}; choose paper (Eq. 6), capped or weighted")
        if not (isinstance(self.pressure_power, int) and self.pressure_power >= 1) or self.node_pressure < 0:
            raise SpecError(f"pressure_power={self.pressure_power!r} must be an integer >= 1 (1 = linear) and "
                            f"node_pressure={self.node_pressure} >= 0 (0 = off)")
        if not (isinstance(self.max_quanta, int) and self.max_quanta >= 1):
            raise SpecError(f"max_quanta={self.max_quanta!r} must be an integer >= 1 (1 = one quantum per activation, the paper)")
        for name in ("warm_starts", "start_patience"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= self.n_start):
                raise SpecError(f"{name}={value!r} must be an integer in 0..n_start={self.n_start} (0 = off)")
        if not (isinstance(self.shape_candidates, int) and self.shape_candidates >= 0
                and isinstance(self.shape_rescore, int) and self.shape_rescore >= 1):
            raise SpecError(f"shape_candidates={self.shape_candidates!r} must be an integer >= 0 (0 = off) and "
                            f"shape_rescore={self.shape_rescore!r} an integer >= 1 (AA runs per full scoring)")
        if self.assignment not in ("auto", "lsa", "enumerate"):
            raise SpecError(f"assignment={self.assignment!r}; choose auto, lsa or enumerate")


def quantum_s(demand: np.ndarray, topology: ChannelTopology, k_target_per_rank: float,
              group_caps: tuple[np.ndarray, np.ndarray] | None = None, max_rate_Bps: float | None = None,
              onehot: np.ndarray | None = None) -> float:
    """τ such that the demand drains in about K_target = k * N rounds.

    The expected completion is a lower bound: the busiest rank at the fastest path rate and, when
    the catalog's group capacities are given (positive; inf for a group without cross lanes),
    the busiest rank group's traffic to other groups at the best contention-free rate out of
    (into) that group.
    """
    d = np.asarray(demand, dtype=np.float64)
    t_est = max(d.sum(axis=1).max(), d.sum(axis=0).max()) / (max_rate_Bps or topology.max_rate_Bps())
    if group_caps is not None:
        cap_out, cap_in = group_caps
        if onehot is None:  # rank -> group indicator (N x G); a planner passes its own
            onehot = np.zeros((topology.n_ranks, topology.n_groups))
            for a, grp in enumerate(topology.groups):
                onehot[list(grp), a] = 1.0
        # group-level traffic to other groups (D̂ without its diagonal): whole bytes, so these
        # sums are exact in any order; the capacities are positive (inf: no cross lanes, 0 s)
        dg = onehot.T @ d @ onehot
        diag = dg.diagonal()
        t_out = (dg.sum(axis=1) - diag) / cap_out
        t_in = (dg.sum(axis=0) - diag) / cap_in
        t_est = max(t_est, float(t_out.max()), float(t_in.max()))
    return max(t_est / (k_target_per_rank * topology.n_ranks), 1e-15)


class VarioPathPlanner:
    """Online planner bound to one topology and its catalog (reused across invocations)."""

    KERNEL_BLOCK = 4096  # activations the compiled loop returns per call

    def __init__(self, topology: ChannelTopology, catalog: Catalog, params: VarioPathParams = VarioPathParams(),
                 name: str = "variopath"):
        if catalog.topology_hash != topology.topology_hash():
            raise SpecError("catalog was built for another topology; rebuild it (topology hash mismatch)")
        self.topology, self.catalog, self.params, self.name = topology, catalog, params, name
        G, g, N = catalog.n_groups, catalog.g, topology.n_ranks
        self.G, self.g, self.N = G, g, N
        self.groups = np.array(topology.groups, dtype=np.int64)  # (G, g)
        self.onehot = np.zeros((N, G))
        self.onehot[self.groups.ravel(), np.repeat(np.arange(G), g)] = 1.0
        inst = catalog.instances
        self.bucket_arrays = []
        self.fam_off = np.concatenate([[0], np.cumsum([len(f) for f in catalog.buckets])]).astype(np.int64)
        self._warm: dict[int, list] = {}  # warm starts: global family -> its best bindings [(src, dst), ...] this plan
        S = params.n_start
        rng = np.random.default_rng(params.seed)
        for fams in catalog.buckets:
            fam_arr = np.array(fams, dtype=np.int64)  # (H, N)
            H = len(fams)
            lane_a = np.array([inst[t].a for t in fams[0]], dtype=np.int64)
            lane_d = np.array([inst[t].d for t in fams[0]], dtype=np.int64)
            rates = np.array([[inst[t].rate_Bps for t in f] for f in fams])
            in_lanes = np.stack([np.flatnonzero(lane_d == d) for d in range(G)])
            # N_start initial bindings per family (start 0 in group order, the others random but
            # fixed by the seed, so plans are deterministic): (H*S, N) sources and destinations
            perm = np.tile(np.arange(g), (S, 2 * G, 1))
            if S > 1:
                perm[1:] = rng.permuted(perm[1:], axis=2)
            src0 = self.groups[np.arange(G)[None, :, None], perm[:, :G]].reshape(S, N)
            dst0 = np.empty((S, N), dtype=np.int64)
            dst0[:, in_lanes] = self.groups[np.arange(G)[None, :, None], perm[:, G:]]
            self.bucket_arrays.append({
                "fam": fam_arr, "lane_a": lane_a, "lane_d": lane_d, "rates": rates, "in_lanes": in_lanes,
                "r_b": np.repeat(rates, S, axis=0)[:, :, None], "src0": np.tile(src0, (H, 1)),
                "dst0": np.tile(dst0, (H, 1)), "cand_src": self.groups[lane_a], "cand_dst": self.groups[lane_d],
                "H": H, "max_rate": rates.max()})
        # best contention-free rate out of / into each group towards other groups (for τ)
        cap_out = np.zeros(G)
        cap_in = np.zeros(G)
        for b in self.bucket_arrays:
            cross = (b["lane_a"] != b["lane_d"])[None, :] * b["rates"]
            cap_out = np.maximum(cap_out, (cross[:, :, None] * (b["lane_a"][None, :, None] == np.arange(G))).sum(1).max(0))
            cap_in = np.maximum(cap_in, (cross[:, :, None] * (b["lane_d"][None, :, None] == np.arange(G))).sum(1).max(0))
        self.group_caps = (np.where(cap_out > 0, cap_out, np.inf), np.where(cap_in > 0, cap_in, np.inf))
        self._init_nodes()
        self._by_key = {k: {p.key: p for p in v} for k, v in topology.paths.items()}
        self._diag = np.arange(N) * (N + 1)
        self.cand_src = self.groups[np.arange(N) // g]  # lane k of every family leaves group k // g
        self._kernel = None  # (Kernel, flat catalog arrays), built on the first plan
        self._bound: dict[bytes, BoundKernel] = {}  # explicit keyed cache: ip bytes -> checked binding
        self._call = None  # (KERNEL_BLOCK, binding, float parameters) of the plans' kernel calls
        self._paths: dict = {}  # explicit keyed cache: (src, dst, instance) -> PathOption (emission)
        self.max_rate_Bps = topology.max_rate_Bps()
        self._pool = None
        self._batches: dict = {}  # explicit keyed cache: beam (shape indices) -> AA batch arrays
        # per shape and group pair: the largest lane-rate sum over its families (capped scoring)
        # Shapes as sparse rows over group pairs (code a * G + d, ascending): a shape has at most
        # N lanes, so scoring costs O(shapes x N), not O(shapes x G^2) (G = 128 at 256 GPUs).
        # shape_val = M_ad (Eq. 6); shape_rate = the largest lane-rate sum of the pair over the
        # bucket's families (capped scoring).
        ptr, idx, val, prate = [0], [], [], []
        for b in self.bucket_arrays:
            pair = b["lane_a"] * G + b["lane_d"]
            codes, inv = np.unique(pair, return_inverse=True)
            per = np.zeros((b["H"], len(codes)))
            np.add.at(per, (slice(None), inv), b["rates"])
            idx.append(codes)
            val.append(np.bincount(inv, minlength=len(codes)).astype(np.float64))
            prate.append(per.max(axis=0))
            ptr.append(ptr[-1] + len(codes))
        self.shape_ptr = np.array(ptr, dtype=np.int64)
        self.shape_idx = np.concatenate(idx).astype(np.int64)
        self.shape_val = np.concatenate(val)
        self.shape_rate = np.concatenate(prate)
        self.group_index = topology.group_of()
        # weighted scores (ours): fractional, so summed in the compiled loop's order -- D̂ pair by
        # pair in rank order (np.add.at is sequential), each shape's pairs in ascending code
        # (padded columns, one position at a time) -- and both loops pick the same shapes
        self.pair_code = (self.group_index[:, None] * G + self.group_index[None, :]).ravel()
        lens = np.diff(self.shape_ptr)
        pos = np.arange(len(self.shape_idx)) - np.repeat(self.shape_ptr[:-1], lens)
        rows = np.repeat(np.arange(len(lens)), lens)
        self.pad_idx = np.zeros((int(lens.max()), len(lens)), dtype=np.int64)
        self.pad_val = np.zeros((int(lens.max()), len(lens)))
        self.pad_rate = np.zeros((int(lens.max()), len(lens)))
        self.pad_idx[pos, rows], self.pad_val[pos, rows] = self.shape_idx, self.shape_val
        self.pad_rate[pos, rows] = self.shape_rate

    def _init_nodes(self) -> None:
        """Nodes and their best contention-free rates out and in (ours, ``node_pressure``): the
        largest sum of lane rates leaving (entering) a node over the catalog's families."""
        node_of = np.asarray(self.topology.nodes or (0,) * self.N, dtype=np.int64)
        K = int(node_of.max()) + 1
        gnode = node_of[self.groups[:, 0]]  # a rank group lies in one node (one PCIe switch)
        cap_out, cap_in = np.zeros(K), np.zeros(K)
        for b in self.bucket_arrays:
            na, nd = gnode[b["lane_a"]], gnode[b["lane_d"]]
            for n in range(K):
                cap_out[n] = max(cap_out[n], float((((na == n) & (nd != n)) * b["rates"]).sum(axis=1).max()))
                cap_in[n] = max(cap_in[n], float((((nd == n) & (na != n)) * b["rates"]).sum(axis=1).max()))
        self.node_of, self.n_nodes = node_of, K
        self.node_onehot = np.zeros((self.N, K))
        self.node_onehot[np.arange(self.N), node_of] = 1.0
        self.node_cross = node_of[:, None] != node_of[None, :]
        # a node without cross lanes never has cross demand; 1.0 keeps the division defined
        self.node_caps = (np.where(cap_out > 0, cap_out, 1.0), np.where(cap_in > 0, cap_in, 1.0))

    def _node_weights(self, rem: np.ndarray, t_rank: float) -> np.ndarray:
        """(T_out(n_i) + T_in(n_j)) / (2 T*) for pairs on different nodes, else 0 (ours): T = a
        node's remaining bytes to (from) other nodes over its best contention-free rate out (in),
        T* = the largest such time or the busiest rank's at the fastest rate (``t_rank``). With
        NICs the bottleneck, a lane that keeps a NIC busy weighs more than one inside a node."""
        dn = self.node_onehot.T @ rem @ self.node_onehot  # whole bytes: exact in any order
        diag = np.diag(dn)
        t_out = (dn.sum(axis=1) - diag) / self.node_caps[0]
        t_in = (dn.sum(axis=0) - diag) / self.node_caps[1]
        t_max = max(t_rank, float(t_out.max()), float(t_in.max()))
        if not t_max > 0:
            return np.zeros_like(rem)
        return (t_out[self.node_of][:, None] + t_in[self.node_of][None, :]) / (2.0 * t_max) * self.node_cross

    def _rank_weights(self, ls: np.ndarray, lr: np.ndarray) -> np.ndarray:
        """1 + β (u_i + v_j) / 2 with u = (load / max load)^p (ours; p = 1: linear, the ranks that
        bound the completion weigh most; larger p: only the nearly critical ones). Powers as
        repeated products, as the compiled loop computes them."""
        mx = max(ls.max(), lr.max())
        p = self.params.pressure_power
        if p == 1:
            return 1.0 + self.params.rank_pressure * (ls[:, None] + lr[None, :]) / (2.0 * mx)
        u, v = ls / mx, lr / mx
        pu, pv = u, v
        for _ in range(p - 1):
            pu, pv = pu * u, pv * v
        return 1.0 + self.params.rank_pressure * (pu[:, None] + pv[None, :]) / 2.0

    def _weighted_scores(self, weighted: np.ndarray) -> np.ndarray:
        """Eq. 6 on the pressure-weighted D̂ (ours): Σ_ad M_ad Σ_{i∈a, j∈d} w_ij D_ij, summed in
        the compiled loop's order."""
        dg = np.zeros(self.G * self.G)
        np.add.at(dg, self.pair_code, weighted.ravel())
        scores = np.zeros(self.pad_val.shape[1])
        for idx, val in zip(self.pad_idx, self.pad_val):
            scores += val * dg[idx]
        return scores

    def _path(self, i: int, j: int, t: int):
        hit = self._paths.get((i, j, t))
        if hit is not None:
            return hit
        r = self.catalog.instances[t]
        try:
            hit = self._paths[(i, j, t)] = self._by_key[(i, j)][r.key]
            return hit
        except KeyError:
            raise SpecError(f"ranks {i}->{j} lack the path {r.kind} {r.shared} of their group pair; "
                            "the rank groups are not topology-equivalent") from None

    def _greedy_binding(self, b: dict, q: np.ndarray, force: tuple[int, int, int] | None = None):
        """Lanes in order of their best remaining credit take their best free (i, j), i != j.

        ``force = (lane, i, j)`` pre-binds one lane (the last-resort progress guarantee).
        """
        lane_a, lane_d, N = b["lane_a"], b["lane_d"], self.N
        free_src = {a: list(self.groups[a]) for a in range(self.G)}
        free_dst = {d: list(self.groups[d]) for d in range(self.G)}
        src = np.full(N, -1, dtype=np.int64)
        dst = np.full(N, -1, dtype=np.int64)
        if force is not None:
            k, i, j = force
            src[k], dst[k] = i, j
            free_src[lane_a[k]].remove(i)
            free_dst[lane_d[k]].remove(j)
        best_first = sorted((k for k in range(N) if src[k] < 0),
                            key=lambda k: -q[np.ix_(self.groups[lane_a[k]], self.groups[lane_d[k]])].max())
        for k in best_first:
            cands = [(q[i, j], i, j) for i in free_src[lane_a[k]] for j in free_dst[lane_d[k]] if i != j]
            if not cands:
                cands = [(q[i, j], i, j) for i in free_src[lane_a[k]] for j in free_dst[lane_d[k]]]
            _, i, j = max(cands)
            src[k], dst[k] = i, j
            free_src[lane_a[k]].remove(i)
            free_dst[lane_d[k]].remove(j)
        # repair a forced self-pair: swap its destination (else its source) with another lane of
        # the same group; that lane's endpoints differ from it, so no new self-pair appears
        fixed = -1 if force is None else force[0]
        for k in np.flatnonzero(src == dst):
            others = [o for o in np.flatnonzero(lane_d == lane_d[k]) if o != k and o != fixed]
            if others:
                o = max(others, key=lambda o: q[src[k], dst[o]] + q[src[o], dst[k]])
                dst[k], dst[o] = dst[o], dst[k]
                continue
            others = [o for o in np.flatnonzero(lane_a == lane_a[k]) if o != k and o != fixed]
            o = max(others, key=lambda o: q[src[o], dst[k]] + q[src[k], dst[o]])
            src[k], src[o] = src[o], src[k]
        return src, dst

    def _forced(self, rem: np.ndarray, q: np.ndarray, tau: float, scores: np.ndarray):
        """Last resort: bind the heaviest remaining pair onto any family that has a lane for it."""
        i, j = np.unravel_index(int(rem.argmax()), rem.shape)
        gof = self.group_index
        a, d = gof[i], gof[j]
        for k in np.argsort(-scores, kind="stable"):
            b = self.bucket_arrays[int(k)]
            for h in range(b["H"]):
                lanes = np.flatnonzero((b["lane_a"] == a) & (b["lane_d"] == d))
                if len(lanes) == 0:
                    continue
                src, dst = self._greedy_binding(b, q, (int(lanes[0]), int(i), int(j)))
                if (src == dst).any():
                    continue
                r = b["rates"][h]
                x = np.minimum(np.maximum(1.0, np.floor(tau * r)), rem[src, dst])
                return x, src, dst, b["fam"][h], float(x.sum()), r
        return None

    def starts_for(self, families: int) -> int:
        """AA starts per family for a batch of ``families``: N_start, fewer when the batch would
        exceed max_aa_rows (ours: large buckets bring their own diversity; bounds the AA's cost)."""
        return max(1, min(self.params.n_start, self.params.max_aa_rows // max(1, families)))

    def _batch(self, shapes: tuple[int, ...]) -> dict:
        """The families of ``shapes`` (x N_start starts) as one AA batch; keyed cache per planner.

        Every family lists its lanes by source group (lane k leaves group k // g), so the source
        side is shared; only the lanes' destination groups differ, held per row as ``in_flat``
        (the lane positions sorted by destination group).
        """
        hit = self._batches.get(shapes)
        if hit is not None:
            return hit
        parts = [self.bucket_arrays[j] for j in shapes]
        S, G, g = self.starts_for(sum(b["H"] for b in parts)), self.G, self.g
        full = self.params.n_start
        cat = np.concatenate
        fam = cat([b["fam"] for b in parts])
        gfam = cat([np.arange(self.fam_off[j], self.fam_off[j + 1]) for j in shapes])  # global family ids
        rates = cat([b["rates"] for b in parts])
        r_rows = np.repeat(rates, S, axis=0)  # (B, N)
        in_flat = cat([np.tile(b["in_lanes"].ravel(), (b["H"] * S, 1)) for b in parts])  # (B, N)
        lane_d = cat([np.tile(b["lane_d"], (b["H"] * S, 1)) for b in parts])
        batch = {"fam": fam, "gfam": gfam, "r_rows": r_rows, "r_b": r_rows[:, :, None], "in_flat": in_flat,
                 "r_in": np.take_along_axis(r_rows, in_flat, axis=1).reshape(-1, G, g, 1),
                 "in_src_group": (in_flat // g).reshape(-1, G, g), "lane_d": lane_d,
                 "src0": cat([b["src0"].reshape(b["H"], full, -1)[:, :S].reshape(-1, self.N) for b in parts]),
                 "dst0": cat([b["dst0"].reshape(b["H"], full, -1)[:, :S].reshape(-1, self.N) for b in parts]),
                 "S": S,
                 "rows": np.arange(len(r_rows))[:, None], "max_rate": float(rates.max()),
                 "bucket": shapes[0] if len(shapes) == 1 else -1}
        if len(self._batches) < 4096:  # bounded: a long-lived planner sees few distinct beams
            self._batches[shapes] = batch
        return batch

    def _bind(self, shapes: tuple[int, ...], rem: np.ndarray, q: np.ndarray, tau: float, tie_break: bool = False, w=None):
        """Multi-start AA for every family of the buckets ``shapes`` at once (one numpy batch);
        returns the best (x, src, dst, family, utility) by EVALUATE (Eqs. 9-10) or None."""
        b = self._batch(shapes)
        G, g, N, S = self.G, self.g, self.N, b["S"]
        r_b, r_in, in_flat, rows = b["r_b"], b["r_in"], b["in_flat"], b["rows"]
        B = len(r_b)
        cand_src, gd = self.cand_src, self.groups
        src, dst = self._starts(b)
        tie_src = tie_dst = 0.0
        if tie_break:
            # Used only when the plain AA found nothing (ours): where every credit of a lane is
            # zero, prefer endpoints that still have demand towards the lane's other group, so
            # sparse residual demand cannot trap the AA in an all-zero binding.
            cap_q = np.minimum(q, b["max_rate"])
            pot_out = 1e-6 * cap_q[:, gd].max(axis=2)  # (N, G)
            pot_in = 1e-6 * cap_q[gd, :].max(axis=1)  # (G, N)
            tie_src = pot_out[cand_src[None, :, :], b["lane_d"][:, :, None]]
            tie_dst = pot_in[b["in_src_group"][:, :, :, None], gd[None, :, None, :]]
            if b["bucket"] >= 0:
                # and replace the first start of every family by a greedy demand-first binding,
                # which escapes the AA's fixed points where a derangement lane blocks the needed
                # endpoint
                src, dst = src.copy(), dst.copy()
                gs, gdst = self._greedy_binding(self.bucket_arrays[b["bucket"]], q)
                src[::S], dst[::S] = gs, gdst
        method = self.params.assignment
        lanes_idx = np.arange(N)[None, :]
        qf = q.ravel()
        wf = None if w is None else w.ravel()
        src_n = cand_src[None, :, :] * N  # flat index of (i, j) = i * N + j
        dst_c = gd[None, :, None, :]  # destination candidates of the lanes into group d
        d_idx = np.arange(G)[:, None]
        single = S == 1 and not tie_break  # one start: no convergence test
        if method != "lsa" and g <= 5:
            perms, select = perm_selector(g)

            def assign(values):  # inlined batched_assignment (enumeration) for the hot loop
                return perms[(values.reshape(-1, g * g) @ select).argmax(axis=1)]
        else:
            def assign(values):
                return batched_assignment(values, method)
        best = None
        for sweep in range(self.params.aa_sweeps):
            idx = src_n + dst[:, :, None]
            v = np.minimum(qf.take(idx), r_b)  # (B, N, g): credits of each candidate source
            if wf is not None:
                v *= wf.take(idx)
            if tie_break:
                v = v + tie_src
            cols = assign(v.reshape(B * G, g, g)).reshape(B, N)
            src = cand_src[lanes_idx, cols]
            idx = np.take_along_axis(src, in_flat, axis=1).reshape(B, G, g, 1) * N + dst_c
            v = np.minimum(qf.take(idx), r_in)  # (B, G, g, g): credits of each candidate destination
            if wf is not None:
                v *= wf.take(idx)
            if tie_break:
                v = v + tie_dst
            cols = assign(v.reshape(B * G, g, g)).reshape(B, G, g)
            dst[rows, in_flat] = gd[d_idx, cols].reshape(B, N)
            if single and sweep + 1 < self.params.aa_sweeps:
                continue
            idx = src * N + dst
            f = np.minimum(qf.take(idx), b["r_rows"])
            if wf is not None:
                f *= wf.take(idx)
            f = f.sum(axis=1)  # F_B (Eq. 8); a self-pair makes it hugely negative
            if single:
                break
            if best is not None and not (f > best * (1 + 1e-12) + 1e-300).any():
                break
            best = f if best is None else np.maximum(best, f)
        r = b["r_rows"]
        idx = src * N + dst
        if self.params.start_patience:
            f = self._stall_mask(np.minimum(qf.take(idx), r) * (1.0 if wf is None else wf.take(idx)), S)
        ok = f >= 0  # a binding that kept a self-pair is not a channel
        rows_ok = np.flatnonzero(ok)
        pool = {"idx": idx[ok], "cap": np.maximum(1.0, np.floor(tau * r[ok])), "inv_r": 1.0 / r[ok],
                "w": None if (wf is None or not self.params.weighted_utility) else wf.take(idx[ok]),
                "src": src[ok], "dst": dst[ok], "fam": b["fam"][rows_ok // S], "gfam": b["gfam"][rows_ok // S],
                "r": r[ok]}
        if not len(pool["idx"]):
            return None
        found = self._evaluate(pool, rem.ravel(), remember=self.params.warm_starts)
        if found is None:
            return None
        self._pool = pool
        return found

    def _starts(self, b: dict) -> tuple[np.ndarray, np.ndarray]:
        """The batch's start bindings: per family its remembered bindings first (warm starts, ours),
        then its fixed starts (as many as fit in its S rows)."""
        src, dst = b["src0"], b["dst0"].copy()
        if not self._warm:
            return src, dst
        S, src = b["S"], src.copy()
        for p, fam in enumerate(b["gfam"].tolist()):
            mem = self._warm.get(fam, ())[:S]
            if mem:
                lo, nw = p * S, len(mem)
                src[lo + nw:lo + S], dst[lo + nw:lo + S] = src[lo:lo + S - nw].copy(), dst[lo:lo + S - nw].copy()
                for m, (ms, md) in enumerate(mem):
                    src[lo + m], dst[lo + m] = ms, md
        return src, dst

    def _stall_mask(self, credits: np.ndarray, S: int) -> np.ndarray:
        """F_B of every row (its credits summed lane by lane in order, as the compiled loop sums
        them), -1 for the starts dropped by the early stop (ours, ``start_patience``): per family
        (S consecutive rows), after that many starts in a row that did not beat the family's best
        F_B by more than 1e-12 relative (the AA's convergence test)."""
        f = np.zeros(len(credits))
        for k in range(credits.shape[1]):
            f += credits[:, k]
        patience = self.params.start_patience
        for lo in range(0, len(f), S):
            best, since = f[lo], 0
            for t in range(lo + 1, lo + S):
                if since >= patience:
                    f[t] = -1.0
                elif f[t] > best * (1 + 1e-12) + 1e-300:
                    best, since = f[t], 0
                else:
                    since += 1
        return f

    def _remember(self, pool: dict, util: np.ndarray) -> None:
        """Warm starts (ours): each family of the AA run keeps its best ``warm_starts`` distinct
        channels' bindings by utility (ties by row order); a family without a channel keeps its own."""
        W, gfam = self.params.warm_starts, pool["gfam"]
        cut = np.flatnonzero(np.diff(gfam)) + 1
        for lo, hi in zip(np.concatenate([[0], cut]), np.concatenate([cut, [len(gfam)]])):
            kept: list = []
            for t in lo + np.argsort(-util[lo:hi], kind="stable"):
                pair = (pool["src"][t], pool["dst"][t])
                if any((pair[0] == k[0]).all() and (pair[1] == k[1]).all() for k in kept):
                    continue
                kept.append(pair)
                if len(kept) == W:
                    break
            self._warm[int(gfam[lo])] = kept

    def _evaluate(self, pool: dict, remf: np.ndarray, remember: int = 0):
        """EVALUATE (Eqs. 9-10) of bound candidate channels on the current remaining demand;
        ``remember``: the AA run's families keep their best bindings (warm starts)."""
        x = np.minimum(pool["cap"], remf.take(pool["idx"]))  # Eq. 9
        useful = x if pool["w"] is None else x * pool["w"]
        # Eq. 10; the bytes summed lane by lane in order, as the compiled loop sums them (the
        # warm starts rank a family's bindings by these values, so both loops must agree exactly)
        total = useful[:, 0].copy()
        for k in range(1, useful.shape[1]):
            total += useful[:, k]
        util = total / (self.params.overhead_s + (x * pool["inv_r"]).max(axis=1) + 1e-300)
        h = int(util.argmax())
        if not util[h] > 0:
            return None
        if remember:
            self._remember(pool, util)
        return x[h], pool["src"][h], pool["dst"][h], pool["fam"][h], float(util[h]), pool["r"][h]

    def plan(self, demand: np.ndarray) -> AlltoallvSchedule:
        demand = check_demand(demand, self.N)
        t0, c0 = time.perf_counter(), time.process_time()
        rem = demand.astype(np.float64)
        # (bytes, src, dst, instances) per activation -- what the runtime needs -- as one entry
        # per activation (1-D rows, the numpy path) or per block of the compiled loop (2-D)
        raw = []
        guard = 50 * self.N * self.N + 100 * int(np.count_nonzero(demand)) + 1000
        kernel = self._kernel_fn()
        if kernel is not None:  # the compiled loop computes τ0 as quantum_s does
            tau0 = self._decompose_kernel(kernel, rem, raw, guard)
        else:
            tau0 = quantum_s(demand, self.topology, self.params.k_target_per_rank, self.group_caps,
                             self.max_rate_Bps, self.onehot)
            self._decompose_numpy(rem, tau0, raw, guard)
        planning_s, planning_cpu_s = time.perf_counter() - t0, time.process_time() - c0
        acts = tuple(Activation(lanes=tuple(
            Lane(src=i, dst=k, path=self._path(i, k, t), bytes=int(v))
            for i, k, t, v in zip(src, dst, fam, x) if v > 0)) for x, src, dst, fam in _rows(raw))
        emit_s = time.perf_counter() - t0 - planning_s
        return AlltoallvSchedule(scheduler=self.name, platform=self.topology.name, n_ranks=self.N, demand=demand,
                                 activations=acts, channels=True,
                                 meta={"planning_s": planning_s, "planning_cpu_s": planning_cpu_s,
                                       "emit_s": emit_s, "tau_s": tau0, "kernel": "c" if kernel is not None else "numpy",
                                       "planning_s_per_activation": planning_s / max(1, len(acts))})

    # -- the compiled loop ---------------------------------------------------------------------
    def prepare(self) -> None:
        """Builds now what the first plan would: the compiled loop's flat catalog tables and their
        checked binding (once per planner; they depend on the catalog and the parameters, never
        on a demand). The scheduler factory calls it, so a planner's first plan costs what the
        others do; ``plan`` builds them itself when this was not called."""
        kernel = self._kernel_fn()
        if kernel is not None:
            self._bound_kernel(kernel, self._kernel_params(0.0)[0])

    def _kernel_fn(self):
        """The C loop when params.kernel allows it and it applies (g <= 5, permutation enumeration)."""
        mode = self.params.kernel
        if mode == "numpy" or self.params.assignment == "lsa" or self.g > 5:
            if mode == "c":
                raise SpecError(f"kernel=c needs assignment=auto|enumerate and groups of <= 5 GPUs (g={self.g}); use kernel=auto")
            return None
        if self._kernel is None:
            kernel = load_kernel()
            if kernel is None and mode == "c":
                raise SpecError(f"kernel=c but the compiled loop ({KERNEL_MODULE}) is not built; reinstall gxnet "
                                "where a C compiler and Python headers exist (pip install -e .) or use kernel=auto|numpy")
            self._kernel = (kernel, self._kernel_arrays()) if kernel is not None else (None, None)
        return self._kernel[0]

    def _bound_kernel(self, kernel: Kernel, ip: np.ndarray) -> BoundKernel:
        """The loop bound to this planner's catalog arrays (checked once per parameter set)."""
        key = ip.tobytes()
        if key not in self._bound:
            self._bound[key] = kernel.bind(ip, self._kernel[1])
        return self._bound[key]

    def _kernel_arrays(self) -> dict:
        """Flat, contiguous copies of the catalog for the C loop (built once per planner)."""
        p, S = self.params, self.params.n_start
        sizes = sorted((b["H"] for b in self.bucket_arrays), reverse=True)
        perms, _ = perm_selector(self.g)
        cap_out, cap_in = self.group_caps
        arr = {
            "groups": self.groups.ravel(), "gof": self.group_index.astype(np.int64),
            **self._columns(),
            "fam_off": np.concatenate([[0], np.cumsum([b["H"] for b in self.bucket_arrays])]).astype(np.int64),
            # one extra row (index F) where the C loop writes its synthesized family
            "fam_rate": np.concatenate([b["rates"] for b in self.bucket_arrays] + [np.ones((1, self.N))]),
            "rates_u": np.unique(np.concatenate([b["rates"].ravel() for b in self.bucket_arrays]
                                                + [np.array([r.rate_Bps for r in self.catalog.instances])])),
            "fam_in": np.concatenate([np.repeat(np.stack([b["in_lanes"].ravel() for b in self.bucket_arrays]),
                                                [b["H"] for b in self.bucket_arrays], axis=0),
                                      np.zeros((1, self.N), dtype=np.int64)]),
            "start_dst": np.concatenate([b["dst0"] for b in self.bucket_arrays]),
            "perms": np.ascontiguousarray(perms, dtype=np.int64),
            "cap_out": np.where(np.isfinite(cap_out), cap_out, 0.0), "cap_in": np.where(np.isfinite(cap_in), cap_in, 0.0),
            "fam_all": np.concatenate([b["fam"] for b in self.bucket_arrays]),
            "node_of": self.node_of, "node_cap_out": self.node_caps[0], "node_cap_in": self.node_caps[1],
        }
        arr["fam_rid"] = np.searchsorted(arr["rates_u"], arr["fam_rate"])
        arr.update(self._synth_arrays(arr["rates_u"]))
        dense, n_res = arr.pop("dense"), arr.pop("n_res")
        dense_val = arr.pop("dense_val")
        arr = {k: np.ascontiguousarray(v, dtype=np.float64 if v.dtype.kind == "f" else np.int64) for k, v in arr.items()}
        # lane counts M_ad (whole numbers <= N): float32 holds them exactly, in half the bytes the scores read
        arr["dense_val"] = np.ascontiguousarray(dense_val, dtype=np.float32)
        assert (arr["dense_val"] == dense_val).all()
        arr["dense"], arr["n_res"] = dense, n_res
        arr["synth"] = int(p.synth_min_groups > 0 and self.G >= p.synth_min_groups)
        arr["max_rows"] = max(S * sum(sizes[:p.shape_beam]), 1) + S * arr["synth"]
        return arr

    def _synth_arrays(self, rates_u: np.ndarray) -> dict:
        """Path instances by group pair (fastest first) and their resources, for the C loop's
        online family synthesis (ours): pair code a * G + d -> instances; instance -> resource ids."""
        inst, G = self.catalog.instances, self.G
        res_id: dict[str, int] = {}
        ir_ptr, ir = [0], []
        for r in inst:
            ir.extend(res_id.setdefault(x, len(res_id)) for x in r.shared)
            ir_ptr.append(len(ir))
        by_pair: dict[int, list[int]] = {}
        intra = np.full(G, -1, dtype=np.int64)
        for t, r in enumerate(inst):
            if r.copy:
                continue  # replicas: the first copy stands for all (an empty footprint)
            by_pair.setdefault(r.a * G + r.d, []).append(t)
            if r.a == r.d and not r.shared and intra[r.a] < 0:
                intra[r.a] = t
        pi_ptr, pi = [0], []
        for c in range(G * G):
            pi.extend(sorted(by_pair.get(c, []), key=lambda t: (-inst[t].rate_Bps, t)))
            pi_ptr.append(len(pi))
        rates = np.array([r.rate_Bps for r in inst])
        return {"pi_ptr": np.array(pi_ptr), "pi": np.array(pi + [0]), "ir_ptr": np.array(ir_ptr), "ir": np.array(ir + [0]),
                "intra_rep": intra, "inst_rate": rates, "inst_rid": np.searchsorted(rates_u, rates),
                "n_res": len(res_id)}

    def _columns(self) -> dict:
        """The sparse shapes transposed (by group pair), for the C loop's scoring."""
        J, GG = len(self.shape_ptr) - 1, self.G * self.G
        rows = np.repeat(np.arange(J), np.diff(self.shape_ptr))
        order = np.lexsort((rows, self.shape_idx))
        counts = np.bincount(self.shape_idx, minlength=GG)
        out = {"col_ptr": np.concatenate([[0], np.cumsum(counts)]), "col_shape": rows[order],
               "col_val": self.shape_val[order], "col_rate": self.shape_rate[order],
               "dense_val": np.zeros(1), "dense_rate": np.zeros(1), "dense": 0}
        if GG * J <= 4 * len(rows):  # dense rows vectorize (~4 shapes per instruction)
            dv, dr = np.zeros((GG, J)), np.zeros((GG, J))
            dv[self.shape_idx, rows], dr[self.shape_idx, rows] = self.shape_val, self.shape_rate
            out.update(dense_val=dv, dense_rate=dr, dense=1)
        return out

    def _kernel_params(self, tau0: float) -> tuple[np.ndarray, np.ndarray]:
        """The loop's integer and float parameters (kernel.INT_PARAMS, kernel.FLOAT_PARAMS); tau0 <= 0 lets
        the loop compute τ0 from the demand (quantum_s)."""
        p, N, arr = self.params, self.N, self._kernel[1]
        cap = self.KERNEL_BLOCK  # activations per call; a full buffer returns and the loop resumes (fresh pool)
        ip = np.array([N, self.G, self.g, len(self.bucket_arrays), len(arr["perms"]), p.n_start, p.aa_sweeps,
                       p.shape_beam, p.reuse, p.max_quanta, int(p.weighted_utility), int(p.shape_score == "capped"),
                       cap, arr["max_rows"], int(bool(p.rank_pressure)), arr["dense"], p.max_aa_rows,
                       len(arr["rates_u"]), arr["synth"], len(arr["fam_all"]), arr["n_res"], p.pressure_power,
                       int(p.shape_score == "weighted"), self.n_nodes, p.warm_starts, p.start_patience,
                       p.shape_candidates, p.shape_rescore], dtype=np.int64)
        dp = np.array([tau0, p.coarse_rounds_per_rank * N, self.max_rate_Bps, p.rank_pressure, p.pair_pressure,
                       p.overhead_s, p.reuse_floor, p.node_pressure, p.k_target_per_rank * N], dtype=np.float64)
        return ip, dp

    def _decompose_kernel(self, kernel: Kernel, rem: np.ndarray, raw: list, guard: int) -> float:
        """Drains ``rem`` with the compiled loop into ``raw``; returns τ0, which the loop computes
        from the demand (quantum_s's value) on its first call."""
        if self._call is None or self._call[0] != self.KERNEL_BLOCK:  # once per planner (and buffer size)
            ip, dp = self._kernel_params(0.0)
            self._call = (self.KERNEL_BLOCK, self._bound_kernel(kernel, ip), dp)
        bound, dp = self._call[1], self._call[2].copy()  # τ0 = 0: the loop computes it and writes it here
        fam_all, synth = self._kernel[1]["fam_all"], self._kernel[1]["synth"]
        F = len(fam_all)
        while True:
            if len(raw) > guard:
                raise RuntimeError("VarioPath did not drain the demand; this is a bug")
            n, status = bound(dp, rem)
            if n:  # one copy per block of the bound buffers, kept as one 2-D entry
                out_fam = bound.out_fam[:n]
                if not synth:
                    fams = fam_all[out_fam]
                else:
                    fams = fam_all[np.minimum(out_fam, F - 1)]
                    syn = out_fam == F  # synthesized online: its instances come back in out_inst
                    if syn.any():
                        fams[syn] = bound.out_inst[:n][syn]
                raw.append((bound.out_x[:n].copy(), bound.out_src[:n].copy(), bound.out_dst[:n].copy(), fams))
            if status == 1:
                return float(dp[0])
            if status == 0:  # no candidate: the numpy path's tie-break / forced binding, one activation
                self._decompose_numpy(rem, float(dp[0]), raw, guard, max_activations=1)
                if not rem.any():
                    return float(dp[0])

    # -- the numpy loop (reference) --------------------------------------------------------------
    def _decompose_numpy(self, rem: np.ndarray, tau0: float, raw: list, guard: int, max_activations: int | None = None) -> None:
        tau, coarse = tau0, self.params.coarse_rounds_per_rank
        left = rem.sum()
        onehot, onehot_t, diag = self.onehot, self.onehot.T, self._diag
        beam, max_quanta = self.params.shape_beam, self.params.max_quanta
        s_idx, s_val, s_start = self.shape_idx, self.shape_val, self.shape_ptr[:-1]
        capped = self.params.shape_score == "capped"
        weighted_scores = self.params.shape_score == "weighted"
        reuse_left, reuse_floor, util0 = 0, self.params.reuse_floor, 0.0
        self._pool = None
        self._warm = {}
        cand, aa_runs = None, 0  # shape candidates (ascending shape indices) and AA runs so far
        start = len(raw)
        while left > 0:
            if max_activations is not None and len(raw) - start >= max_activations:
                return
            if len(raw) > guard:
                raise RuntimeError("VarioPath did not drain the demand; this is a bug")
            if reuse_left > 0:
                # ours: re-EVALUATE the channels the last AA bound on the new remaining demand;
                # keep the best while its utility stays within reuse_floor of the AA's pick
                found = self._evaluate(self._pool, rem.ravel())
                if found is not None and found[4] >= reuse_floor * util0:
                    reuse_left -= 1
                    x, src, dst, fam, _, r = found
                    raw.append((x, src, dst, fam))
                    rem[src, dst] -= x
                    left -= x.sum()
                    continue
            if coarse:
                # ours: early activations may be longer (the remaining lower bound over c N rounds)
                # and shrink to τ as the demand drains; fewer activations to plan
                tau = max(tau0, quantum_s(rem, self.topology, coarse, self.group_caps, self.max_rate_Bps, onehot))
            q = rem * (1.0 / tau)
            q.flat[diag] = _FORBID
            w = None
            if self.params.rank_pressure:
                # ours: the busiest ranks bound the completion (they must stay busy on fast paths
                # to the end), so their lanes' credits count more in the binding
                ls, lr = rem.sum(axis=1), rem.sum(axis=0)
                w = self._rank_weights(ls, lr)
                if self.params.pair_pressure:
                    w = w + self.params.pair_pressure * rem / rem.max()
                if self.params.node_pressure and self.n_nodes > 1:
                    w = w + self.params.node_pressure * self._node_weights(rem, max(ls.max(), lr.max()) / self.max_rate_Bps)
            dg = (onehot_t @ rem @ onehot).ravel()  # D̂ (Eq. 5)
            if weighted_scores and w is not None:
                scores = self._weighted_scores(rem * w)
            elif capped:
                # ours: a shape can move at most τ x (its lanes' rate) per group pair in one
                # activation; Eq. 6 keeps crediting lanes of a pair whose demand is nearly drained
                # (each shape's pairs summed in ascending order, as the compiled loop sums them)
                scores = np.zeros(self.pad_rate.shape[1])
                for idx, rate in zip(self.pad_idx, self.pad_rate):
                    scores += np.minimum(rate * tau, dg[idx])
            else:
                scores = np.add.reduceat(s_val * dg[s_idx], s_start)  # Eq. 6
            # ours (shape candidates): between full scorings only the last full scoring's best
            # shape_candidates shapes compete for the beam (all scores are computed here; the
            # compiled loop computes only theirs, the same values)
            top = None
            if cand is not None and aa_runs % self.params.shape_rescore:
                top = tuple(int(cand[j]) for j in _beam(scores[cand], beam))
                if not scores[top[0]] > 0:
                    top = None  # no candidate left: score them all
            if top is None:
                top = _beam(scores, beam)
                if self.params.shape_candidates and scores[top[0]] > 0:
                    cand = np.sort(np.argsort(-scores, kind="stable")[:self.params.shape_candidates])
            aa_runs += 1
            found = self._bind(top, rem, q, tau, w=w) if scores[top[0]] > 0 else None
            if found is None and max_activations is None:
                # as with the compiled loop, which stops here (_decompose_kernel): one activation
                # planned afresh (below, max_activations=1), then the loop restarts with fresh state
                self._decompose_numpy(rem, tau0, raw, guard, max_activations=1)
                left, reuse_left, self._pool, self._warm, cand, aa_runs = rem.sum(), 0, None, {}, None, 0
                continue
            if found is None:  # rare: retry the best shapes with the tie-break, then the rest
                for j in np.argsort(-scores, kind="stable"):
                    if scores[j] <= 0:
                        break
                    found = self._bind((int(j),), rem, q, tau, tie_break=True, w=w)
                    if found is not None:
                        break
            if found is None:
                self._pool = None
                found = self._forced(rem, q, tau, scores)
            if found is None:
                raise RuntimeError("no catalog shape serves the remaining demand; the catalog is incomplete")
            x, src, dst, fam, util0, r = found
            reuse_left = self.params.reuse - 1 if self._pool is not None else 0
            if max_quanta > 1:
                # ours: keep the channel for up to max_quanta quanta while every lane that is full
                # (x = τ bw) stays full -- the same as repeating the activation, minus the
                # re-planning (and λ) of the repeats
                full = x >= np.floor(tau * r)
                if full.any():
                    m = min(max_quanta, int((rem[src, dst][full] // x[full]).min()))
                    if m > 1:
                        x = np.minimum(m * np.floor(tau * r), rem[src, dst]) * (x > 0)
            raw.append((x, src, dst, fam))
            rem[src, dst] -= x
            left -= x.sum()


def _beam(scores: np.ndarray, beam: int) -> tuple[int, ...]:
    """Positions of the ``beam`` best scores, ties by lower position, those > 0 only (else the best)."""
    if beam == 1:
        return (int(scores.argmax()),)
    order = np.argsort(-scores, kind="stable")[:beam]
    return tuple(int(j) for j in order if scores[j] > 0) or (int(order[0]),)


def _rows(raw: list):
    """(bytes, src, dst, instances) of every activation as Python lists, in order: an entry of
    ``raw`` is one activation (1-D arrays) or a block of the compiled loop's (2-D, one row each)."""
    for x, src, dst, fam in raw:
        if x.ndim == 1:
            yield x.tolist(), src.tolist(), dst.tolist(), fam.tolist()
        else:
            yield from zip(x.tolist(), src.tolist(), dst.tolist(), fam.tolist())


def check_demand(demand, n: int) -> np.ndarray:
    d = np.asarray(demand)
    if d.shape != (n, n):
        raise SpecError(f"demand matrix has shape {d.shape}; it must be {n} x {n} for {n} ranks")
    if not np.issubdtype(d.dtype, np.number) or not np.all(np.isfinite(d)):
        raise SpecError("demand matrix must hold finite numbers of bytes")
    if (d < 0).any():
        raise SpecError("demand matrix has negative entries; volumes are bytes >= 0")
    if not np.issubdtype(d.dtype, np.integer):
        if not np.allclose(d, np.round(d)):
            raise SpecError("demand matrix must hold whole numbers of bytes")
        d = np.round(d)
    d = d.astype(np.int64)
    if np.diag(d).any():
        d = d.copy()
        np.fill_diagonal(d, 0)  # self traffic is handled locally (Section 2.3)
    return d
