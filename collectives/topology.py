"""Logical topologies as Cayley graphs (paper 003, Appendix A.1, Table 2).

Two group families are supported, both vertex-transitive so that schedules and costs derived
at rank 0 carry over to every rank:

- ``CayleyTopology``: Cay((Z2)^n, S) — ranks are n-bit labels, a generator mask g joins
  x and x XOR g. Hypercube Q_n, folds, folded cube, uniform and mixed-radix block folds.
- ``CirculantTopology``: Cay(Z_n, ±offsets) — rings and circulants, used by the ring
  schedule and by stacked-link allocation (Appendix A.6), where only one-shot schedules run.

Both expose the same small interface (``kind``, ``n_ranks``, ``generators``, ``add``, ``sub``)
so that one-shot, DVO, direct and ring schedules are written once. Derived invariants
(distances, diameter, coset layers) are computed on demand and kept in an explicit cache keyed
by the topology (``collectives.caches``; ``clear_caches()`` empties them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Union

import numpy as np

from collectives.caches import clear_caches, register_cache, topology_key  # noqa: F401 (re-exported)
from collectives.errors import SpecError
from collectives.layers import best_tiling

MAX_BITS = 16  # 65 536 ranks: beyond any scale-up domain the paper considers


def _bits(mask: int, n_bits: int) -> str:
    return format(mask, f"0{n_bits}b")


def format_mask(mask: int, n_bits: int) -> str:
    """A mask as the paper writes it: n_bits binary digits, most significant bit first."""
    return _bits(mask, n_bits)


def gf2_rank(vectors) -> int:
    """Rank over GF(2) of integers read as bit vectors."""
    basis: list[int] = []
    for v in vectors:
        for b in basis:
            v = min(v, v ^ b)
        if v:
            basis.append(v)
    return len(basis)


@dataclass(frozen=True, slots=True, kw_only=True)
class CayleyTopology:
    """Cay((Z2)^n_bits, generators); ``multiplicity`` is p per logical edge (int or per generator)."""

    n_bits: int
    generators: tuple[int, ...]
    multiplicity: Union[int, tuple[int, ...]] = 1
    name: str = field(default="", compare=False)

    kind = "xor"

    def __post_init__(self) -> None:
        if isinstance(self.n_bits, bool) or not isinstance(self.n_bits, int) or not 1 <= self.n_bits <= MAX_BITS:
            raise SpecError(
                f"n_bits={self.n_bits!r} must be an integer in 1..{MAX_BITS}; axis sizes are powers of two 2^n_bits"
            )
        gens = tuple(self.generators)
        object.__setattr__(self, "generators", gens)
        top = 1 << self.n_bits
        seen: set[int] = set()
        for g in gens:
            if isinstance(g, bool) or not isinstance(g, int) or not 0 < g < top:
                raise SpecError(
                    f"generator mask {g!r} is out of range for {self.n_bits} bits; masks must be in 1..{top - 1}"
                )
            if g in seen:
                raise SpecError(
                    f"generator mask {_bits(g, self.n_bits)} appears twice; each fold mask may be given once"
                )
            seen.add(g)
        if gf2_rank(gens) != self.n_bits:
            raise SpecError(
                f"generators {[_bits(g, self.n_bits) for g in gens]} do not span (Z2)^{self.n_bits}, so the graph "
                f"is disconnected; include the unit masks (start from hypercube({self.n_bits}))"
            )
        _check_multiplicity(self.multiplicity, len(gens))

    # -- group interface shared with CirculantTopology -------------------------------------
    @property
    def n_ranks(self) -> int:
        return 1 << self.n_bits

    @property
    def degree(self) -> int:
        return len(self.generators)

    @staticmethod
    def add(x, g):
        """The neighbour of x along generator g (x XOR g); works on numpy arrays."""
        return x ^ g

    @staticmethod
    def sub(y, x):
        """The generator (group element) e with add(x, e) == y."""
        return y ^ x

    def neighbors(self, rank: int) -> tuple[int, ...]:
        self._check_rank(rank)
        return tuple(rank ^ g for g in self.generators)

    def _check_rank(self, rank: int) -> None:
        if not 0 <= rank < self.n_ranks:
            raise SpecError(f"rank={rank} is outside 0..{self.n_ranks - 1} of this topology")

    # -- derived properties ----------------------------------------------------------------
    @property
    def diameter(self) -> int:
        return invariants(self).diameter

    @property
    def is_complete(self) -> bool:
        return self.degree == self.n_ranks - 1

    @property
    def unit_masks(self) -> tuple[int, ...]:
        return tuple(g for g in self.generators if g & (g - 1) == 0)

    @property
    def folds(self) -> tuple[int, ...]:
        """Generators beyond the unit masks (Appendix A.1: 'folds')."""
        return tuple(g for g in self.generators if g & (g - 1))

    @property
    def effective_multiplicity(self) -> int:
        """An axis completes at the pace of its least-multiplied generator (Appendix A.2)."""
        m = self.multiplicity
        return m if isinstance(m, int) else min(m)

    def distance_layers(self) -> tuple[tuple[int, ...], ...]:
        """Ranks grouped by graph distance from rank 0 (the spheres of the Cayley graph)."""
        return invariants(self).spheres

    def coset_layers(self) -> tuple[tuple[int, ...], ...]:
        """A shortest tiling of the group by generator layers (Appendix A.3): sets S_j with
        (Z2)^n = T_1 (+) ... (+) T_l, T_j = {0} u S_j. Empty tuple on circulants."""
        return best_tiling(self, "min_ports")

    def axis_cosets(self, bit_block) -> tuple[tuple[int, ...], ...]:
        """Collective groups of an axis owning ``bit_block`` (bit positions or a mask): every coset
        of the block subgroup, i.e. all labels that agree outside the block (Appendix A.1)."""
        mask = _block_mask(bit_block, self.n_bits)
        bits = [b for b in range(self.n_bits) if mask >> b & 1]
        members = []
        for k in range(1 << len(bits)):
            members.append(sum(((k >> i) & 1) << b for i, b in enumerate(bits)))
        outside = [x for x in range(self.n_ranks) if x & mask == 0]
        return tuple(tuple(base | m for m in members) for base in outside)

    def sub_topology(self, bit_block) -> "CayleyTopology":
        """The axis's own Cayley graph: generators supported inside the block, bits compacted."""
        mask = _block_mask(bit_block, self.n_bits)
        bits = [b for b in range(self.n_bits) if mask >> b & 1]
        gens = []
        for g in self.generators:
            if g & ~mask == 0:
                gens.append(sum(((g >> b) & 1) << i for i, b in enumerate(bits)))
        return CayleyTopology(n_bits=len(bits), generators=tuple(gens), name=f"{self.name}[axis {mask:b}]")

    def describe(self) -> str:
        return self.name or f"Cay(Z2^{self.n_bits}, {[_bits(g, self.n_bits) for g in self.generators]})"


