"""Plan cache keyed by request hash (Appendix A.2: "a plan is a pure function of its request
and can be cached and reused"). Explicit, keyed and safe to delete (DESIGN.md).

Two tiers: ``plan_cache`` in this process, and an optional ``PlanStore`` that a caller attaches
(``attach_plan_store``) to share plans between processes and runs -- the store does the I/O and
lives in ``pipelines`` (``pipelines.plan_store``); the planner only sees this interface. A store
answers ``None`` for what it does not hold (or cannot read), so a lost or corrupt store only
costs planning time, never a different plan.
"""

from __future__ import annotations

from typing import Protocol

from fabrics.planner.request import PlanRequest, request_hash

plan_cache: dict[str, object] = {}


class PlanStore(Protocol):
    def load(self, key: str):
        """The plan stored under ``key`` (a request hash), or None."""

    def save(self, key: str, plan) -> None:
        """Keep ``plan`` under ``key``; may silently do nothing."""


_store: list[PlanStore] = []  # at most one attached store (explicit: attach_plan_store)


def attach_plan_store(store: PlanStore | None) -> PlanStore | None:
    """Use ``store`` behind the in-process cache from now on (None: none); returns the previous one."""
    previous = _store[0] if _store else None
    _store.clear()
    if store is not None:
        _store.append(store)
    return previous


def clear_plan_cache() -> None:
    """Empty this process's caches (an attached store keeps its plans; delete its folder to clear it)."""
    from fabrics.planner.axis_cost import clear_axis_cache
    from fabrics.planner.shared_host import clear_search_tables
    from fabrics.planner.stacked_link import clear_circulant_cache

    plan_cache.clear()
    clear_axis_cache()
    clear_search_tables()
    clear_circulant_cache()


def _compute(request: PlanRequest):
    if request.allocation == "stacked_link":
        from fabrics.planner.stacked_link import stacked_link_plan

        return stacked_link_plan(request)
    from fabrics.planner.shared_host import shared_host_plan

    return shared_host_plan(request)


def plan(request: PlanRequest):
    """The plan for ``request`` (shared-host or stacked-link): from this process's cache, else the
    attached store, else planned (and given to the store)."""
    key = request_hash(request)
    hit = plan_cache.get(key)
    if hit is not None:
        return hit
    store = _store[0] if _store else None
    result = store.load(key) if store is not None else None
    if result is None or getattr(result, "request_hash", None) != key:
        result = _compute(request)
        if store is not None:
            store.save(key, result)
    plan_cache[key] = result
    return result
