"""The MILP optimum of the channel model (paper 000, Section 6.3), certified by HiGHS.

What is optimised (the same model VarioPath plans for, so the comparison is apples to apples):
a schedule is a sequence of activations; activation k runs a contention-free channel C_k
(a partial permutation of peers, one concrete path per lane, no modelled shared resource used
twice, Eq. 1) for t_k seconds, each lane moving at most t_k * bw(p) bytes; the activations
together must deliver D exactly (Σ X(E_k) = D). Minimise T = Σ_k t_k (Eq. 2 with λ = 0), over
peers, paths, volumes and the number and order of activations (without relays the order does
not change T). Volumes are continuous in the optimisation and rounded to whole bytes after.

Solved exactly by Dantzig-Wolfe column generation, each column a channel:
- master LP (HiGHS via scipy.optimize.linprog): min Σ_C w_C  s.t.  Σ_C w_C bw_C(i,j) >= D_ij;
- pricing MILP (HiGHS via scipy.optimize.milp): the channel maximising Σ π_ij bw(p) y_ijp over
  binary lane choices y with <= 1 lane out of and into every rank and <= 1 lane per shared
  resource, where π are the master's duals. No column with value > 1 means the LP (hence the
  whole MILP) is optimal; the Farley bound z / max(1, best pricing value) is a certified lower
  bound at every iteration, and the relative gap between the two is the certificate recorded.
The pool is seeded with one single-lane channel per pair (feasibility) and, when given, the
channels of a heuristic schedule (warm start).
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp
from scipy.sparse import coo_matrix

from collectives.alltoallv.activations import Activation, AlltoallvSchedule, Lane
from collectives.alltoallv.channels import ChannelTopology
from collectives.alltoallv.variopath import check_demand
from collectives.errors import SpecError


class MilpOptimum:
    name = "milp"

    def __init__(self, topology: ChannelTopology, *, max_ranks: int = 16, max_iterations: int = 2000,
                 time_limit_s: float = 120.0, gap_tolerance: float = 1e-6, warm_start=None):
        if topology.n_ranks > max_ranks:
            raise SpecError(f"milp on {topology.n_ranks} ranks exceeds max_ranks={max_ranks}; the MILP is for small "
                            f"instances (use nodes=1 or raise scheduler.max_ranks)")
        self.topology, self.max_iterations, self.time_limit_s, self.tol = topology, max_iterations, time_limit_s, gap_tolerance
        self.warm_start = warm_start  # optional callable demand -> AlltoallvSchedule whose channels seed the pool

    def plan(self, demand) -> AlltoallvSchedule:
        t0 = time.perf_counter()
        topo, n = self.topology, self.topology.n_ranks
        demand = check_demand(demand, n)
        pairs = [(i, j) for i in range(n) for j in range(n) if demand[i, j] > 0]
        if not pairs:
            return AlltoallvSchedule(scheduler=self.name, platform=topo.name, n_ranks=n, demand=demand,
                                     activations=(), channels=True, meta={"certificate": {"status": "optimal", "gap": 0.0}})
        row = {p: k for k, p in enumerate(pairs)}
        d = np.array([demand[p] for p in pairs], dtype=np.float64)
        # pricing variables: every (pair, path option)
        var = [(i, j, p) for (i, j) in pairs for p in topo.options(i, j)]
        rate = np.array([p.rate_Bps for _, _, p in var])
        res_index: dict[str, int] = {}
        r_rows, r_cols = [], []
        for v, (i, j, p) in enumerate(var):
            r_rows += [i, n + j]
            r_cols += [v, v]
            for s in p.shared:
                r_rows.append(2 * n + res_index.setdefault(s, len(res_index)))
                r_cols.append(v)
        a_price = coo_matrix((np.ones(len(r_rows)), (r_rows, r_cols)), shape=(2 * n + len(res_index), len(var))).tocsr()
        price_cons = LinearConstraint(a_price, -np.inf, 1.0)
        var_row = np.array([row[(i, j)] for i, j, _ in var])

        columns: list[tuple[int, ...]] = []  # channel = tuple of pricing-variable indices
        seen: set = set()

        def add(col):
            col = tuple(sorted(col))
            if col and col not in seen:
                seen.add(col)
                columns.append(col)

        for (i, j) in pairs:  # single-lane channels on the fastest path: always feasible
            best = max((v for v in range(len(var)) if var[v][0] == i and var[v][1] == j), key=lambda v: rate[v])
            add((best,))
        if self.warm_start is not None:
            lookup = {(i, j, p.kind, p.resources): v for v, (i, j, p) in enumerate(var)}
            for act in self.warm_start(demand).activations:
                add([lookup[(l.src, l.dst, l.path.kind, l.path.resources)] for l in act.lanes
                     if (l.src, l.dst, l.path.kind, l.path.resources) in lookup])

        status, lower, z, it, w = "iteration_limit", 0.0, np.inf, 0, None
        price_time = 0.0
        while it < self.max_iterations:
            it += 1
            a = np.zeros((len(pairs), len(columns)))
            for c, col in enumerate(columns):
                for v in col:
                    a[var_row[v], c] += rate[v]
            lp = linprog(np.ones(len(columns)), A_ub=-a, b_ub=-d, bounds=(0, None), method="highs")
            if lp.status != 0:
                raise RuntimeError(f"master LP failed: {lp.message}")
            z, w = float(lp.fun), lp.x
            pi = -lp.ineqlin.marginals  # duals of the coverage rows, >= 0
            tp = time.perf_counter()
            pr = milp(c=-(pi[var_row] * rate), constraints=price_cons, integrality=np.ones(len(var)),
                      bounds=Bounds(0, 1), options={"disp": False})
            price_time += time.perf_counter() - tp
            if pr.status != 0:
                raise RuntimeError(f"pricing MILP failed: {pr.message}")
            value = -float(pr.fun)
            lower = max(lower, z / max(1.0, value))  # Farley bound
            if value <= 1.0 + self.tol:
                status = "optimal"
                break
            if time.perf_counter() - t0 > self.time_limit_s:
                status = "time_limit"
                break
            add(np.flatnonzero(pr.x > 0.5).tolist())
        gap = 0.0 if status == "optimal" else (z - lower) / z

        # volumes: each pair's demand split over the channels in proportion to the capacity they
        # give it (so no activation runs longer than its w_C), rounded to whole bytes
        used = [c for c in range(len(w)) if w[c] > 1e-15]  # columns priced after the last LP are unused
        cap = np.zeros((len(pairs), len(used)))
        for k, c in enumerate(used):
            for v in columns[c]:
                cap[var_row[v], k] += w[c] * rate[v]
        share = cap / np.maximum(cap.sum(axis=1, keepdims=True), 1e-300) * d[:, None]
        vol = np.floor(share).astype(np.int64)
        short = (d.astype(np.int64) - vol.sum(axis=1))
        for r in np.flatnonzero(short):
            order = np.argsort(-(share[r] - vol[r]))
            vol[r, order[: short[r]]] += 1
        acts = []
        for k, c in enumerate(used):
            lanes = []
            for v in columns[c]:
                i, j, p = var[v]
                if vol[row[(i, j)], k] > 0:
                    lanes.append(Lane(src=i, dst=j, path=p, bytes=int(vol[row[(i, j)], k])))
            acts.append(Activation(lanes=tuple(lanes)))
        planning_s = time.perf_counter() - t0
        cert = {"status": status, "objective_s": z, "lower_bound_s": lower, "gap": gap, "iterations": it,
                "columns": len(columns), "pricing_s": price_time, "solver": "HiGHS (scipy linprog + milp)"}
        return AlltoallvSchedule(scheduler=self.name, platform=topo.name, n_ranks=n, demand=demand,
                                 activations=tuple(a for a in acts if a.lanes), channels=True,
                                 meta={"planning_s": planning_s, "certificate": cert,
                                       "planning_s_per_activation": planning_s / max(1, len(acts))})
