"""Library schedules as transfer arrays, without building their ``Transfer`` objects (paper 003,
Appendix A.3, C.3; pricing a planned topology, Section 5.4).

Pricing a schedule on a fabric needs only each phase's (src, dst, fraction) per transfer, in the
schedule's transfer order; ``builders`` makes full ``Transfer`` objects with their chunk lists
(what the data-flow executor needs), hundreds of thousands of them for a 512-rank schedule.
``schedule_arrays(name, collective, topo)`` gives the same three arrays per phase directly from
the schedule's structure (layers, tree levels, Bruck digits): every builder here walks the same
loops as its ``builders`` twin (ranks outer, generators inner, pieces merged and reversals taken in
the same order), so the arrays equal ``[(t.src, t.dst, float(t.fraction)) for t in phase]`` of the
built schedule element for element (``tests/unit/test_schedule_arrays.py`` checks every schedule
here on a set of topologies). Returns None for a schedule or topology not covered here (then build).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from collectives.layers import basis_tiling
from collectives.schedules.builders import digits
from collectives.topology import invariants
from collectives.trees import balanced_tree

PhaseTriple = tuple[np.ndarray, np.ndarray, np.ndarray]  # (src, dst, fraction) of one phase


def _value(fraction: Fraction) -> float:
    return fraction.numerator / fraction.denominator  # = float(Fraction) exactly, as library_phases


def _fan_out(n: int, gens, sizes) -> PhaseTriple:
    """Every rank x sends once over each generator g (xor labels): x -> x ^ g, ranks outer."""
    g = np.asarray(gens, dtype=np.int64)
    src = np.repeat(np.arange(n, dtype=np.int64), g.size)
    return src, src ^ np.tile(g, n), np.tile(np.asarray([_value(s) for s in sizes], dtype=np.float64), n)


def _merge(*phase_lists: list) -> list:
    length = max(len(p) for p in phase_lists)
    out = []
    for k in range(length):
        parts = [p[k] for p in phase_lists if k < len(p)]
        out.append(tuple(np.concatenate([q[i] for q in parts]) for i in range(3)))
    return out


def _reverse(phases: list) -> list:
    return [(dst, src, frac) for src, dst, frac in reversed(phases)]


def _ag_tiling(n: int, order, piece: int, chunk_fraction: Fraction) -> list:
    held, out = 1, []
    for layer in order:
        layer = [int(s) for s in layer]
        out.append(_fan_out(n, layer, [chunk_fraction * held] * len(layer)))
        held *= 1 + len(layer)
    return out


def _ag_tiling_parallel(n: int, order, chunk_fraction: Fraction) -> list:
    ell = len(order)
    return _merge(*(_ag_tiling(n, [order[(i + m) % ell] for m in range(ell)], i, chunk_fraction / ell)
                    for i in range(ell)))


def _ag_tree(topo, chunk_fraction: Fraction) -> list:
    inv, tree = invariants(topo), balanced_tree(topo)
    out = []
    for k in range(1, inv.diameter + 1):
        count: dict[int, int] = {}
        for d in inv.spheres[k]:
            g = tree.last_hop[d]
            count[g] = count.get(g, 0) + 1
        gens = sorted(count)
        out.append(_fan_out(topo.n_ranks, gens, [chunk_fraction * count[g] for g in gens]))
    return out


def _ar_layers(n: int, order, pieces_rotated: bool) -> list:
    ell = len(order)
    pieces = ell if pieces_rotated else 1
    frac = Fraction(1, pieces)
    out = []
    for j in range(ell):
        parts = [_fan_out(n, [int(s) for s in order[(i + j) % ell]], [frac] * len(order[(i + j) % ell]))
                 for i in range(pieces)]
        out.append(tuple(np.concatenate([p[i] for p in parts]) for i in range(3)))
    return out


def _a2a_tiling(n: int, order, pieces: int) -> list:
    dig = digits(order)
    frac = Fraction(1, n * pieces)
    out = []
    for j in range(len(order)):
        count: dict[int, int] = {}
        for dg in dig.values():
            if dg[j]:
                count[dg[j]] = count.get(dg[j], 0) + 1
        gens = sorted(count)
        out.append(_fan_out(n, [int(g) for g in gens], [frac * count[g] for g in gens]))
    return out


def _a2a_tiling_parallel(n: int, order) -> list:
    ell = len(order)
    return _merge(*(_a2a_tiling(n, [order[(i + m) % ell] for m in range(ell)], ell) for i in range(ell)))


def _a2a_tree(topo) -> list:
    inv, tree = invariants(topo), balanced_tree(topo)
    routes = [tree.route(d, topo) for sph in inv.spheres[1:] for d in sph]
    frac = Fraction(1, topo.n_ranks)
    out = []
    for k in range(1, inv.diameter + 1):
        count: dict[int, int] = {}
        for r in routes:
            if len(r) >= k:
                count[r[k - 1]] = count.get(r[k - 1], 0) + 1
        gens = sorted(count)
        out.append(_fan_out(topo.n_ranks, gens, [frac * count[g] for g in gens]))
    return out


def _rs_ag(n: int, ag_order) -> list:
    ag = _ag_tiling(n, ag_order, 0, Fraction(1, n))
    return _reverse(ag) + ag


def _rs_ag_parallel(n: int, rs_order, pieces: int) -> list:
    ell = len(rs_order)
    rs, ag = [], []
    for i in range(pieces):
        piece = _ag_tiling(n, list(reversed([rs_order[(i + m) % ell] for m in range(ell)])), i, Fraction(1, n * pieces))
        rs.append(_reverse(piece))
        ag.append(piece)
    return _merge(*rs) + _merge(*ag)


def _gather(name: str, t):
    """All-gather phases of the gather-family schedules (reduce-scatter is their reversal)."""
    from collectives.schedules import _ag_pieces, _order

    n = t.n_ranks
    if name == "recursive_doubling":
        return _ag_tiling(n, list(basis_tiling(t)), 0, Fraction(1, n))
    if name == "one_shot_dvo":
        return _ag_tree(t, Fraction(1, n))
    if name == "coset_factored":
        return _ag_tiling(n, list(_order(t, "ag")), 0, Fraction(1, n))
    if name == "coset_factored_parallel":
        order = list(_order(t, "ag_parallel"))
        return _ag_tiling_parallel(n, order, Fraction(1, n)) if _ag_pieces(t) > 1 else _ag_tiling(n, order, 0, Fraction(1, n))
    return None


def _phases(name: str, collective: str, t):
    from collectives.schedules import _order, _rs_pieces

    n = t.n_ranks
    if collective == "allgather":
        return _gather(name, t)
    if collective == "reducescatter":
        ag = _gather(name, t)
        return None if ag is None else _reverse(ag)
    if collective == "alltoall":
        if name == "bruck":
            return _a2a_tiling(n, list(basis_tiling(t)), 1)
        if name == "bruck_radix":
            return _a2a_tiling(n, list(_order(t, "bruck")), 1)
        if name == "bruck_parallel":
            order = list(_order(t, "bruck_parallel"))
            return _a2a_tiling_parallel(n, order)
        if name == "direct":
            return _a2a_tree(t)
        return None
    if collective != "allreduce":
        return None
    if name == "recursive_doubling":
        return _ar_layers(n, basis_tiling(t), False)
    if name == "one_shot_dvo":
        return _ag_tree(t, Fraction(1))
    if name in ("coset_factored", "coset_factored_parallel"):
        return _ar_layers(n, _order(t, "min_ports"), name == "coset_factored_parallel")
    if name == "rs_ag":
        return _rs_ag(n, list(reversed(_order(t, "rs"))))
    if name == "rs_ag_parallel":
        return _rs_ag_parallel(n, _order(t, "rs_parallel"), _rs_pieces(t))
    if name == "halving_doubling":
        return _rs_ag(n, list(basis_tiling(t)))
    return None


def schedule_arrays(name: str, collective: str, topo) -> tuple[PhaseTriple, ...] | None:
    """(src, dst, fraction) per non-empty phase of schedule ``name`` for ``collective`` on ``topo``
    (a Cayley graph of (Z2)^n on which the schedule is valid), or None where not covered."""
    if topo.kind != "xor":
        return None
    phases = _phases(name, collective, topo)
    if phases is None:
        return None
    return tuple(p for p in phases if p[0].size)


__all__ = ["PhaseTriple", "schedule_arrays"]