@dataclass(frozen=True, slots=True, kw_only=True)
class CirculantTopology:
    """Cay(Z_n, ±offsets): ring(n) is circulant(n, (1,)). Only ring and one-shot schedules run here."""

    n: int
    offsets: tuple[int, ...]
    multiplicity: Union[int, tuple[int, ...]] = 1
    name: str = field(default="", compare=False)

    kind = "cyclic"

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or not 2 <= self.n <= 1 << MAX_BITS:
            raise SpecError(f"ring size n={self.n!r} must be an integer in 2..{1 << MAX_BITS}")
        offs = tuple(self.offsets)
        object.__setattr__(self, "offsets", offs)
        if not offs:
            raise SpecError("circulant offsets are empty; give at least one offset, e.g. (1,) for a ring")
        for o in offs:
            if isinstance(o, bool) or not isinstance(o, int) or o % self.n == 0:
                raise SpecError(f"circulant offset {o!r} must be an integer not divisible by n={self.n}")
        if len({min(o % self.n, (-o) % self.n) for o in offs}) < len(offs):
            raise SpecError(f"circulant offsets {offs} repeat an offset (or its negative) modulo n={self.n}")
        if math.gcd(self.n, *offs) != 1:
            raise SpecError(
                f"circulant offsets {offs} share a factor with n={self.n}, so the graph is disconnected; include 1"
            )
        _check_multiplicity(self.multiplicity, len(self.generators))

    @property
    def generators(self) -> tuple[int, ...]:
        """The connection set {±o mod n}; a transfer's edge is the element it adds."""
        return tuple(sorted({o % self.n for o in self.offsets} | {(-o) % self.n for o in self.offsets}))

    @property
    def n_ranks(self) -> int:
        return self.n

    @property
    def degree(self) -> int:
        return len(self.generators)

    def add(self, x, g):
        return (x + g) % self.n

    def sub(self, y, x):
        return (y - x) % self.n

    def neighbors(self, rank: int) -> tuple[int, ...]:
        if not 0 <= rank < self.n:
            raise SpecError(f"rank={rank} is outside 0..{self.n - 1} of this topology")
        return tuple((rank + g) % self.n for g in self.generators)

    @property
    def diameter(self) -> int:
        return invariants(self).diameter

    @property
    def is_complete(self) -> bool:
        return self.degree == self.n - 1

    @property
    def effective_multiplicity(self) -> int:
        m = self.multiplicity
        return m if isinstance(m, int) else min(m)

    def distance_layers(self) -> tuple[tuple[int, ...], ...]:
        return invariants(self).spheres

    def coset_layers(self) -> tuple[tuple[int, ...], ...]:
        return ()

    def describe(self) -> str:
        return self.name or f"circulant({self.n}, {self.offsets})"


