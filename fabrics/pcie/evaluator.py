"""Contention-aware flow-level evaluator: any AlltoAllv schedule on the PCIe model (paper 000, Sections 2-3).

Activations run one after another (the execution model of Eq. 2): each starts after the previous
one's last lane finished, pays the fixed per-activation overhead λ, then runs all its lanes at
once. Lanes share every directed resource they cross (GPU attachments, PCIe links, NIC ports,
leaf uplinks) max-min fairly (progressive filling); whenever a lane finishes, the rates of the
lanes it shared resources with are recomputed. A contention-free channel therefore runs each
lane at bw(p), and a baseline's contention (several flows on one PXB link, Figure 1a) shows.

Metrics as nccl-tests and the paper define them (Section 6, "Metrics"): completion is the last
rank's finish; algbw = total payload / (N * completion) (per-rank payload over time, averaged);
busbw = algbw * (N - 1) / N (nccl-tests' all-to-all bus factor).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collectives.alltoallv.activations import AlltoallvSchedule, Lane
from collectives.errors import SpecError
from fabrics.network.maxmin import Flows, components, finish_times
from fabrics.network.maxmin import maxmin_rates as flow_rates


def maxmin_rates(incidence: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Max-min fair rates of F flows over R resources (dense incidence F x R, 0/1) by progressive filling."""
    inc = np.asarray(incidence, dtype=np.float64)
    rows, cols = np.nonzero(inc)
    indptr = np.searchsorted(rows, np.arange(inc.shape[0] + 1))
    return flow_rates(Flows.from_csr(indptr, cols, inc[rows, cols], np.asarray(cap, dtype=np.float64)))


def _lane_flows(lanes, capacity: dict[str, float]) -> tuple[list[list[int]], np.ndarray]:
    """Resource rows of the lanes (ids in first-seen order) and the capacity of every id."""
    index: dict[str, int] = {}
    rows = [list(dict.fromkeys(index.setdefault(r, len(index)) for r in lane.path.resources)) for lane in lanes]
    for r in index:
        if r not in capacity:
            raise SpecError(f"resource {r!r} of a lane is not in the platform model; was the schedule built for another platform?")
    return rows, np.array([capacity[r] for r in index], dtype=np.float64)


def stage_rates(lanes: list[Lane] | tuple[Lane, ...], capacity: dict[str, float]) -> np.ndarray:
    """Max-min rates of the lanes of one stage, all starting together (Figure 1's modelled rates)."""
    rows, cap = _lane_flows(lanes, capacity)
    return flow_rates(Flows.from_rows(rows, cap))


def run_stage(lanes, capacity: dict[str, float]) -> np.ndarray:
    """Finish time (s, from the stage start) of every lane of one stage under max-min sharing;
    lanes that share no resource (even transitively) are solved apart."""
    lanes = list(lanes)
    rows, cap = _lane_flows(lanes, capacity)
    finish = np.zeros(len(lanes))
    for comp in components(rows):
        if len(comp) == 1:
            f = comp[0]
            finish[f] = lanes[f].bytes / cap[rows[f]].min()
            continue
        cols = sorted({c for f in comp for c in rows[f]})
        local = {c: k for k, c in enumerate(cols)}
        flows = Flows.from_rows([[local[c] for c in rows[f]] for f in comp], cap[cols])
        finish[comp] = finish_times(flows, np.array([float(lanes[f].bytes) for f in comp]))
    return finish


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    completion_s: float
    activation_s: tuple[float, ...]
    rank_finish_s: tuple[float, ...]
    total_bytes: int
    algbw_Bps: float
    busbw_Bps: float

    def to_json(self) -> dict:
        return {"completion_s": self.completion_s, "algbw_Bps": self.algbw_Bps, "busbw_Bps": self.busbw_Bps,
                "total_bytes": self.total_bytes, "rank_finish_s": list(self.rank_finish_s),
                "activation_s": list(self.activation_s)}


def evaluate(schedule: AlltoallvSchedule, capacity: dict[str, float], overhead_s: float = 0.0) -> Evaluation:
    if overhead_s < 0:
        raise SpecError(f"activation overhead {overhead_s} s must be non-negative")
    n = schedule.n_ranks
    rank_finish = np.zeros(n)
    durations = []
    t = 0.0
    for act in schedule.activations:
        lanes = [l for l in act.lanes if l.bytes > 0]
        if not lanes:
            continue
        finish = run_stage(lanes, capacity)
        for lane, f in zip(lanes, finish):
            end = t + overhead_s + f
            rank_finish[lane.src] = max(rank_finish[lane.src], end)
            rank_finish[lane.dst] = max(rank_finish[lane.dst], end)
        d = overhead_s + float(finish.max())
        durations.append(d)
        t += d
    total = int(np.asarray(schedule.demand).sum())
    algbw = total / (n * t) if t > 0 else 0.0
    return Evaluation(completion_s=t, activation_s=tuple(durations), rank_finish_s=tuple(rank_finish.tolist()),
                      total_bytes=total, algbw_Bps=algbw, busbw_Bps=algbw * (n - 1) / n)
