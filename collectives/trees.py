"""Balanced shortest-path trees on a Cayley graph (one-shot DVO, direct all-to-all).

By vertex transitivity one tree T of rank 0 serves every origin o as o + T. Each element
delta at distance k picks the generator g of its last hop (its parent is delta - g, at distance
k - 1). In phase k every rank then sends, over generator g, one item per delta at distance k
whose last hop is g. The data-volume-optimised one-shot (DVO) chooses these last hops so that
the most loaded generator per phase carries as little as possible: an exact bottleneck
assignment per sphere (the smallest feasible capacity, found upwards from the pigeonhole floor,
then augmenting paths), deterministic. The assignment runs compiled when setup.py built
``tree_kernel.c`` (the same search step for step, so the same trees) and in Python otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from collectives.compiled import OptionalExtension
from collectives.topology import invariants, register_cache, topology_key

_TREES: dict[tuple, "BalancedTree"] = register_cache({})


@dataclass(frozen=True, slots=True)
class BalancedTree:
    last_hop: dict  # delta -> generator of the last hop (delta != 0)
    level_loads: tuple[dict, ...]  # level_loads[k-1][g] = #deltas at distance k with last hop g
    subtree: dict  # delta -> size of its subtree (including itself)

    def route(self, delta: int, topo) -> tuple[int, ...]:
        """Generators along the tree path from 0 to delta."""
        hops = []
        while delta != 0:
            g = self.last_hop[delta]
            hops.append(g)
            delta = topo.sub(delta, g)
        return tuple(reversed(hops))


def balanced_tree(topo) -> BalancedTree:
    key = topology_key(topo)
    hit = _TREES.get(key)
    if hit is not None:
        return hit
    inv = invariants(topo)
    dist = inv.dist
    gens = tuple(sorted(topo.generators))
    last_hop: dict[int, int] = {}
    loads = []
    for k in range(1, len(inv.spheres)):
        items = inv.spheres[k]
        # the last hops of each delta (its generators g with dist(delta - g) = k - 1), found for the
        # whole sphere at once; the same lists, in generator order, as testing delta by delta
        parent = np.asarray(items, dtype=np.int64)
        ok = np.stack([dist[topo.sub(parent, g)] == k - 1 for g in gens])
        assignment = _bottleneck_assign(items, ok, gens)
        last_hop.update(assignment)
        load = {g: 0 for g in gens}
        for g in assignment.values():
            load[g] += 1
        loads.append(load)
    subtree = {d: 1 for d in last_hop}
    subtree[0] = 1
    for k in range(len(inv.spheres) - 1, 0, -1):
        for d in inv.spheres[k]:
            subtree[topo.sub(d, last_hop[d])] += subtree[d]
    tree = BalancedTree(last_hop=last_hop, level_loads=tuple(loads), subtree=subtree)
    _TREES[key] = tree
    return tree


_KERNEL = OptionalExtension("collectives._tree_kernel", abi=1)  # TK_ABI of tree_kernel.c


def use_compiled_trees(on: bool) -> bool:
    """Assign last hops with the built kernel (True, the default) or in Python; returns the previous choice."""
    return _KERNEL.use(on)


def _tree_kernel():
    return _KERNEL.load()


def _bottleneck_assign(items, ok: np.ndarray, gens) -> dict:
    """Assign each item one of its options (``ok[g, i]``: generator g may be item i's last hop)
    minimising the largest count per option."""
    cap = max(1, math.ceil(len(items) / len(gens)))
    kernel = _tree_kernel()
    if kernel is not None:
        okb = np.ascontiguousarray(ok, dtype=np.uint8)
        picks = np.empty(len(items), dtype=np.int32)
        while not kernel.assign(okb, len(items), len(gens), cap, picks):
            cap += 1
        return dict(zip(items, np.asarray(gens)[picks].tolist()))
    rows = ok.tolist()
    options = {d: [g for g, row in zip(gens, rows) if row[i]] for i, d in enumerate(items)}
    while True:
        result = _assign_with_cap(items, options, gens, cap)
        if result is not None:
            return result
        cap += 1


def _assign_with_cap(items, options, gens, cap):
    owned: dict[int, list[int]] = {g: [] for g in gens}
    match: dict[int, int] = {}

    def augment(item, visited) -> bool:
        for g in options[item]:
            if g in visited:
                continue
            visited.add(g)
            if len(owned[g]) < cap:
                owned[g].append(item)
                match[item] = g
                return True
            for other in list(owned[g]):
                if augment(other, visited):
                    owned[g].remove(other)
                    owned[g].append(item)
                    match[item] = g
                    return True
        return False

    for it in items:
        if not augment(it, set()):
            return None
    return match
