"""Max-min fair sharing of capacities by flows, and the finish times it implies (flow-level model).

Concurrent transfers that cross a shared resource (a link, a PCIe attachment, a NIC port, a
rack's uplinks) share it max-min fairly: rates rise together by progressive filling until a
resource saturates; the flows crossing it are then frozen and the others keep rising. When a
flow finishes, the rates of everything it shared a resource with are recomputed. A flow may
put only a share of its bytes on a resource (``coefficient`` < 1: bytes spread over parallel
routes), so resource r constrains Σ_f a_fr · x_f ≤ c_r.

Flows are given as a sparse incidence (CSR: ``indptr``, ``indices`` = resource ids, ``data`` =
coefficients); a phase of a 512-rank one-shot all-reduce is ~260 000 flows over ~1 100
resources, so every step is a pair of sparse products. Used by the PCIe evaluator
(``fabrics.pcie.evaluator``, paper 000's contention model) and by the flow-level network model
of the scale-up fabrics (``fabrics.network.flow``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from collectives.errors import SpecError

SATURATED_REL = 1e-12  # a resource is saturated when its remaining capacity is below this share
FINISHED_REL = 1e-9  # a flow is finished when its remaining bytes are below this share


@dataclass(frozen=True, slots=True)
class Flows:
    """F flows over R resources: ``incidence`` (F x R, CSR, coefficients) and ``capacity_Bps`` (R)."""

    incidence: sparse.csr_matrix
    capacity_Bps: np.ndarray
    incidence_t: sparse.csr_matrix  # R x F, for the per-resource sums

    @staticmethod
    def from_rows(rows: list[list[int]], capacity_Bps: np.ndarray, coefficients: list[list[float]] | None = None) -> "Flows":
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        indptr[1:] = np.cumsum([len(r) for r in rows])
        indices = np.fromiter((c for r in rows for c in r), dtype=np.int64, count=int(indptr[-1]))
        data = (np.ones(indices.size) if coefficients is None
                else np.fromiter((a for r in coefficients for a in r), dtype=float, count=int(indptr[-1])))
        return Flows.from_csr(indptr, indices, data, capacity_Bps)

    @staticmethod
    def from_csr(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, capacity_Bps: np.ndarray) -> "Flows":
        cap = np.asarray(capacity_Bps, dtype=np.float64)
        inc = sparse.csr_matrix((np.asarray(data, dtype=np.float64), indices, indptr),
                                shape=(len(indptr) - 1, cap.size))
        return Flows(incidence=inc, capacity_Bps=cap, incidence_t=inc.T.tocsr())

    @property
    def count(self) -> int:
        return self.incidence.shape[0]


def maxmin_rates(flows: Flows, alive: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rates (bytes/s) of the ``alive`` flows by progressive filling (others: 0).

    A flow that crosses no resource is unconstrained: it is reported with rate 0 and skipped
    (callers give every flow at least one resource)."""
    inc, cap, incT = flows.incidence, flows.capacity_Bps, flows.incidence_t
    n = flows.count
    rate = np.zeros(n)
    alive = np.ones(n, dtype=bool) if alive is None else np.asarray(alive, dtype=bool)
    frozen = ~alive | (np.diff(inc.indptr) == 0)
    rem = cap.copy()
    floor = SATURATED_REL * np.maximum(cap, 1.0)
    while not frozen.all():
        load = incT @ (~frozen).astype(np.float64)  # Σ coefficients of the unfrozen flows, per resource
        used = load > 0
        delta = float((rem[used] / load[used]).min())
        rate[~frozen] += delta
        rem = rem - delta * load
        saturated = used & (rem <= floor)
        frozen |= (inc @ saturated.astype(np.float64)) > 0
    return rate


def finish_times(flows: Flows, size_bytes: np.ndarray) -> np.ndarray:
    """Finish time (s, from a common start) of every flow, rates recomputed whenever one finishes."""
    size = np.asarray(size_bytes, dtype=np.float64)
    remaining = size.copy()
    alive = remaining > 0
    finish = np.zeros(size.size)
    tolerance = FINISHED_REL * np.maximum(1.0, size)
    now = 0.0
    while alive.any():
        rates = maxmin_rates(flows, alive)
        if not (rates[alive] > 0).all():
            raise SpecError("a flow crosses no resource with capacity; every transfer needs a path")
        dt = float((remaining[alive] / rates[alive]).min())
        now += dt
        remaining[alive] -= rates[alive] * dt
        done = alive & (remaining <= tolerance)
        finish[done] = now
        remaining[done] = 0.0
        alive &= ~done
    return finish


def components(rows: list[list[int]]) -> list[list[int]]:
    """Flows that (transitively) share a resource; others never influence each other's rates."""
    parent = list(range(len(rows)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner: dict[int, int] = {}
    for f, cols in enumerate(rows):
        for c in cols:
            if c in owner:
                a, b = find(f), find(owner[c])
                if a != b:
                    parent[a] = b
            else:
                owner[c] = f
    comps: dict[int, list[int]] = {}
    for f in range(len(rows)):
        comps.setdefault(find(f), []).append(f)
    return list(comps.values())


__all__ = ["Flows", "maxmin_rates", "finish_times", "components"]
