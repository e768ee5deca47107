"""Unit tests for collectives.trees (balanced shortest-path trees for one-shot DVO / direct)."""

import math

from collectives.topology import circulant, hypercube, invariants, with_folds
from collectives.trees import balanced_tree


def test_tree_is_a_shortest_path_tree():
    for topo in (hypercube(5), with_folds(hypercube(4), [0b1111]), circulant(16, (1, 5))):
        tree = balanced_tree(topo)
        dist = invariants(topo).dist
        for d, g in tree.last_hop.items():
            assert g in topo.generators
            assert dist[topo.sub(d, g)] == dist[d] - 1
            assert len(tree.route(d, topo)) == dist[d]
        assert tree.subtree[0] == topo.n_ranks


def test_loads_are_balanced_optimally_on_the_cube():
    # on Q_n every weight-k label can take any of its k set bits: the bottleneck is ceil(C(n,k)/n)
    n = 6
    tree = balanced_tree(hypercube(n))
    for k, load in enumerate(tree.level_loads, start=1):
        assert max(load.values()) == math.ceil(math.comb(n, k) / n)
