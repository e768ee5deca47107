"""Vectorised phase pricing on a routed fabric (paper 003, Eq. 10 / Appendix C.2, Section 5.4).

``RoutedFabric.phase_cost`` is the reference: a phase costs the latency of its slowest path plus
the bytes on its most loaded shared capacity over that capacity's bandwidth (accelerator
injection/ejection over all L sprayed ports; a rack's level-2 up/down capacity L·up·R — the 4:1
oversubscription of all-EPS; hybrid rack-to-rack circuits; OCS accelerator-to-accelerator
circuits). It walks transfers one by one in Python; a 512-rank one-shot all-reduce has 261 632 of
them. ``PhasePricer`` computes the same quantity with numpy over transfer arrays (bincounts per
capacity), and ``tests/unit/test_fabric_network_pricing.py`` checks equality with ``phase_cost``
on every fabric kind.

Bytes are linear in σ (every transfer carries fraction·σ), so the bottleneck capacity of a phase
does not depend on σ: a schedule on a fixed set of groups prices as T(σ) = Σ_k λ_k + σ·Σ_k s_k
(``ScheduleLine``), computed once and evaluated at any payload — what lets 128 identical layers
cost one pricing (Section 5.4).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from collectives.errors import SpecError
from fabrics.scaleup.native import PhaseArrays
from fabrics.scaleup.ocs_configuration import ONE_PASS, THREE_PASSES
from fabrics.scaleup.physical import EPS, OCS
from fabrics.scaleup.paths import RoutedFabric


@dataclass(frozen=True, slots=True)
class ScheduleLine:
    """T(σ) = latency_s + seconds_per_byte·σ for one schedule on one set of groups."""

    latency_s: float
    seconds_per_byte: float
    phases: int

    def time_s(self, sigma_bytes: float) -> float:
        return self.latency_s + self.seconds_per_byte * sigma_bytes


_AGGREGATE_ABOVE = 8192  # transfers per phase (all groups) above which EPS phases are priced by rack matrices

# Explicit keyed cache (DESIGN.md): a phase's local byte / transfer-count matrices, by phase object
# (held in the value so its id cannot be reused); bounded, least recently used dropped first.
_LOCAL_MATRICES: "OrderedDict[int, tuple]" = OrderedDict()
_LOCAL_MATRICES_KEEP = 256


def clear_phase_cache() -> None:
    _LOCAL_MATRICES.clear()


def _local_matrices(ph: PhaseArrays, n: int):
    """(bytes out per local rank, bytes in, n×n bytes, n×n transfer counts) of one phase in a group
    of n ranks, self transfers dropped; None when nothing moves."""
    hit = _LOCAL_MATRICES.get(id(ph))
    if hit is not None and hit[0] is ph and hit[1] == n:
        _LOCAL_MATRICES.move_to_end(id(ph))
        return hit[2]
    keep = ph.src != ph.dst  # ranks of a group are distinct: a self transfer is the only local one
    s, d, f = ph.src[keep], ph.dst[keep], ph.fraction[keep].astype(float)
    if s.size == 0:
        out = None
    else:
        cell = s * n + d
        count = np.bincount(cell, minlength=n * n).reshape(n, n).astype(float)
        # one-shot / direct / two-shot phases: every ordered pair once, the same fraction each
        uniform = s.size == n * (n - 1) and f.min() == f.max() and bool((count + np.eye(n) == 1.0).all())
        out = (np.bincount(s, weights=f, minlength=n), np.bincount(d, weights=f, minlength=n),
               np.bincount(cell, weights=f, minlength=n * n).reshape(n, n), count,
               float(f[0]) if uniform else None)
    _LOCAL_MATRICES[id(ph)] = (ph, n, out)
    while len(_LOCAL_MATRICES) > _LOCAL_MATRICES_KEEP:
        _LOCAL_MATRICES.popitem(last=False)
    return out


# (fabric, hybrid rack circuits) -> (circuit capacities, route shares, pair latencies): they depend
# on the level-2 circuits only, not on the allocation, and a hybrid search's many placements land
# on a few circuit sets. Explicit, keyed, bounded; clear() is always safe.
_RACK_TABLES: dict = {}
_RACK_TABLES_KEEP = 64


class PhasePricer:
    """Prices phases given as global-rank arrays on one ``RoutedFabric`` (equal to ``phase_cost``)."""

    def __init__(self, routed: RoutedFabric):
        self.routed = routed
        self._lines: dict[tuple, tuple] = {}
        spec = routed.spec
        self.spec = spec
        self.acc = np.asarray(routed.allocation.accelerators, dtype=np.int64)
        self.n_acc = spec.accelerators
        R, L = spec.link_rate_Bps, spec.ports
        lat = spec.latency
        if spec.level1_kind == OCS:
            self._init_ocs(routed)
            return
        self.port_cap = L * R  # injection / ejection, sprayed over all rails
        self.rack_size = spec.rack_size
        self.racks = spec.racks
        self.intra_latency_s = lat.path_latency_s(eps_hops=1, ocs_passes=0, level2_cables=0)
        if spec.levels == 2 and spec.level2_kind == EPS:
            self.uplink_cap = L * spec.up_ports * R
            self.inter_latency_s = lat.path_latency_s(eps_hops=3, ocs_passes=0, level2_cables=2)
        elif spec.levels == 2:
            self._init_hybrid(routed)

    # -- set-up -------------------------------------------------------------------------------
    def _init_hybrid(self, routed: RoutedFabric) -> None:
        """Per rack pair: latency of its shortest circuit route and the share of its bytes on every
        rack circuit (``RoutedFabric.crossings``), as a dense (racks², racks²) matrix."""
        key = (id(routed.fabric), routed.ocs.rack.targets)
        hit = _RACK_TABLES.get(key)
        if hit is None or hit[0] is not routed.fabric:
            hit = _RACK_TABLES[key] = (routed.fabric, *self._rack_tables(routed))
            while len(_RACK_TABLES) > _RACK_TABLES_KEEP:
                _RACK_TABLES.pop(next(iter(_RACK_TABLES)))
        _, self.circuit_cap, self.share, self.pair_latency_s = hit

    def _rack_tables(self, routed: RoutedFabric) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = self.racks
        spec, L, R = self.spec, self.spec.ports, self.spec.link_rate_Bps
        counts = routed.ocs.rack.counts(k)
        circuit_cap = (L * R * counts).reshape(-1).astype(float)
        share = np.zeros((k * k, k * k))
        pair_latency_s = np.full(k * k, np.inf)
        for r in range(k):
            for s in range(k):
                if r == s:
                    continue
                routes = routed._rack_route(r, s)
                if not routes:
                    continue
                hops = len(routes[0])
                pair_latency_s[r * k + s] = spec.latency.path_latency_s(
                    eps_hops=hops + 1, ocs_passes=hops, level2_cables=2 * hops)
                for route in routes:
                    rack = r
                    for _, nxt in route:
                        share[r * k + s, rack * k + nxt] += 1.0 / len(routes)
                        rack = nxt
        for a in (circuit_cap, share, pair_latency_s):
            a.flags.writeable = False  # shared by the pricers of every allocation on these circuits
        return circuit_cap, share, pair_latency_s

    def _init_ocs(self, routed: RoutedFabric) -> None:
        """Circuits and path latency (fewest passes) of every ordered accelerator pair the OCS
        configuration connects, as arrays sorted by pair id a·n + b (``ocs_pairs``). Dense n² tables
        would be 6 MiB per pricer on 512 accelerators, zeroed page by page, for the few thousand
        pairs a configuration connects."""
        n = self.n_acc
        table = routed._circuits
        ocs = routed.ocs
        latency = self.spec.latency.path_latency_s
        if ocs is not None and ocs.circuit_arrays is not None and table is ocs.circuit_table:
            src, dst, counts, local = ocs.circuit_arrays  # one entry per pair
            one, three = (latency(eps_hops=h[0], ocs_passes=h[1], level2_cables=h[2]) for h in (ONE_PASS, THREE_PASSES))
            pairs, lat = src * n + dst, np.where(local, one, three)
        elif table:
            pairs = np.fromiter((a * n + b for a, b in table), dtype=np.int64, count=len(table))
            counts = np.fromiter((c for c, _ in table.values()), dtype=np.int64, count=len(table))
            by_hops = {h: latency(eps_hops=h[0], ocs_passes=h[1], level2_cables=h[2])
                       for h in {h for _, h in table.values()}}
            lat = np.fromiter((by_hops[h] for _, h in table.values()), dtype=float, count=len(table))
        else:
            pairs, counts, lat = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
        order = np.argsort(pairs, kind="stable")
        self.ocs_pairs = np.asarray(pairs, dtype=np.int64)[order]
        self.circuits = np.asarray(counts, dtype=np.int64)[order]
        self.ocs_latency_s = np.asarray(lat, dtype=float)[order]
        self.circuit_cap = self.circuits * self.spec.link_rate_Bps

    def ocs_slots(self, pair: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index into ``ocs_pairs`` of each pair id, whether the configuration connects it)."""
        if self.ocs_pairs.size == 0:
            return np.zeros(pair.shape, dtype=np.int64), np.zeros(pair.shape, dtype=bool)
        slot = np.minimum(np.searchsorted(self.ocs_pairs, pair), self.ocs_pairs.size - 1)
        return slot, self.ocs_pairs[slot] == pair

    # -- pricing ------------------------------------------------------------------------------
    def phase_cost(self, src_rank: np.ndarray, dst_rank: np.ndarray, nbytes: np.ndarray) -> tuple[float, float]:
        """(latency of the slowest path, bottleneck seconds) of one phase; ranks are global."""
        sa, da = self.acc[src_rank], self.acc[dst_rank]
        keep = sa != da
        if not keep.all():
            sa, da, nbytes = sa[keep], da[keep], nbytes[keep]
        if sa.size == 0:
            return 0.0, 0.0
        if self.spec.level1_kind == OCS:
            slot, connected = self.ocs_slots(sa * self.n_acc + da)
            if not connected.all():
                bad = int(np.flatnonzero(~connected)[0])
                raise SpecError(f"no circuit from accelerator {int(sa[bad])} to {int(da[bad])} on {self.spec.kind}; "
                                "the schedule uses an edge the OCS plan did not configure")
            lat = self.ocs_latency_s[slot]
            # bytes per pair the phase uses (slots ascend with pair ids: the same groups, the same sums)
            pairs, inverse = np.unique(slot, return_inverse=True)
            load = np.bincount(inverse, weights=nbytes, minlength=len(pairs))
            used = load > 0
            return float(lat.max()), float((load[used] / self.circuit_cap[pairs[used]]).max(initial=0.0))
        worst = max(np.bincount(sa, weights=nbytes).max(), np.bincount(da, weights=nbytes).max()) / self.port_cap
        rs, rd = sa // self.rack_size, da // self.rack_size
        inter = rs != rd
        latency = self.intra_latency_s if (~inter).any() else 0.0
        if inter.any():
            b = nbytes[inter]
            if self.spec.level2_kind == EPS:
                latency = max(latency, self.inter_latency_s)
                up = np.bincount(rs[inter], weights=b).max()
                down = np.bincount(rd[inter], weights=b).max()
                worst = max(worst, max(up, down) / self.uplink_cap)
            else:  # hybrid: bytes per rack pair spread over the shortest circuit routes
                k = self.racks
                pair = rs[inter] * k + rd[inter]
                pl = self.pair_latency_s[pair]
                if not np.isfinite(pl).all():
                    raise SpecError(f"no level-2 circuit route between racks on {self.spec.kind}; "
                                    "size the rack circuits to the demand (hybrid_for_demand)")
                latency = max(latency, float(pl.max()))
                demand = np.bincount(pair, weights=b, minlength=k * k)
                load = demand @ self.share
                used = load > 0
                if used.any():
                    worst = max(worst, float((load[used] / self.circuit_cap[used]).max()))
        return float(latency), float(worst)

    def schedule_line(self, phases: Sequence[PhaseArrays], groups: np.ndarray) -> ScheduleLine:
        """Price a schedule given in local indices on every group at once (concurrent groups share
        capacities: rack uplinks, circuits), per byte of σ. Memoised per (phases, groups) on this
        pricer: the hybrid placement prices the deployment's calls before the model asks again."""
        groups = np.asarray(groups, dtype=np.int64)
        key = (id(phases), groups.shape, groups.tobytes())
        hit = self._lines.get(key)
        if hit is not None and hit[0] is phases:
            return hit[1]
        line = self._schedule_line(phases, groups)
        self._lines[key] = (phases, line)  # holding ``phases`` keeps its id from being reused
        return line

    def _schedule_line(self, phases: Sequence[PhaseArrays], groups: np.ndarray) -> ScheduleLine:
        lat_total = per_byte = 0.0
        eps = self.spec.level1_kind != OCS
        for ph in phases:
            if ph.src.size == 0:
                continue
            if eps and ph.src.size * groups.shape[0] > _AGGREGATE_ABOVE:
                lat, ser = self._group_phase_cost(ph, groups)
            else:
                src = groups[:, ph.src].reshape(-1)
                dst = groups[:, ph.dst].reshape(-1)
                nbytes = np.tile(ph.fraction, groups.shape[0])
                lat, ser = self.phase_cost(src, dst, nbytes)
            lat_total += lat
            per_byte += ser
        return ScheduleLine(latency_s=lat_total, seconds_per_byte=per_byte, phases=len(phases))

    def _group_phase_cost(self, ph: PhaseArrays, groups: np.ndarray) -> tuple[float, float]:
        """``phase_cost`` of one phase run by every group, on an EPS level 1, without expanding it
        to G·T transfers: the phase is the same in every group, so injection / ejection bytes are
        its per-local-rank sums placed on each group's accelerators, and rack-to-rack bytes are
        Σ_g P_gᵀ F P_g with F the phase's local byte matrix and P_g the racks of group g (one-hot).
        A 512-rank one-shot all-reduce phase (261 632 transfers) becomes a 512 × 512 matrix
        product. Equal to ``phase_cost`` up to float summation order."""
        n = groups.shape[1]
        local = _local_matrices(ph, n)
        if local is None:
            return 0.0, 0.0
        out_local, in_local, local_bytes, local_count, uniform = local
        accs = self.acc[groups]  # (G, n) accelerators
        flat = accs.reshape(-1)
        tx = np.bincount(flat, weights=np.tile(out_local, groups.shape[0]))
        rx = np.bincount(flat, weights=np.tile(in_local, groups.shape[0]))
        worst = max(tx.max(), rx.max()) / self.port_cap
        k, g = self.racks, groups.shape[0]
        racks = accs // self.rack_size
        if uniform is not None:
            # every ordered pair of a group once: rack pair (r, s) carries c_r·c_s − [r = s]·c_r
            # transfers, c = the group's ranks per rack (no matrix product over ranks needed)
            per_group = np.bincount((np.arange(g)[:, None] * k + racks).reshape(-1), minlength=g * k)
            c = per_group.reshape(g, k).astype(float)
            rack_count = np.einsum("gi,gj->ij", c, c) - np.diag(c.sum(axis=0))
            rack_bytes = uniform * rack_count
        else:
            one_hot = np.zeros((g, n, k))
            np.put_along_axis(one_hot, racks[:, :, None], 1.0, axis=2)
            # Σ_g P_gᵀ F P_g as 2-D products (numpy's stacked matmul does not use BLAS)
            spread = one_hot.transpose(1, 0, 2).reshape(n, g * k)  # [local rank, (group, rack)]
            both = np.concatenate([local_bytes, local_count]) @ spread  # (2n, g·k): F P_g, C P_g
            lhs = one_hot.reshape(g * n, k).T  # (k, g·n)
            rack_bytes = lhs @ both[:n].reshape(n, g, k).transpose(1, 0, 2).reshape(g * n, k)
            rack_count = lhs @ both[n:].reshape(n, g, k).transpose(1, 0, 2).reshape(g * n, k)
        inter = rack_count > 0
        intra = bool(np.diagonal(inter).any())
        np.fill_diagonal(inter, False)
        latency = self.intra_latency_s if intra else 0.0
        if inter.any():
            between = np.where(inter, rack_bytes, 0.0)
            if self.spec.level2_kind == EPS:
                latency = max(latency, self.inter_latency_s)
                worst = max(worst, max(between.sum(axis=1).max(), between.sum(axis=0).max()) / self.uplink_cap)
            else:  # hybrid: rack-pair bytes over the shortest circuit routes
                pl = self.pair_latency_s[inter.reshape(-1)]
                if not np.isfinite(pl).all():
                    raise SpecError(f"no level-2 circuit route between racks on {self.spec.kind}; "
                                    "size the rack circuits to the demand (hybrid_for_demand)")
                latency = max(latency, float(pl.max()))
                load = between.reshape(-1) @ self.share
                used = load > 0
                if used.any():
                    worst = max(worst, float((load[used] / self.circuit_cap[used]).max()))
        return float(latency), float(worst)


__all__ = ["PhasePricer", "ScheduleLine", "clear_phase_cache"]
