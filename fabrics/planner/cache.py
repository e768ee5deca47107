"""Plan cache keyed by request hash (Appendix A.2: "a plan is a pure function of its request
and can be cached and reused"). Explicit, keyed and safe to delete (DESIGN.md)."""

from __future__ import annotations

from fabrics.planner.request import PlanRequest, request_hash

plan_cache: dict[str, object] = {}


def clear_plan_cache() -> None:
    from fabrics.planner.axis_cost import clear_axis_cache
    from fabrics.planner.stacked_link import clear_circulant_cache

    plan_cache.clear()
    clear_axis_cache()
    clear_circulant_cache()


def plan(request: PlanRequest):
    """The plan for ``request`` (shared-host or stacked-link), from the cache when known."""
    key = request_hash(request)
    hit = plan_cache.get(key)
    if hit is not None:
        return hit
    if request.allocation == "stacked_link":
        from fabrics.planner.stacked_link import stacked_link_plan

        result = stacked_link_plan(request)
    else:
        from fabrics.planner.shared_host import shared_host_plan

        result = shared_host_plan(request)
    plan_cache[key] = result
    return result
