"""Bipartite edge colouring (König's theorem), deterministic.

Assigning circuits to uplinks is an edge colouring of a bipartite multigraph (source rack,
destination rack): no two circuits leaving or entering one rack may use the same uplink. König:
``colours`` ≥ the largest degree always suffices, which is why ``up_ports`` ≥ rack size makes the
two-level all-OCS fabric non-blocking (paper 003, Appendix C.7).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence


def colour_bipartite(edges: Sequence[tuple[int, int]], colours: int) -> list[int]:
    """Colour the edges of a bipartite multigraph (left, right) with ``colours`` colours so that
    no two edges sharing an endpoint get the same colour; raises ``ValueError`` when a vertex has
    more edges than colours. Kempe-chain algorithm, deterministic."""
    at_left: dict[int, dict[int, int]] = defaultdict(dict)
    at_right: dict[int, dict[int, int]] = defaultdict(dict)
    col = [-1] * len(edges)

    def free(table: dict[int, int]) -> int:
        for c in range(colours):
            if c not in table:
                return c
        raise ValueError("vertex degree exceeds the number of colours")

    for e, (a, b) in enumerate(edges):
        alpha = free(at_left[a])
        if alpha in at_right[b]:
            beta = free(at_right[b])
            # Alternate alpha/beta from b; in a bipartite graph the chain never reaches a.
            chain, node, right, c = [], b, True, alpha
            while True:
                table = at_right[node] if right else at_left[node]
                if c not in table:
                    break
                e2 = table[c]
                chain.append(e2)
                node = edges[e2][0] if right else edges[e2][1]
                right = not right
                c = beta if c == alpha else alpha
            for e2 in chain:
                del at_left[edges[e2][0]][col[e2]]
                del at_right[edges[e2][1]][col[e2]]
            for e2 in chain:
                col[e2] = beta if col[e2] == alpha else alpha
                at_left[edges[e2][0]][col[e2]] = e2
                at_right[edges[e2][1]][col[e2]] = e2
        col[e] = alpha
        at_left[a][alpha] = e
        at_right[b][alpha] = e
    return col
