"""Unit tests for collectives.trees (balanced shortest-path trees for one-shot DVO / direct)."""

import math
import random

from collectives.topology import CayleyTopology, circulant, hypercube, invariants, with_folds
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


def _relabelled(topo, perm):
    """The same Cayley graph with bit i of every generator moved to bit perm[i]."""
    move = lambda m: sum(((m >> i) & 1) << perm[i] for i in range(len(perm)))  # noqa: E731
    return CayleyTopology(n_bits=topo.n_bits, generators=tuple(sorted(move(g) for g in topo.generators)))


def test_the_busiest_generator_per_sphere_does_not_depend_on_how_the_bits_are_labelled():
    # each sphere's bottleneck is the smallest feasible capacity, an optimum of the graph, so a
    # relabelling of the bits keeps every level's busiest load (the one-shot DVO volume); which
    # element gets which generator may change (direct's subtree-weighted volume does: docs/collectives.md)
    rng = random.Random(7)
    for _ in range(40):
        n = rng.choice((4, 5, 6, 7))
        folds = [m for m in rng.sample(range(3, 1 << n), rng.randint(0, 3)) if m & (m - 1)]
        topo = with_folds(hypercube(n), folds)
        perm = list(range(n))
        rng.shuffle(perm)
        other = _relabelled(topo, perm)
        busiest = [max(load.values()) for load in balanced_tree(topo).level_loads]
        assert busiest == [max(load.values()) for load in balanced_tree(other).level_loads], (topo.generators, perm)
