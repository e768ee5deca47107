"""Pricing one mesh axis on one logical topology (paper 003, Eq. 1, Appendix A.2-A.3).

The closed forms (h, v) come from ``collectives.schedules`` and Eq. 1 from
``collectives.selection.hockney_time_s``; the planner alone owns λ, R and p. ``auto`` takes the
valid schedule with the lowest T; exact ties go to the simplest schedule (``TIE_ORDER``: the
paper reports the size-4 axis of Table 6 as "one-shot (volume-optimised)", which ties there with
coset-factored parallel; ``collectives.selection.best_schedule`` would break that tie by name and
report coset-factored).

Results are kept in an explicit keyed cache (``clear_axis_cache``) so the joint search can
price thousands of configurations quickly.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from collectives.caches import register_cache
from collectives.cost import Cost
from collectives.errors import SpecError
from collectives.schedules import SCHEDULES, schedules_for
from collectives.selection import hockney_time_s as _eq1
from collectives.topology import CayleyTopology, invariants, topology_key

TIE_ORDER = ("one_shot_dvo", "one_shot", "direct", "coset_factored_parallel", "coset_factored",
             "bruck_parallel", "bruck_radix", "bruck", "rs_ag_parallel", "rs_ag", "recursive_doubling",
             "halving_doubling", "two_shot", "ring")


@dataclass(frozen=True, slots=True)
class AxisPrice:
    time_s: float
    schedule: str
    h: int
    v: Fraction
    topology: str


_PRICES: dict[tuple, AxisPrice | None] = {}
# (topology, collective, schedule) -> the valid schedules' closed forms and the topology's name:
# what a price reads besides σ, p, λ and R, so requests that differ in those share it
_CANDIDATES: dict[tuple, tuple] = {}


def clear_axis_cache() -> None:
    _PRICES.clear()
    _CANDIDATES.clear()


def hockney_time_s(cost, sigma_bytes: int, hop_latency_s: float, link_rate_Bps: float, p: int) -> float:
    """Eq. 1: T = h·λ + v·σ/(p·R) (``collectives.selection.hockney_time_s``)."""
    return _eq1(cost, sigma_bytes, hop_latency_s, link_rate_Bps, p)


def _tie_rank(name: str) -> tuple[int, str]:
    return (TIE_ORDER.index(name) if name in TIE_ORDER else len(TIE_ORDER), name)


def price_axis(topo, collective: str, sigma_bytes: int, *, p: int, hop_latency_s: float,
               link_rate_Bps: float, schedule: str = "auto") -> AxisPrice | None:
    """Best (or the requested) schedule on ``topo``; None when no requested schedule is valid."""
    key = (topology_key(topo), collective, sigma_bytes, p, hop_latency_s, link_rate_Bps, schedule)
    if key in _PRICES:
        return _PRICES[key]
    price = _PRICES[key] = price_candidates(schedule_candidates(topo, collective, schedule), sigma_bytes, p=p,
                                            hop_latency_s=hop_latency_s, link_rate_Bps=link_rate_Bps)
    return price


def _tree_floor(topo) -> int:
    """≤ Σ_k max_g load_k(g) of the balanced tree (``collectives.schedules._tree_volume``): the
    |S_k| ranks of sphere k take one last hop each among the d generators, so the most loaded
    one carries ≥ ⌈|S_k| / d⌉ (pigeonhole)."""
    d = len(set(topo.generators))
    return sum(-(-len(sphere) // d) for sphere in invariants(topo).spheres[1:])


def _direct_floor(topo) -> int:
    """≤ ``collectives.schedules._direct_volume``: level k's subtrees hold every rank at distance
    ≥ k once, spread over the d generators, so the most loaded one carries ≥ ⌈N_{≥k} / d⌉."""
    d = len(set(topo.generators))
    spheres = invariants(topo).spheres
    beyond = [0] * (len(spheres) + 1)
    for k in range(len(spheres) - 1, 0, -1):
        beyond[k] = beyond[k + 1] + len(spheres[k])
    return sum(-(-beyond[k] // d) for k in range(1, len(spheres)))


# Floors (h, v ≤ the closed form's) of the schedules whose closed forms build the balanced tree
# (``collectives.trees.balanced_tree``, the costliest part of pricing a new graph): priced only when
# the floor's T is not above the best T already found, so a schedule that cannot win or tie is
# never built (tests/unit/test_fabrics_planner_kernel.py checks every floor against the closed form).
CLOSED_FORM_FLOORS = {
    ("allreduce", "one_shot_dvo"): lambda t: (t.diameter, Fraction(_tree_floor(t))),
    ("allgather", "one_shot_dvo"): lambda t: (t.diameter, Fraction(_tree_floor(t), t.n_ranks)),
    ("reducescatter", "one_shot_dvo"): lambda t: (t.diameter, Fraction(_tree_floor(t), t.n_ranks)),
    ("alltoall", "direct"): lambda t: (t.diameter, Fraction(_direct_floor(t), t.n_ranks)),
}


class _Deferred:
    """A schedule's closed form, computed when first needed (``CLOSED_FORM_FLOORS``)."""

    __slots__ = ("floor", "_entry", "_topo", "_collective", "_cost")

    def __init__(self, entry, topo, collective: str):
        h, v = CLOSED_FORM_FLOORS[(collective, entry.name)](topo)
        self.floor = Cost(h=h, v=v, u=0)
        self._entry, self._topo, self._collective, self._cost = entry, topo, collective, None

    def cost(self) -> Cost:
        if self._cost is None:
            self._cost = self._entry.closed_form(self._topo, self._collective)
        return self._cost


