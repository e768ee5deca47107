"""Bipartite edge colouring (König): proper with max-degree colours."""

import itertools

from hypothesis import given, settings, strategies as st

from fabrics.scaleup.colouring import colour_bipartite


@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=60), st.integers(1, 4))
@settings(max_examples=60, deadline=None)
def test_bipartite_colouring_is_proper_with_max_degree_colours(edges, extra):
    deg = max([sum(1 for a, _ in edges if a == x) for x in range(8)] + [sum(1 for _, b in edges if b == x) for x in range(8)] + [1])
    col = colour_bipartite(edges, deg + extra - 1)
    for i, j in itertools.combinations(range(len(edges)), 2):
        if edges[i][0] == edges[j][0] or edges[i][1] == edges[j][1]:
            assert col[i] != col[j]
