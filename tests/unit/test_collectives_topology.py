"""Unit tests for collectives.topology (Cayley graphs of (Z2)^n and Z_n, Table 2)."""

import pytest

from collectives.errors import SpecError
from collectives.topology import (CayleyTopology, block_fold, circulant, folded_cube, hypercube, min_phases_lower_bound,
                                  parse_mask, ring, with_folds)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 9])
def test_hypercube_degree_and_diameter_equal_n(n):
    q = hypercube(n)
    assert (q.n_ranks, q.degree, q.diameter) == (2**n, n, n)
    assert q.unit_masks == q.generators and q.folds == ()


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 9])
def test_folded_cube_diameter_is_ceil_half(n):
    fq = folded_cube(n)
    assert fq.degree == n + 1
    assert fq.diameter == (n + 1) // 2
    assert fq.folds == (2**n - 1,)


def test_block_fold_table2_example():
    # Table 2 caption: Q5[3, 2] = K8 □ K4 has degree 7 + 3 = 10 and diameter 2
    t = block_fold((3, 2))
    assert (t.n_ranks, t.degree, t.diameter) == (32, 10, 2)
    assert block_fold((3, 3)).name == "K8□K8"
    assert block_fold((4, 3)).degree == 15 + 7


def test_neighbors_are_xor_translates():
    t = with_folds(hypercube(4), [0b1100])
    assert t.neighbors(0b0101) == (0b0100, 0b0111, 0b0001, 0b1101, 0b1001)
    with pytest.raises(SpecError):
        t.neighbors(16)


def test_distance_layers_partition_the_group():
    t = with_folds(hypercube(4), [0b1100])
    layers = t.distance_layers()
    assert [len(s) for s in layers] == [1, 5, 7, 3]
    assert sorted(x for s in layers for x in s) == list(range(16))


def test_axis_cosets_are_the_collective_groups():
    q = hypercube(4)
    groups = q.axis_cosets((0, 1))  # axis B of the (4, 4) mesh: bits b1 b0
    assert len(groups) == 4 and all(len(g) == 4 for g in groups)
    assert sorted(x for g in groups for x in g) == list(range(16))
    for g in groups:
        assert len({x & 0b1100 for x in g}) == 1  # agree outside the block
    assert q.axis_cosets(0b1000) == q.axis_cosets((3,))


def test_sub_topology_keeps_generators_inside_the_block():
    t = with_folds(hypercube(4), [0b0011, 0b1100])
    sub = t.sub_topology((0, 1))
    assert sub.n_bits == 2 and sorted(sub.generators) == [1, 2, 3]
    assert sub.diameter == 1


def test_ring_and_circulant():
    r = ring(8)
    assert (r.n_ranks, r.degree, r.diameter) == (8, 2, 4)
    c = circulant(16, (1, 5))
    assert c.generators == (1, 5, 11, 15)
    assert c.neighbors(0) == (1, 5, 11, 15)
    assert ring(2).degree == 1


def test_min_phases_lower_bound_is_max_of_diameter_and_log():
    assert min_phases_lower_bound(hypercube(3)) == 3
    assert min_phases_lower_bound(block_fold((3,))) == 1
    assert min_phases_lower_bound(with_folds(hypercube(4), [0b1111])) == 2


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda: with_folds(hypercube(4), [16]), "out of range"),
        (lambda: with_folds(hypercube(4), [0]), "out of range"),
        (lambda: with_folds(hypercube(4), [0b0001]), "duplicates a generator"),
        (lambda: with_folds(hypercube(4), [0b1100, 0b1100]), "given twice"),
        (lambda: CayleyTopology(n_bits=3, generators=(1, 2)), "do not span"),
        (lambda: hypercube(0), "dims"),
        (lambda: hypercube(3, multiplicity=0), "multiplicity"),
        (lambda: circulant(12, (2, 4)), "disconnected"),
        (lambda: circulant(8, (1, 7)), "repeat"),
        (lambda: block_fold((3, 0)), "block fold"),
    ],
)
def test_bad_input_is_one_line_spec_error(make, fragment):
    with pytest.raises(SpecError) as exc:
        make()
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_parse_mask_forms():
    assert parse_mask(12, 4) == 12
    assert parse_mask("0b1100", 4) == 12
    assert parse_mask("1100", 4) == 12
    assert parse_mask("0x0c", 4) == 12
    with pytest.raises(SpecError):
        parse_mask("zz", 4)


def test_topologies_are_hashable_values():
    a = with_folds(hypercube(4), [0b1100])
    b = CayleyTopology(n_bits=4, generators=(1, 2, 4, 8, 12))
    assert a == b and hash(a) == hash(b)
    assert a.effective_multiplicity == 1
    assert CayleyTopology(n_bits=2, generators=(1, 2), multiplicity=(2, 3)).effective_multiplicity == 2


def test_clear_caches_empties_every_registered_cache():
    # one registry (collectives.caches) for the caches of topology, layers and frontiers
    import collectives.caches as C
    import collectives.frontiers as F
    import collectives.layers as L
    import collectives.topology as T

    topo = T.with_folds(T.hypercube(4), [0b1111])
    topo.coset_layers(), topo.diameter, F.diameter_frontier(8)
    filled = [T._INVARIANTS, L._BEST, F._FRONTIER]
    assert all(filled) and all(any(c is d for d in C._CACHES) for c in filled)
    assert T.clear_caches is C.clear_caches and T.topology_key is C.topology_key
    T.clear_caches()
    assert not any(filled)