Topology = Union[CayleyTopology, CirculantTopology]


def _check_multiplicity(m, degree: int) -> None:
    if isinstance(m, bool):
        raise SpecError(f"multiplicity={m!r} must be a positive integer or one per generator")
    if isinstance(m, int):
        if m < 1:
            raise SpecError(f"multiplicity={m} must be >= 1 parallel circuits per logical edge")
        return
    if not isinstance(m, tuple) or len(m) != degree or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in m):
        raise SpecError(
            f"multiplicity={m!r} must be a positive integer or a tuple of {degree} positive integers (one per generator)"
        )


def _block_mask(bit_block, n_bits: int) -> int:
    if isinstance(bit_block, int):
        mask = bit_block
    else:
        mask = 0
        for b in bit_block:
            if not 0 <= b < n_bits:
                raise SpecError(f"bit position {b} is outside 0..{n_bits - 1}")
            mask |= 1 << b
    if not 0 < mask < 1 << n_bits:
        raise SpecError(f"bit block {bit_block!r} is empty or outside the {n_bits} label bits")
    return mask


# ---------------------------------------------------------------------------------------
# Constructors (Table 2)
# ---------------------------------------------------------------------------------------

def hypercube(n_bits: int, multiplicity: int = 1) -> CayleyTopology:
    """Q_n: the n unit masks; degree = diameter = n."""
    if isinstance(n_bits, bool) or not isinstance(n_bits, int) or not 1 <= n_bits <= MAX_BITS:
        raise SpecError(f"hypercube dims={n_bits!r} must be an integer in 1..{MAX_BITS} (N = 2^dims ranks)")
    return CayleyTopology(n_bits=n_bits, generators=tuple(1 << b for b in range(n_bits)),
                          multiplicity=multiplicity, name=f"Q{n_bits}")


def with_folds(topo: CayleyTopology, masks) -> CayleyTopology:
    """Q_n + g: add fold generators (Appendix A.1); duplicates and out-of-range masks are errors."""
    masks = tuple(masks)
    top = 1 << topo.n_bits
    for g in masks:
        if isinstance(g, bool) or not isinstance(g, int) or not 0 < g < top:
            raise SpecError(
                f"fold mask {g!r} is out of range for {topo.n_bits} bits; fold masks must be in 1..{top - 1}"
            )
        if g in topo.generators:
            raise SpecError(
                f"fold mask {_bits(g, topo.n_bits)} duplicates a generator of {topo.describe()}; drop it"
            )
    if len(set(masks)) != len(masks):
        dup = next(g for g in masks if masks.count(g) > 1)
        raise SpecError(f"fold mask {_bits(dup, topo.n_bits)} is given twice; list each fold once")
    mult = topo.multiplicity
    if not isinstance(mult, int):
        raise SpecError("with_folds needs a uniform multiplicity; set per-generator multiplicities afterwards")
    name = topo.name + "".join(f"+{_bits(g, topo.n_bits)}" for g in masks) if topo.name else ""
    return CayleyTopology(n_bits=topo.n_bits, generators=topo.generators + masks, multiplicity=mult, name=name)


def folded_cube(n_bits: int) -> CayleyTopology:
    """FQ_n = Q_n + 1...1: every node joined to its antipode; diameter ceil(n/2)."""
    if isinstance(n_bits, bool) or not isinstance(n_bits, int) or not 2 <= n_bits <= MAX_BITS:
        raise SpecError(f"folded cube dims={n_bits!r} must be an integer in 2..{MAX_BITS}")
    t = with_folds(hypercube(n_bits), [(1 << n_bits) - 1])
    return CayleyTopology(n_bits=t.n_bits, generators=t.generators, name=f"FQ{n_bits}")


