"""The schedule registry: every collective implementation as a triple (paper 003, Section 3.4,
Appendix A.2): a validity predicate, a closed-form cost (h, v, u) and an executable schedule.

``SCHEDULES`` is keyed by the Hydra option names. One entry serves every collective it
implements (``ring`` serves all-reduce, all-gather and reduce-scatter)::

    entry = SCHEDULES.get("coset_factored_parallel")
    entry.collectives                      # ('allgather', 'allreduce', 'reducescatter')
    entry.valid(topo)                      # default collective: entry.primary
    entry.closed_form(topo, "allgather")   # Cost(h, v, u), v in multiples of sigma
    entry.build(topo, "reducescatter")     # Schedule (phases of transfers)
    lookup("allreduce", "rs_ag")           # the Algorithm for one collective

sigma is the collective's buffer size, i.e. the larger of its input and output buffers
(Appendix A): the full vector for all-reduce, the gathered output for all-gather, the input for
reduce-scatter, the per-rank send buffer (N blocks of sigma/N) for all-to-all.

Closed forms are pure arithmetic on topology invariants that are cached per topology
(distances, coset-layer tilings, balanced trees), so pricing all schedules is fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from collectives.cost import Cost
from collectives.errors import SpecError
from collectives.layers import (ag_volume_blocks, basis_tiling, best_tiling, parallel_pieces, parallel_volume,
                                radices, rs_volume)
from collectives.registry import Registry
from collectives.schedule import Schedule
from collectives.schedules import builders as b
from collectives.topology import invariants, register_cache, topology_key
from collectives.trees import balanced_tree

COLLECTIVES = ("allreduce", "alltoall", "allgather", "reducescatter")

_ALIASES = {"all-reduce": "allreduce", "all_reduce": "allreduce", "all-to-all": "alltoall",
            "all_to_all": "alltoall", "all-gather": "allgather", "all_gather": "allgather",
            "reduce-scatter": "reducescatter", "reduce_scatter": "reducescatter"}


def normalize_collective(name: str) -> str:
    c = _ALIASES.get(str(name), str(name))
    if c not in COLLECTIVES:
        raise SpecError(f"collective={name!r} is unknown; choose one of: {', '.join(COLLECTIVES)}")
    return c


# Closed forms and predicates are pure functions of the graph: cached per (graph, collective, name)
_VERDICTS: dict[tuple, object] = register_cache({})
_COSTS: dict[tuple, Cost] = register_cache({})
_VALID = object()


@dataclass(frozen=True, slots=True)
class Algorithm:
    """One schedule for one collective."""

    name: str
    collective: str
    _why: Callable  # topo -> reason string or None
    _cost: Callable  # topo -> Cost
    _build: Callable  # topo -> Schedule

    def why_invalid(self, topo) -> str | None:
        key = (topology_key(topo), self.collective, self.name)
        verdict = _VERDICTS.get(key)
        if verdict is None:
            reason = self._why(topo)
            verdict = _VERDICTS[key] = _VALID if reason is None else reason
        return None if verdict is _VALID else verdict

    def valid(self, topo) -> bool:
        return self.why_invalid(topo) is None

    def closed_form(self, topo) -> Cost:
        key = (topology_key(topo), self.collective, self.name)
        cost = _COSTS.get(key)
        if cost is not None:
            return cost
        reason = self.why_invalid(topo)
        if reason is not None:
            raise SpecError(f"schedule {self.name} ({self.collective}) cannot run on {topo.describe()}: {reason}")
        cost = _COSTS[key] = self._cost(topo)
        return cost

    def build(self, topo) -> Schedule:
        reason = self.why_invalid(topo)
        if reason is not None:
            raise SpecError(f"schedule {self.name} ({self.collective}) cannot run on {topo.describe()}: {reason}")
        return self._build(topo)


class ScheduleEntry:
    """A registry entry: one name, one algorithm per collective it serves."""

    def __init__(self, name: str):
        self.name = name
        self.algorithms: dict[str, Algorithm] = {}

    @property
    def collectives(self) -> tuple[str, ...]:
        return tuple(sorted(self.algorithms))

    @property
    def primary(self) -> str:
        for c in COLLECTIVES:
            if c in self.algorithms:
                return c
        raise AssertionError(self.name)

    def for_collective(self, collective: str | None = None) -> Algorithm:
        c = self.primary if collective is None else normalize_collective(collective)
        if c not in self.algorithms:
            raise SpecError(
                f"schedule {self.name!r} does not implement {c}; it serves: {', '.join(self.collectives)}"
            )
        return self.algorithms[c]

    def valid(self, topo, collective: str | None = None) -> bool:
        return self.for_collective(collective).valid(topo)

    def why_invalid(self, topo, collective: str | None = None) -> str | None:
        return self.for_collective(collective).why_invalid(topo)

    def closed_form(self, topo, collective: str | None = None) -> Cost:
        return self.for_collective(collective).closed_form(topo)

    def build(self, topo, collective: str | None = None) -> Schedule:
        return self.for_collective(collective).build(topo)

    def __repr__(self) -> str:
        return f"ScheduleEntry({self.name!r}, {self.collectives})"


SCHEDULES: Registry[ScheduleEntry] = Registry("schedule")


def _define(name: str, collective: str, why, cost, build) -> None:
    if name not in SCHEDULES:
        SCHEDULES.add(name, ScheduleEntry(name))
    entry = SCHEDULES.get(name)
    if collective in entry.algorithms:
        raise KeyError(f"duplicate schedule {name!r} for {collective}")
    entry.algorithms[collective] = Algorithm(name, collective, why, cost, build)


def lookup(collective: str, name: str) -> Algorithm:
    return SCHEDULES.get(name).for_collective(collective)


def schedules_for(collective: str) -> list[str]:
    c = normalize_collective(collective)
    return [n for n, e in SCHEDULES.items() if c in e.algorithms]


# ---------------------------------------------------------------------------------------
# validity predicates
# ---------------------------------------------------------------------------------------

def _always(topo) -> str | None:
    return None


def _needs_xor(topo) -> str | None:
    if topo.kind != "xor":
        return "it needs a Cayley graph of (Z2)^n (hypercube, folds, block folds), not a circulant"
    return None


def _needs_complete(topo) -> str | None:
    if not topo.is_complete:
        return f"it needs a complete graph (every pair adjacent); this one has diameter {topo.diameter}"
    return None


def _needs_cycle(topo) -> str | None:
    if b.hamiltonian_cycle(topo) is None:
        return "no offset is coprime to n, so no ring (Hamiltonian cycle) is available"
    return None


def _needs_tiling(topo) -> str | None:
    reason = _needs_xor(topo)
    if reason:
        return reason
    if not best_tiling(topo, "min_ports"):
        return "its generators admit no tiling by coset layers"
    return None


# ---------------------------------------------------------------------------------------
# helpers for closed forms
# ---------------------------------------------------------------------------------------

def _n(topo) -> int:
    return topo.n_bits


def _ports_of_layers(order) -> int:
    return sum(len(s) for s in order)


def _tree_ports(topo) -> int:
    used = {g for load in balanced_tree(topo).level_loads for g, c in load.items() if c}
    return len(used | {topo.sub(0, g) for g in used})


def _ring_ports(topo) -> int:
    cyc = b.hamiltonian_cycle(topo)
    g_out = topo.sub(cyc[1 % len(cyc)], cyc[0])
    g_in = topo.sub(cyc[0], cyc[-1])
    return len({g_out, topo.sub(0, g_in)})


def _flood_volume(topo) -> int:
    """One-shot: phase k forwards the ball of radius k-1, sum_k |B(k-1)| (Table 4)."""
    inv = invariants(topo)
    total, ball = 0, 0
    for k in range(inv.diameter):
        ball += len(inv.spheres[k])
        total += ball
    return total


def _tree_volume(topo) -> int:
    return sum(max(load.values()) for load in balanced_tree(topo).level_loads)


def _direct_volume(topo) -> int:
    tree = balanced_tree(topo)
    inv = invariants(topo)
    total = 0
    for k in range(1, inv.diameter + 1):
        load: dict[int, int] = {}
        for d in inv.spheres[k]:
            g = tree.last_hop[d]
            load[g] = load.get(g, 0) + tree.subtree[d]
        total += max(load.values())
    return total


def _order(topo, objective):
    return best_tiling(topo, objective)


# ---------------------------------------------------------------------------------------
# all-reduce (Tables 4 and 5, Eq. 4)
# ---------------------------------------------------------------------------------------

def _ar_schedule(name, topo, phases, n_chunks, form="partial", chunk_fraction=None, pieces=1, **meta):
    cf = chunk_fraction if chunk_fraction is not None else Fraction(1, n_chunks)
    return b.to_schedule(name, "allreduce", topo, phases, n_chunks, form, cf, pieces, **meta)


def _rs_ag_phases(topo, ag_order):
    ag = b.ag_tiling(topo, ag_order, 0, Fraction(1, topo.n_ranks))
    return b.reverse_to_reduce(topo, ag) + ag


def _rs_ag_parallel_phases(topo, rs_order):
    n, ell = topo.n_ranks, len(rs_order)
    pieces = parallel_pieces(radices(rs_order), "rs")
    pieces_rs, pieces_ag = [], []
    for i in range(pieces):
        ag_order = list(reversed([rs_order[(i + m) % ell] for m in range(ell)]))
        ag = b.ag_tiling(topo, ag_order, i, Fraction(1, n * pieces))
        pieces_rs.append(b.reverse_to_reduce(topo, ag))
        pieces_ag.append(ag)
    return b.merge(*pieces_rs) + b.merge(*pieces_ag)


_define("recursive_doubling", "allreduce", _needs_xor,
        lambda t: Cost(h=_n(t), v=Fraction(_n(t)), u=_n(t)),
        lambda t: _ar_schedule("recursive_doubling", t, b.ar_layers(t, basis_tiling(t), False), 1))

_define("one_shot", "allreduce", _always,
        lambda t: Cost(h=t.diameter, v=Fraction(_flood_volume(t)), u=t.degree),
        lambda t: _ar_schedule("one_shot", t, b.ag_flood(t, Fraction(1)), t.n_ranks, "contributions", Fraction(1)))

_define("one_shot_dvo", "allreduce", _always,
        lambda t: Cost(h=t.diameter, v=Fraction(_tree_volume(t)), u=_tree_ports(t)),
        lambda t: _ar_schedule("one_shot_dvo", t, b.ag_tree(t, Fraction(1)), t.n_ranks, "contributions",
                               Fraction(1)))

_define("coset_factored", "allreduce", _needs_tiling,
        lambda t: Cost(h=len(_order(t, "min_ports")), v=Fraction(len(_order(t, "min_ports"))),
                       u=_ports_of_layers(_order(t, "min_ports"))),
        lambda t: _ar_schedule("coset_factored", t, b.ar_layers(t, _order(t, "min_ports"), False), 1,
                               layers=_order(t, "min_ports")))

_define("coset_factored_parallel", "allreduce", _needs_tiling,
        lambda t: Cost(h=len(_order(t, "min_ports")), v=Fraction(1), u=_ports_of_layers(_order(t, "min_ports"))),
        lambda t: _ar_schedule("coset_factored_parallel", t, b.ar_layers(t, _order(t, "min_ports"), True),
                               len(_order(t, "min_ports")), pieces=len(_order(t, "min_ports")),
                               layers=_order(t, "min_ports")))

_define("rs_ag", "allreduce", _needs_tiling,
        lambda t: Cost(h=2 * len(_order(t, "rs")), v=2 * rs_volume(radices(_order(t, "rs"))),
                       u=_ports_of_layers(_order(t, "rs"))),
        lambda t: _ar_schedule("rs_ag", t, _rs_ag_phases(t, list(reversed(_order(t, "rs")))), t.n_ranks,
                               layers=_order(t, "rs")))

_define("rs_ag_parallel", "allreduce", _needs_tiling,
        lambda t: Cost(h=2 * len(_order(t, "rs_parallel")),
                       v=2 * parallel_volume(radices(_order(t, "rs_parallel")), "rs"),
                       u=_ports_of_layers(_order(t, "rs_parallel"))),
        lambda t: _ar_schedule("rs_ag_parallel", t, _rs_ag_parallel_phases(t, _order(t, "rs_parallel")),
                               t.n_ranks * _rs_pieces(t), pieces=_rs_pieces(t),
                               layers=_order(t, "rs_parallel")))

def _rs_pieces(t) -> int:
    return parallel_pieces(radices(_order(t, "rs_parallel")), "rs")


def _ag_pieces(t) -> int:
    return parallel_pieces(radices(_order(t, "ag_parallel")), "ag")


_define("halving_doubling", "allreduce", _needs_xor,
        lambda t: Cost(h=2 * _n(t), v=Fraction(2 * (t.n_ranks - 1), t.n_ranks), u=_n(t)),
        lambda t: _ar_schedule("halving_doubling", t, _rs_ag_phases(t, list(basis_tiling(t))), t.n_ranks))

_define("two_shot", "allreduce", _needs_complete,
        lambda t: Cost(h=2 if t.n_ranks > 1 else 0, v=Fraction(2, t.n_ranks), u=t.degree),
        lambda t: _ar_schedule("two_shot", t, b.reverse_to_reduce(t, b.ag_direct(t, Fraction(1, t.n_ranks)))
                               + b.ag_direct(t, Fraction(1, t.n_ranks)), t.n_ranks))


def _ring_ar_phases(t):
    ag = b.ag_ring(t, b.hamiltonian_cycle(t), Fraction(1, t.n_ranks))
    return b.reverse_to_reduce(t, ag) + ag


_define("ring", "allreduce", _needs_cycle,
        lambda t: Cost(h=2 * (t.n_ranks - 1), v=Fraction(2 * (t.n_ranks - 1), t.n_ranks), u=_ring_ports(t)),
        lambda t: _ar_schedule("ring", t, _ring_ar_phases(t), t.n_ranks))


# ---------------------------------------------------------------------------------------
# all-gather and reduce-scatter (blocks of sigma/N; RS is the time reversal of the gather)
# ---------------------------------------------------------------------------------------

def _gather_variants(name, why, cost, phases_fn, pieces_fn=lambda t: 1, rs=True, rs_why=None):
    def build_ag(t):
        p = pieces_fn(t)
        return b.to_schedule(name, "allgather", t, phases_fn(t), t.n_ranks * p, "blocks",
                             Fraction(1, t.n_ranks * p), p)

    def build_rs(t):
        p = pieces_fn(t)
        return b.to_schedule(name, "reducescatter", t, b.reverse_to_reduce(t, phases_fn(t)), t.n_ranks * p,
                             "partial", Fraction(1, t.n_ranks * p), p)

    _define(name, "allgather", why, cost, build_ag)
    if rs:
        _define(name, "reducescatter", rs_why or why, cost, build_rs)


def _frac_n(t, blocks) -> Fraction:
    return Fraction(blocks, t.n_ranks)


_gather_variants(
    "ring", _needs_cycle,
    lambda t: Cost(h=t.n_ranks - 1, v=Fraction(t.n_ranks - 1, t.n_ranks), u=_ring_ports(t)),
    lambda t: b.ag_ring(t, b.hamiltonian_cycle(t), Fraction(1, t.n_ranks)))

_gather_variants(
    "recursive_doubling", _needs_xor,
    lambda t: Cost(h=_n(t), v=Fraction(t.n_ranks - 1, t.n_ranks), u=_n(t)),
    lambda t: b.ag_tiling(t, list(basis_tiling(t)), 0, Fraction(1, t.n_ranks)))

# flooding receives blocks several times, so its reversal would double count: gather only
_gather_variants(
    "one_shot", _always,
    lambda t: Cost(h=t.diameter, v=_frac_n(t, _flood_volume(t)), u=t.degree),
    lambda t: b.ag_flood(t, Fraction(1, t.n_ranks)), rs=False)
_define("one_shot", "reducescatter", _needs_complete,
        lambda t: Cost(h=1, v=Fraction(1, t.n_ranks), u=t.degree),
        lambda t: b.to_schedule("one_shot", "reducescatter", t,
                                b.reverse_to_reduce(t, b.ag_direct(t, Fraction(1, t.n_ranks))), t.n_ranks,
                                "partial", Fraction(1, t.n_ranks)))

_gather_variants(
    "one_shot_dvo", _always,
    lambda t: Cost(h=t.diameter, v=_frac_n(t, _tree_volume(t)), u=_tree_ports(t)),
    lambda t: b.ag_tree(t, Fraction(1, t.n_ranks)))

_gather_variants(
    "coset_factored", _needs_tiling,
    lambda t: Cost(h=len(_order(t, "ag")), v=ag_volume_blocks(radices(_order(t, "ag"))) / t.n_ranks,
                   u=_ports_of_layers(_order(t, "ag"))),
    lambda t: b.ag_tiling(t, list(_order(t, "ag")), 0, Fraction(1, t.n_ranks)))

_gather_variants(
    "coset_factored_parallel", _needs_tiling,
    lambda t: Cost(h=len(_order(t, "ag_parallel")),
                   v=parallel_volume(radices(_order(t, "ag_parallel")), "ag") / t.n_ranks,
                   u=_ports_of_layers(_order(t, "ag_parallel"))),
    lambda t: (b.ag_tiling_parallel(t, list(_order(t, "ag_parallel")), Fraction(1, t.n_ranks)) if _ag_pieces(t) > 1
               else b.ag_tiling(t, list(_order(t, "ag_parallel")), 0, Fraction(1, t.n_ranks))),
    pieces_fn=_ag_pieces)


# ---------------------------------------------------------------------------------------
# all-to-all (Appendix A.3 'All-to-all', C.3.2)
# ---------------------------------------------------------------------------------------

def _a2a_schedule(name, t, phases, pieces=1, **meta):
    n = t.n_ranks
    return b.to_schedule(name, "alltoall", t, phases, n * n * pieces, "blocks", Fraction(1, n * pieces), pieces,
                         **meta)


_define("bruck", "alltoall", _needs_xor,
        lambda t: Cost(h=_n(t), v=Fraction(_n(t), 2), u=_n(t)),
        lambda t: _a2a_schedule("bruck", t, b.a2a_tiling(t, list(basis_tiling(t)), 0, 1)))

_define("bruck_radix", "alltoall", _needs_tiling,
        lambda t: Cost(h=len(_order(t, "bruck")), v=sum(Fraction(1, r) for r in radices(_order(t, "bruck"))),
                       u=_ports_of_layers(_order(t, "bruck"))),
        lambda t: _a2a_schedule("bruck_radix", t, b.a2a_tiling(t, list(_order(t, "bruck")), 0, 1),
                                layers=_order(t, "bruck")))

_define("bruck_parallel", "alltoall", _needs_tiling,
        lambda t: Cost(h=len(_order(t, "bruck_parallel")), v=Fraction(1, min(radices(_order(t, "bruck_parallel")))),
                       u=_ports_of_layers(_order(t, "bruck_parallel"))),
        lambda t: _a2a_schedule("bruck_parallel", t, b.a2a_tiling_parallel(t, list(_order(t, "bruck_parallel"))),
                                pieces=len(_order(t, "bruck_parallel")), layers=_order(t, "bruck_parallel")))

_define("direct", "alltoall", _always,
        lambda t: Cost(h=t.diameter, v=_frac_n(t, _direct_volume(t)), u=_tree_ports(t)),
        lambda t: _a2a_schedule("direct", t, b.a2a_tree(t)))