def schedule_candidates(topo, collective: str, schedule: str = "auto") -> tuple[tuple[tuple, ...], str]:
    """((closed form or ``_Deferred``, tie rank, name) of every valid schedule, in
    ``schedules_for`` order; the topology's name): what ``price_axis`` reads besides σ, p, λ, R."""
    key = (topology_key(topo), collective, schedule)
    hit = _CANDIDATES.get(key)
    if hit is not None:
        return hit
    names = schedules_for(collective) if schedule == "auto" else [schedule]
    found = []
    for name in names:
        entry = SCHEDULES.get(name)
        if collective not in entry.collectives:
            raise SpecError(f"schedule {name!r} does not implement {collective}; it serves: {', '.join(entry.collectives)}")
        if entry.valid(topo, collective):
            deferred = (collective, name) in CLOSED_FORM_FLOORS and len(names) > 1
            found.append((_Deferred(entry, topo, collective) if deferred else entry.closed_form(topo, collective),
                          _tie_rank(name), name))
    hit = _CANDIDATES[key] = (tuple(found), _name(topo) if found else "")
    return hit


def price_candidates(candidates: tuple[tuple[tuple, ...], str], sigma_bytes: int, *, p: int, hop_latency_s: float,
                     link_rate_Bps: float) -> AxisPrice | None:
    """The fastest of ``schedule_candidates`` at σ, p, λ and R (Eq. 1); exact ties by ``TIE_ORDER``.
    (T, tie rank) orders the schedules strictly, so the minimum does not depend on the order they
    are tried in: deferred ones come last, and one whose floor's T is above the best is skipped
    (Eq. 1 is monotone in h and v, and so is its float evaluation)."""
    schedules, topology = candidates
    best: tuple | None = None
    deferred = []
    for cost, rank, name in schedules:
        if isinstance(cost, _Deferred):
            deferred.append((cost, rank, name))
            continue
        cand = (hockney_time_s(cost, sigma_bytes, hop_latency_s, link_rate_Bps, p), rank, cost.h, cost.v, name)
        if best is None or cand[:2] < best[:2]:
            best = cand
    for lazy, rank, name in deferred:
        if best is not None and hockney_time_s(lazy.floor, sigma_bytes, hop_latency_s, link_rate_Bps, p) > best[0]:
            continue
        cost = lazy.cost()
        cand = (hockney_time_s(cost, sigma_bytes, hop_latency_s, link_rate_Bps, p), rank, cost.h, cost.v, name)
        if best is None or cand[:2] < best[:2]:
            best = cand
    return None if best is None else AxisPrice(time_s=best[0], schedule=best[4], h=best[2], v=best[3],
                                                topology=topology)


