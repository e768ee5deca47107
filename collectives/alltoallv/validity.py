"""Schedule validity (paper 000, Section 3): Σ_k X(E_k) = D exactly, every channel contention-free.

Checked for every schedule of every scheduler before anything times it:

- ``demand_exact``: following each commodity (origin, final) through the activations, exactly
  D[o, f] bytes end at f and nothing is left anywhere else (relays included);
- ``causal``: a relay forwards only bytes it received in an *earlier* activation;
- ``paths_known``: every lane uses one of the topology's path options of its (src, dst);
- ``endpoint_disjoint`` / ``contention_free``: within an activation every rank has at most one
  outgoing and one incoming lane and no modelled shared resource (U) is used twice (Eq. 1).

Schedulers that claim channels (VarioPath, the ablations, the MILP) must satisfy all five;
baselines that execute contending flows (NCCL-like, FAST-like, DeepEP-like) must satisfy the
first three, and their contention is what the flow-level evaluator then shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collectives.alltoallv.activations import AlltoallvSchedule
from collectives.alltoallv.channels import ChannelTopology


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidityReport:
    claims_channels: bool
    demand_exact: bool
    causal: bool
    paths_known: bool
    endpoint_disjoint: bool
    contention_free: bool
    problems: tuple[str, ...]

    @property
    def valid(self) -> bool:
        base = self.demand_exact and self.causal and self.paths_known
        return base and (not self.claims_channels or (self.endpoint_disjoint and self.contention_free))

    def to_json(self) -> dict:
        return {"valid": self.valid, "claims_channels": self.claims_channels, "demand_exact": self.demand_exact,
                "causal": self.causal, "paths_known": self.paths_known, "endpoint_disjoint": self.endpoint_disjoint,
                "contention_free": self.contention_free, "problems": list(self.problems[:10])}


def check_schedule(schedule: AlltoallvSchedule, topology: ChannelTopology) -> ValidityReport:
    demand = np.asarray(schedule.demand, dtype=np.int64)
    problems: list[str] = []
    known = {k: {(p.kind, p.resources) for p in v} for k, v in topology.paths.items()}
    paths_known = endpoint_disjoint = contention_free = causal = True
    relays = any(l.origin >= 0 or l.final >= 0 for a in schedule.activations for l in a.lanes)
    served = np.zeros_like(demand)
    holdings: dict[tuple[int, int], dict[int, int]] = {}

    for k, act in enumerate(schedule.activations):
        senders: set[int] = set()
        receivers: set[int] = set()
        used: set[str] = set()
        moves = []
        for lane in act.lanes:
            if lane.bytes < 0:
                problems.append(f"activation {k}: lane {lane.src}->{lane.dst} has negative bytes")
                causal = False
            if (lane.path.kind, lane.path.resources) not in known.get((lane.src, lane.dst), ()):
                paths_known = False
                problems.append(f"activation {k}: lane {lane.src}->{lane.dst} uses a path not in the topology")
            if lane.path.src != lane.src or lane.path.dst != lane.dst:
                paths_known = False
            if lane.bytes == 0:
                continue
            if lane.src in senders or lane.dst in receivers:
                endpoint_disjoint = False
            senders.add(lane.src)
            receivers.add(lane.dst)
            clash = used.intersection(lane.path.shared)
            if clash:
                contention_free = False
                if schedule.channels:
                    problems.append(f"activation {k}: shared resource {sorted(clash)[0]} used twice")
            used.update(lane.path.shared)
            if relays:
                moves.append(lane)
            else:
                served[lane.src, lane.dst] += lane.bytes
        if relays:
            # All lanes of an activation start together: a relay can only send what it held before.
            for lane in moves:
                o, f = lane.commodity
                h = holdings.setdefault((o, f), {o: int(demand[o, f])})
                have = h.get(lane.src, 0)
                if lane.bytes > have:
                    causal = False
                    problems.append(f"activation {k}: rank {lane.src} forwards {lane.bytes} B of ({o}->{f}) but holds {have}")
            for lane in moves:
                h = holdings[lane.commodity]
                h[lane.src] = h.get(lane.src, 0) - lane.bytes
                h[lane.dst] = h.get(lane.dst, 0) + lane.bytes

    if relays:
        for (o, f), h in holdings.items():
            served[o, f] = h.get(f, 0) if o != f else 0
            stranded = {r: v for r, v in h.items() if r not in (f, o) and v != 0}
            if stranded:
                causal = False
                problems.append(f"commodity {o}->{f}: {sum(stranded.values())} B stranded at relays {sorted(stranded)}")
    diff = served - demand
    np.fill_diagonal(diff, 0)
    demand_exact = not diff.any() and not np.diag(served).any()
    if not demand_exact:
        bad = np.argwhere(diff != 0)[:3]
        for i, j in bad:
            problems.append(f"pair {i}->{j}: served {served[i, j]} B of demand {demand[i, j]} B")
    return ValidityReport(claims_channels=schedule.channels, demand_exact=bool(demand_exact), causal=causal,
                          paths_known=paths_known, endpoint_disjoint=endpoint_disjoint,
                          contention_free=contention_free, problems=tuple(problems))
