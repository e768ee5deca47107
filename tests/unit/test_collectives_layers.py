"""Unit tests for collectives.layers: tilings of (Z2)^n by coset layers (Appendix A.3)."""

from fractions import Fraction

import pytest

from collectives.layers import (ag_volume_blocks, basis_tiling, best_tiling, complete_subspaces, radices,
                                rotated_max_volume, rs_volume, tilings, _rs_piece)
from collectives.topology import block_fold, circulant, folded_cube, hypercube, with_folds


def _is_direct_tiling(tiling, n_bits):
    sums = {0}
    for layer in tiling:
        sums = {a ^ t for a in sums for t in (0,) + tuple(layer)}
    size = 1
    for layer in tiling:
        size *= len(layer) + 1
    return size == 2**n_bits and len(sums) == 2**n_bits


@pytest.mark.parametrize(
    "topo, length",
    [
        (hypercube(3), 3),
        (folded_cube(3), 2),
        (hypercube(4), 4),
        (with_folds(hypercube(4), [0b1100]), 3),
        (with_folds(hypercube(4), [0b1111]), 3),  # no 2-layer tiling although the diameter is 2
        (block_fold((3, 3)), 2),
        (block_fold((4, 3)), 2),
        (block_fold((2, 2, 2)), 3),
        (block_fold((6,)), 1),
    ],
)
def test_minimum_tilings(topo, length):
    ts = tilings(topo)
    assert ts and all(len(t) == length for t in ts)
    for t in ts:
        assert _is_direct_tiling(t, topo.n_bits)
        used = [g for layer in t for g in layer]
        assert len(used) == len(set(used)) and set(used) <= set(topo.generators)


def test_q4_plus_1111_needs_a_transversal_layer():
    t = best_tiling(with_folds(hypercube(4), [0b1111]), "min_ports")
    assert radices(t) == (4, 2, 2)
    big = set(t[0]) | {0}
    # {0, a, b, c} is not a subgroup: it is a transversal of the subspace the other layers span
    assert any(a ^ b not in big for a in big for b in big)


def test_circulants_have_no_tilings():
    assert tilings(circulant(16, (1, 5))) == ()


def test_complete_subspaces_of_k4():
    subs = complete_subspaces(frozenset({1, 2, 3}))
    assert subs[0] == (1, 2, 3) and len(subs) == 4


def test_basis_tiling_prefers_unit_masks():
    assert basis_tiling(folded_cube(3)) == ((1,), (2,), (4,))
    assert basis_tiling(block_fold((2, 1))) == ((1,), (2,), (4,))


def test_volume_formulas():
    # Eq. 4 on a plain cube: 2 (N-1)/N
    assert 2 * rs_volume((2,) * 5) == Fraction(2 * 31, 32)
    # K8 □ K8: 2 (1/8 + 1/64)
    assert 2 * rs_volume((8, 8)) == Fraction(9, 32)
    assert ag_volume_blocks((2, 2, 2)) == 7
    # uniform radices: the parallel variant divides by l
    assert rotated_max_volume((2, 2, 2), _rs_piece) == rs_volume((2, 2, 2)) / 3


def test_rs_objective_orders_largest_radix_first():
    t = best_tiling(block_fold((2, 1)), "rs")
    assert radices(t) == (4, 2)
    t = best_tiling(block_fold((2, 1)), "ag")
    assert radices(t) == (2, 4)


def test_independent_bit_blocks_tile_separately():
    # Q6 with a 111 fold in each 3-bit block = FQ3 x FQ3: 2 + 2 layers (each with a transversal)
    t = with_folds(hypercube(6), [0b000111, 0b111000])
    ts = tilings(t)
    assert ts and all(len(x) == 4 for x in ts)
    assert all(_is_direct_tiling(x, 6) for x in ts)
    assert t.diameter == 4