def _name(topo) -> str:
    """Human name: block-fold structure K_{2^k1}□… when the generators form complete layers."""
    if getattr(topo, "kind", "") != "xor":
        return topo.describe()
    blocks = complete_blocks(topo.n_bits, topo.generators)
    if blocks is not None:
        if all(k == 1 for k in blocks):
            return f"Q{topo.n_bits}"
        return "□".join(f"K{1 << k}" for k in sorted(blocks, reverse=True))
    units = {1 << b for b in range(topo.n_bits)}
    folds = sorted(set(topo.generators) - units)
    base = f"Q{topo.n_bits}"
    return base + "".join("+" + format(g, f"0{topo.n_bits}b") for g in folds)


_BLOCKS: dict[tuple, tuple[int, ...] | None] = register_cache({})


def complete_blocks(n_bits: int, generators) -> tuple[int, ...] | None:
    """Sub-block sizes if the generators are exactly complete layers on disjoint bit blocks
    (kept per generator set: the planner asks again for every request on the same hosts)."""
    gens = frozenset(generators)
    key = (n_bits, gens)
    if key not in _BLOCKS:
        _BLOCKS[key] = _complete_blocks(n_bits, gens)
    return _BLOCKS[key]


def _complete_blocks(n_bits: int, gens: frozenset) -> tuple[int, ...] | None:
    # the blocks: unions of the generators' bit masks that share a bit
    full = (1 << n_bits) - 1
    blocks: list[int] = []
    for g in gens:
        if g <= 0 or g & ~full:
            return None
        merged = g
        rest = []
        for b in blocks:
            if b & merged:
                merged |= b
            else:
                rest.append(b)
        rest.append(merged)
        blocks = rest
    if sum(blocks) != full:  # a bit no generator touches
        return None
    # every generator is a non-zero submask of its block, so they are all of them exactly when
    # the counts agree
    blocks.sort(key=lambda m: m & -m)
    sizes = tuple(m.bit_count() for m in blocks)
    return sizes if sum((1 << k) - 1 for k in sizes) == len(gens) else None


def compress(mask: int, bits: tuple[int, ...]) -> int:
    """Host mask → axis-local mask (bit bits[i] → bit i). A plain loop: the planner calls it
    ~10^5 times per search worker, and a generator summed costs three times as much."""
    out = i = 0
    for b in bits:
        out |= ((mask >> b) & 1) << i
        i += 1
    return out


# axis bits -> host mask of every axis-local mask (index): 3^9 entries for all blocks of 9 host bits
_EXPANDED: dict[tuple[int, ...], tuple[int, ...]] = register_cache({})


def expanded_masks(bits: tuple[int, ...]) -> tuple[int, ...]:
    """``expand(x, bits)`` of every axis-local mask x (index x), each built from the entry
    without its lowest bit (kept per ``bits``: the planner expands ~10^5 masks per search worker)."""
    table = _EXPANDED.get(bits)
    if table is None:
        out = [0] * (1 << len(bits))
        for x in range(1, len(out)):
            low = x & -x
            out[x] = out[x ^ low] | (1 << bits[low.bit_length() - 1])
        table = _EXPANDED[bits] = tuple(out)
    return table


def expand(mask: int, bits: tuple[int, ...]) -> int:
    """Axis-local mask → host mask (bit i → bit bits[i]; bits of ``mask`` past ``len(bits)`` are ignored)."""
    table = expanded_masks(bits)
    return table[mask & (len(table) - 1)]


def axis_topology(host_masks, bits: tuple[int, ...]) -> CayleyTopology:
    """The axis's view of the host: generators supported inside its bit block (support rule, A.1)."""
    block = sum(1 << b for b in bits)
    local = sorted({compress(g, bits) for g in host_masks if g & ~block == 0})
    return CayleyTopology(n_bits=len(bits), generators=tuple(local))
