"""Demand table (Table 1) → plan request and hybrid traffic."""

import pytest

from collectives.errors import SpecError
from fabrics.network.protocol import DemandEntry
from pipelines.network import fabric_from_dict
from fabrics.planner import plan, request_from_demand, traffic_from_demand
from fabrics.planner.demand import mesh_axis_groups
from fabrics.scaleup.allocation import balanced_hybrid_allocation, rack_demand_bytes
from fabrics.scaleup.ocs_configuration import hybrid_for_demand
from fabrics.scaleup.paths import route

KiB = 1024


def table1_b1(world=512):
    rows = [("attention", "world", "allreduce", 1, 512, 128, 4 * KiB), ("attention", "kvp", "alltoall", 128, 4, 128, 66),
            ("attention", "tpa", "none", 4, 128, 0, 0), ("ffn", "ep", "allgather", 8, 64, 128, 256 * KiB),
            ("ffn", "tpe", "allreduce", 64, 8, 128, 4 * KiB), ("lm_head", "world", "allgather", 1, 512, 1, 25 * KiB)]
    return tuple(DemandEntry(region=r, axis=a, collective=c, groups=g, ranks=n, calls_per_step=k, payload_bytes=p)
                 for r, a, c, g, n, k, p in rows)


def test_mesh_axis_groups_are_row_major():
    assert mesh_axis_groups((2, 4), 1) == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert mesh_axis_groups((2, 4), 0) == ((0, 4), (1, 5), (2, 6), (3, 7))


def test_request_from_table1():
    req, where = request_from_demand(table1_b1(), world=512, ports=36, link_rate_Bps=5e10, hop_latency_s=0.52e-6)
    shapes = [m.shape for m in req.meshes]
    assert shapes == [(512,), (512,), (4, 128), (64, 8)]
    assert where[("attention", "kvp", "alltoall")] == (2, 0)
    assert where[("ffn", "tpe", "allreduce")] == (3, 1)
    assert req.meshes[2].collectives == ("alltoall", "none")
    assert req.meshes[3].weights == (128.0, 128.0)


def test_plan_prices_every_demand_row():
    req, where = request_from_demand(table1_b1(), world=512, ports=36, link_rate_Bps=5e10, hop_latency_s=0.52e-6)
    p = plan(req)
    assert p.ports_used <= 36
    for (mesh, axis) in where.values():
        ax = next(a for a in p.axes if (a.mesh, a.axis) == (mesh, axis))
        assert ax.time_s > 0 and ax.phases >= 1


def test_bad_demand():
    bad = (DemandEntry(region="ffn", axis="ep", collective="allgather", groups=3, ranks=64, calls_per_step=1,
                       payload_bytes=1),)
    with pytest.raises(SpecError, match="cover"):
        request_from_demand(bad, world=512, ports=36, link_rate_Bps=5e10, hop_latency_s=0.52e-6)


def test_hybrid_planned_from_demand_routes_every_demanded_pair():
    f = fabric_from_dict({"kind": "hybrid", "ports": 36, "link_rate": 5e10, "accelerators": 576}, world=512)
    traffic = traffic_from_demand(table1_b1(), 512)
    alloc = balanced_hybrid_allocation(f, 512, traffic)
    r = route(f, alloc, hybrid_for_demand(f, rack_demand_bytes(alloc.rack_of_rank(f), traffic, f.spec.racks)))
    for t in traffic:
        g = t.groups[0]
        assert r.paths(g[0], g[-1])  # reachable
    assert r.latency_s(0, 511) >= 0.81e-6
