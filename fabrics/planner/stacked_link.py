"""Stacked-link allocation (paper 003, Appendix A.6): each axis gets its own ports.

Axis i receives L_i ports, Σ L_i ≤ L: one port each, the rest in proportion to the
full-connectivity degree N_i − 1, rounded by largest remainder (never beyond N_i − 1). If
Σ (N_i − 1) ≤ L every axis is fully connected and the leftover ports become parallel circuits
(given greedily to the axis whose Σ w·T drops most). Each axis becomes the circulant Cayley
graph on Z_{N_i} of degree L_i with the smallest diameter found: exhaustive over offset sets
for small axes, a deterministic sample for large ones (a heuristic, as in the paper). Since a
circulant is not a cube, only the one-shot schedules run on it.
"""

from __future__ import annotations

import math
import random
from itertools import combinations

from collectives.errors import SpecError
from collectives.topology import CirculantTopology, invariants
from fabrics.planner.axis_cost import price_axis
from fabrics.planner.request import NO_COLLECTIVE, PlanRequest, request_hash
from fabrics.planner.shared_host import AxisPlan, Plan

ONE_SHOT_SCHEDULES = {"allreduce": ("one_shot", "one_shot_dvo"), "alltoall": ("direct",),
                      "allgather": ("one_shot", "direct"), "reducescatter": ("one_shot", "direct")}
EXHAUSTIVE_LIMIT = 3000
SAMPLES = 400

_CIRCULANTS: dict[tuple[int, int], CirculantTopology | None] = {}  # keyed by (n, degree); safe to clear


def clear_circulant_cache() -> None:
    _CIRCULANTS.clear()


def port_split(sizes: list[int], ports: int) -> list[int]:
    """L_i: one each, the rest ∝ N_i − 1 by largest remainder, capped at N_i − 1."""
    k = len(sizes)
    if ports < k:
        raise SpecError(f"stacked-link allocation needs at least one port per axis ({k}) but ports={ports}")
    full = [n - 1 for n in sizes]
    if sum(full) <= ports:
        return full
    share = [1] * k
    rest = ports - k
    need = [f - 1 for f in full]
    total = sum(need)
    quotas = [rest * nd / total for nd in need]
    base = [min(int(math.floor(q)), nd) for q, nd in zip(quotas, need)]
    left = rest - sum(base)
    order = sorted(range(k), key=lambda i: (-(quotas[i] - math.floor(quotas[i])), i))
    for i in order:
        if left == 0:
            break
        if base[i] < need[i]:
            base[i] += 1
            left -= 1
    return [s + b for s, b in zip(share, base)]


def best_circulant(n: int, degree: int) -> CirculantTopology | None:
    """Minimum-diameter circulant on Z_n of the given degree (offset 1 always in, for connectivity)."""
    key = (n, degree)
    if key in _CIRCULANTS:
        return _CIRCULANTS[key]
    result = None
    degree = min(degree, n - 1)
    half = n // 2 if n % 2 == 0 else None
    if n == 2:
        result = CirculantTopology(n=2, offsets=(1,))
    elif degree >= 2:
        uses_half = half is not None and degree % 2 == 1
        k = (degree - (1 if uses_half else 0)) // 2  # ± pairs, offset 1 included
        pool = [o for o in range(2, (n - 1) // 2 + 1)]
        fixed = (1,) + ((half,) if uses_half else ())
        choose = k - 1
        if 0 <= choose <= len(pool):
            if math.comb(len(pool), choose) <= EXHAUSTIVE_LIMIT:
                candidates = combinations(pool, choose)
            else:
                rng = random.Random(n * 1000 + degree)  # deterministic sample
                candidates = (tuple(sorted(rng.sample(pool, choose))) for _ in range(SAMPLES))
            best = None
            for extra in candidates:
                topo = CirculantTopology(n=n, offsets=fixed + tuple(extra))
                d = invariants(topo).diameter
                if best is None or d < best[0]:
                    best = (d, topo)
            result = None if best is None else best[1]
    _CIRCULANTS[key] = result
    return result


def stacked_link_plan(req: PlanRequest) -> Plan:
    axes = [(m, i, size, mesh.collectives[i], mesh.payloads_bytes[i], mesh.weights[i], mesh.schedules[i])
            for m, mesh in enumerate(req.meshes) for i, size in enumerate(mesh.shape)]
    active = [ax for ax in axes if ax[3] != NO_COLLECTIVE and ax[4] > 0 and ax[5] > 0]
    if not active:
        raise SpecError("no mesh axis carries a collective with a positive payload; nothing to plan")
    split = port_split([ax[2] for ax in active], req.ports)
    topos, prices = [], []
    for ax, li in zip(active, split):
        topo = best_circulant(ax[2], li)
        if topo is None:
            raise SpecError(f"an axis of {ax[2]} ranks cannot be connected with {li} port(s) in stacked-link "
                            "allocation; raise ports")
        topos.append(topo)

    def axis_price(j: int, p: int):
        m, i, size, coll, sigma, w, sched = active[j]
        names = ONE_SHOT_SCHEDULES.get(coll, ()) if sched == "auto" else (sched,)
        best = None
        for name in names:
            pr = price_axis(topos[j], coll, sigma, p=p, hop_latency_s=req.hop_latency_s,
                            link_rate_Bps=req.link_rate_Bps, schedule=name)
            if pr is not None and (best is None or pr.time_s < best.time_s):
                best = pr
        if best is None:
            raise SpecError(f"no one-shot {coll} schedule runs on the circulant of axis {i} of mesh {m}")
        return best

    ps = [1] * len(active)
    used = sum(split)
    while True:  # leftover ports become parallel circuits
        best = None
        for j in range(len(active)):
            cost = split[j]
            if used + cost > req.ports:
                continue
            gain = active[j][5] * (axis_price(j, ps[j]).time_s - axis_price(j, ps[j] + 1).time_s)
            if gain > 1e-15 and (best is None or gain > best[0]):
                best = (gain, j)
        if best is None:
            break
        ps[best[1]] += 1
        used += split[best[1]]
    plans = []
    by_key = {(ax[0], ax[1]): j for j, ax in enumerate(active)}
    for m, i, size, coll, sigma, w, sched in axes:
        j = by_key.get((m, i))
        if j is None:
            plans.append(AxisPlan(mesh=m, axis=i, size=size, bits=(), collective=coll, payload_bytes=sigma, weight=w,
                                  topology="none", degree=0, phases=0, multiplicity=0, schedule="none", time_s=0.0,
                                  volume="0"))
            continue
        pr = axis_price(j, ps[j])
        plans.append(AxisPlan(mesh=m, axis=i, size=size, bits=(), collective=coll, payload_bytes=sigma, weight=w,
                              topology=topos[j].describe(), degree=topos[j].degree, phases=pr.h, multiplicity=ps[j],
                              schedule=pr.schedule, time_s=pr.time_s, volume=str(pr.v)))
    return Plan(request_hash=request_hash(req), allocation="stacked_link", world=req.world, ports=req.ports,
                total_time_s=sum(a.weight * a.time_s for a in plans), host_degree=sum(split),
                ports_used=used, axes=tuple(plans),
                meta={"port_split": split})
