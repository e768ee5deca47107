"""The keyed caches of derived topology facts (invariants, tilings, frontiers, trees, schedule
verdicts and costs): one registry, so ``clear_caches()`` empties them all.

A cache is a plain dict keyed by ``topology_key(topo)`` (plus whatever else selects the entry);
the module that fills it registers it here. Kept apart from ``collectives.topology`` so the
modules that cache results about topologies (layers, frontiers) need not import it.
"""

from __future__ import annotations

_CACHES: list[dict] = []


def topology_key(topo) -> tuple:
    """Hashable identity of the graph (multiplicity and name do not change distances or layers)."""
    if topo.kind == "xor":
        return ("xor", topo.n_bits, tuple(sorted(topo.generators)))
    return ("cyclic", topo.n, topo.generators)


def register_cache(cache: dict) -> dict:
    _CACHES.append(cache)
    return cache


def clear_caches() -> None:
    for c in _CACHES:
        c.clear()
