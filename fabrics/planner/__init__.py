"""The OCS planner (paper 003, Appendix A): shared-host (A.1-A.2) and stacked-link (A.6)
allocation of accelerator ports to the logical topologies of a deployment's meshes.

``plan(request)`` is a pure function of the request, cached by request hash (``plan_cache``) and,
where a caller attaches one (``attach_plan_store``), in a store shared between processes.
"""

from fabrics.planner.cache import PlanStore, attach_plan_store, clear_plan_cache, plan, plan_cache
from fabrics.planner.request import MeshRequest, PlanRequest, mesh_from_dict, request_from_dict, request_hash
from fabrics.planner.shared_host import AxisPlan, Plan, shared_host_plan
from fabrics.planner.stacked_link import stacked_link_plan

__all__ = [
    "AxisPlan", "MeshRequest", "Plan", "PlanRequest", "PlanStore", "attach_plan_store", "clear_plan_cache", "mesh_from_dict", "plan", "plan_cache",
    "request_from_dict", "request_hash", "shared_host_plan", "stacked_link_plan",
]

from fabrics.planner.demand import request_from_demand, traffic_from_demand  # noqa: E402

__all__ += ["request_from_demand", "traffic_from_demand"]