def block_fold(bit_blocks, multiplicity: int = 1) -> CayleyTopology:
    """Q_a[k_1, ..., k_l] = K_{2^k1} □ ... □ K_{2^kl} (Table 2): every non-zero mask supported on
    one sub-block of k_j consecutive bits (sub-block 0 holds the lowest bits)."""
    blocks = tuple(bit_blocks)
    if not blocks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in blocks):
        raise SpecError(f"block fold {blocks!r} needs positive integer sub-block sizes, e.g. (3, 3) for K8□K8")
    n = sum(blocks)
    if n > MAX_BITS:
        raise SpecError(f"block fold {blocks} spans {n} bits; at most {MAX_BITS} are supported")
    gens: list[int] = []
    offset = 0
    for k in blocks:
        gens.extend(m << offset for m in range(1, 1 << k))
        offset += k
    name = "□".join(f"K{1 << k}" for k in blocks)
    return CayleyTopology(n_bits=n, generators=tuple(gens), multiplicity=multiplicity, name=name)


def ring(n: int, multiplicity: int = 1) -> CirculantTopology:
    return CirculantTopology(n=n, offsets=(1,), multiplicity=multiplicity, name=f"ring{n}")


def circulant(n: int, offsets, multiplicity: int = 1) -> CirculantTopology:
    return CirculantTopology(n=n, offsets=tuple(offsets), multiplicity=multiplicity)


# ---------------------------------------------------------------------------------------
# Invariants: distances from rank 0 (enough, by vertex transitivity), kept in a keyed cache
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Invariants:
    dist: np.ndarray  # dist[e] = graph distance from 0 to group element e
    spheres: tuple[tuple[int, ...], ...]  # spheres[k] = elements at distance k
    diameter: int


_INVARIANTS: dict[tuple, Invariants] = register_cache({})


def invariants(topo: Topology) -> Invariants:
    key = topology_key(topo)
    hit = _INVARIANTS.get(key)
    if hit is not None:
        return hit
    n = topo.n_ranks
    gens = np.asarray(topo.generators, dtype=np.int64)
    dist = np.full(n, -1, dtype=np.int64)
    dist[0] = 0
    frontier = np.zeros(1, dtype=np.int64)
    spheres = [(0,)]
    k = 0
    reached = np.zeros(n, dtype=bool)
    reached[0] = True
    while frontier.size:
        k += 1
        # the new elements in increasing order (a mask over the group instead of sorting: the same set)
        step = np.zeros(n, dtype=bool)
        step[topo.add(frontier[:, None], gens[None, :]).ravel()] = True
        nb = np.flatnonzero(step & ~reached)
        if nb.size == 0:
            break
        reached[nb] = True
        dist[nb] = k
        spheres.append(tuple(nb.tolist()))
        frontier = nb
    dist.setflags(write=False)
    inv = Invariants(dist=dist, spheres=tuple(spheres), diameter=len(spheres) - 1)
    _INVARIANTS[key] = inv
    return inv


def min_phases_lower_bound(topo: Topology) -> int:
    """Table 4 'min h': max(diameter, ceil(log_{d+1} N)) for any all-reduce schedule (A.3)."""
    n, d = topo.n_ranks, topo.degree
    k, reach = 0, 1
    while reach < n:
        reach *= d + 1
        k += 1
    return max(topo.diameter, k)


def parse_mask(value, n_bits: int) -> int:
    """A fold mask from the config edge: int, '0b1100', '0x0c' or a bit string like '1100' of n_bits digits."""
    if isinstance(value, bool):
        raise SpecError(f"fold mask {value!r} is not a mask; write e.g. 0b1100 or '1100'")
    if isinstance(value, int):
        return value
    text = str(value).strip().lower()
    try:
        if text.startswith("0b"):
            return int(text[2:], 2)
        if text.startswith("0x"):
            return int(text[2:], 16)
        if set(text) <= {"0", "1"} and len(text) == n_bits:
            return int(text, 2)
        return int(text, 10)
    except ValueError:
        raise SpecError(
            f"fold mask {value!r} is not a mask; write 0b1100, 0x0c, a {n_bits}-digit bit string or a decimal int"
        ) from None
