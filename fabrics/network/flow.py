"""Flow-level network model (``network=flow``): the transfers of a phase share links max-min fairly.

The analytical model prices a schedule phase as the latency of its slowest path plus the bytes
of its most loaded shared capacity over that capacity (a bottleneck bound, paper 003 Eq. 10 /
Appendix C.2). The flow-level model keeps the same schedules, placements, circuits and path
latencies -- the deployment is prepared exactly as ``network=analytical`` prepares it -- and
replaces the bottleneck bound by what max-min fair sharing of those capacities gives: every
transfer is a flow over the capacities it crosses (accelerator injection and ejection over the
L sprayed ports; a rack's level-2 up/down capacity on all-EPS; hybrid rack-to-rack circuits,
its bytes spread over the shortest circuit routes; OCS accelerator-to-accelerator circuits),
rates rise together until a capacity saturates, and a phase ends when its last flow does
(``fabrics.network.maxmin``). A flow limited elsewhere leaves a bottleneck idle, so a phase is
never faster than the bottleneck bound; where every flow of a phase is alike (one-shot and
two-shot phases, OCS circuits) the two agree.

Completion times scale with the bytes (every rate is set by capacities, not sizes), so a
schedule on a fixed set of groups is still a line T(σ) = Σλ + σ·Σs (``ScheduleLine``), priced
once per call structure like the analytical model's. PCIe clusters run the same max-min sharing
over their PCIe / NIC / leaf-spine resources in ``fabrics.network.pcie.PcieNetwork``, which is
what ``network=flow`` builds there.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import sparse

from fabrics.network.analytical import FabricAnalytical
from fabrics.scaleup.native import PhaseArrays
from fabrics.network.maxmin import Flows, finish_times
from fabrics.network.protocol import NetworkReport, schedules_by_row
from fabrics.scaleup.phase_pricing import PhasePricer, ScheduleLine
from fabrics.scaleup.physical import EPS, OCS


class FlowPhasePricer(PhasePricer):
    """``PhasePricer`` whose phase time is max-min fair sharing instead of the bottleneck bound."""

    def phase_cost(self, src_rank: np.ndarray, dst_rank: np.ndarray, nbytes: np.ndarray) -> tuple[float, float]:
        latency_s, _ = super().phase_cost(src_rank, dst_rank, nbytes)  # slowest path; raises on a missing route
        sa, da = self.acc[src_rank], self.acc[dst_rank]
        keep = (sa != da) & (np.asarray(nbytes) > 0)
        if not keep.any():
            return latency_s, 0.0
        sa, da, size = sa[keep], da[keep], np.asarray(nbytes, dtype=float)[keep]
        flows = self.flows(sa, da)
        return latency_s, float(finish_times(flows, size).max())

    def flows(self, sa: np.ndarray, da: np.ndarray) -> Flows:
        """One flow per transfer (accelerator ids) over the capacities it crosses."""
        n, f = self.n_acc, np.arange(sa.size)
        if self.spec.level1_kind == OCS:
            slot, _ = self.ocs_slots(sa * n + da)  # connected: ``phase_cost`` checked every pair first
            return _compact(f, slot, np.ones(sa.size), self.circuit_cap, sa.size)
        flow_ids, res_ids, coefs = [f, f], [sa, n + da], [np.ones(sa.size), np.ones(sa.size)]
        caps = [np.full(2 * n, self.port_cap)]
        if self.spec.levels == 2:
            rs, rd = sa // self.rack_size, da // self.rack_size
            inter = np.flatnonzero(rs != rd)
            base = 2 * n
            if self.spec.level2_kind == EPS:
                k = self.racks
                flow_ids += [inter, inter]
                res_ids += [base + rs[inter], base + k + rd[inter]]
                coefs += [np.ones(inter.size), np.ones(inter.size)]
                caps.append(np.full(2 * k, self.uplink_cap))
            else:  # hybrid: a rack pair's bytes spread over its shortest circuit routes
                k = self.racks
                rows = sparse.csr_matrix(self.share)[rs[inter] * k + rd[inter]].tocoo()
                flow_ids.append(inter[rows.row])
                res_ids.append(base + rows.col)
                coefs.append(rows.data)
                caps.append(self.circuit_cap)
        return _compact(np.concatenate(flow_ids), np.concatenate(res_ids), np.concatenate(coefs),
                        np.concatenate(caps), sa.size)

    def _schedule_line(self, phases: Sequence[PhaseArrays], groups: np.ndarray) -> ScheduleLine:
        """Every phase expanded to its transfers on all groups (no rack-matrix aggregation: flows
        interact through more than the per-capacity sums the bottleneck bound needs)."""
        lat_total = per_byte = 0.0
        for ph in phases:
            if ph.src.size == 0:
                continue
            src = groups[:, ph.src].reshape(-1)
            dst = groups[:, ph.dst].reshape(-1)
            lat, ser = self.phase_cost(src, dst, np.tile(ph.fraction, groups.shape[0]))
            lat_total += lat
            per_byte += ser
        return ScheduleLine(latency_s=lat_total, seconds_per_byte=per_byte, phases=len(phases))


def _compact(flow_ids: np.ndarray, res_ids: np.ndarray, coefs: np.ndarray, caps: np.ndarray, n_flows: int) -> Flows:
    """CSR flows over only the resources some flow crosses (ids renumbered densely)."""
    used, local = np.unique(res_ids, return_inverse=True)
    order = np.argsort(flow_ids, kind="stable")
    indptr = np.zeros(n_flows + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(flow_ids, minlength=n_flows))
    return Flows.from_csr(indptr, local[order], coefs[order], caps[used])


class FabricFlow(FabricAnalytical):
    """The flow-level model on a scale-up fabric: the analytical model's deployment (placement,
    circuits, schedule choice) with every phase priced by max-min sharing (``FlowPhasePricer``)."""

    name = "flow"

    def __init__(self, fabric, **kwargs):
        super().__init__(fabric, **kwargs)
        self._flow_pricers: dict[int, tuple[object, FlowPhasePricer]] = {}  # id(deployment) -> pricer

    def pricer(self):
        dep = self.deployment
        hit = self._flow_pricers.get(id(dep))
        if hit is None or hit[0] is not dep:
            hit = self._flow_pricers[id(dep)] = (dep, FlowPhasePricer(dep.routed))
            while len(self._flow_pricers) > 4:
                self._flow_pricers.pop(next(iter(self._flow_pricers)))
        return hit[1]

    def report(self) -> NetworkReport:
        return NetworkReport(model=self.name, schedules=schedules_by_row(self.schedules_used),
                             plan_summary=self.plan_summary(), plan_json=self.plan_json)


__all__ = ["FabricFlow", "FlowPhasePricer"]
