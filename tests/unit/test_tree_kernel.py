"""The compiled last-hop assignment (collectives/tree_kernel.c) builds the same trees as the Python loop."""

import numpy as np
import pytest

from collectives import trees
from collectives.topology import CayleyTopology, circulant, hypercube, with_folds

pytestmark = pytest.mark.skipif(trees._tree_kernel() is None, reason="collectives._tree_kernel not built")


def _python_trees(topos):
    previous = trees.use_compiled_trees(False)
    try:
        trees._TREES.clear()
        return [trees.balanced_tree(t) for t in topos]
    finally:
        trees.use_compiled_trees(previous)
        trees._TREES.clear()


def _random_cayley(rng, n_bits):
    gens = set(1 << b for b in range(n_bits))  # spanning
    while len(gens) < n_bits + int(rng.integers(0, n_bits + 1)):
        gens.add(int(rng.integers(1, 1 << n_bits)))
    return CayleyTopology(n_bits=n_bits, generators=tuple(sorted(gens)))


def test_compiled_trees_equal_the_python_trees():
    rng = np.random.default_rng(7)
    topos = [hypercube(6), with_folds(hypercube(5), [0b11111]), circulant(24, (1, 5, 7)), circulant(30, (1, 4))]
    topos += [_random_cayley(rng, int(rng.integers(3, 9))) for _ in range(30)]
    reference = _python_trees(topos)
    trees._TREES.clear()
    compiled = [trees.balanced_tree(t) for t in topos]
    trees._TREES.clear()
    for topo, ref, got in zip(topos, reference, compiled):
        assert got == ref, topo
        assert list(got.last_hop) == list(ref.last_hop)


def test_compiled_assignment_raises_the_cap_like_python():
    # random sparse option sets, many of which cannot meet the pigeonhole cap (the cap rises)
    rng = np.random.default_rng(3)
    raised = 0
    for _ in range(200):
        n, G = int(rng.integers(1, 40)), int(rng.integers(1, 9))
        ok = rng.random((G, n)) < rng.uniform(0.05, 0.4)
        ok[rng.integers(0, G, n), np.arange(n)] = True  # every item has an option
        items = [int(x) for x in rng.permutation(1000)[:n]]
        gens = tuple(range(10, 10 + G))
        got = trees._bottleneck_assign(items, ok, gens)
        previous = trees.use_compiled_trees(False)
        try:
            ref = trees._bottleneck_assign(items, ok, gens)
        finally:
            trees.use_compiled_trees(previous)
        assert got == ref
        counts = np.bincount([g - 10 for g in got.values()], minlength=G)
        raised += int(counts.max() > -(-n // G))
    assert raised > 20  # the failing-cap path was exercised
