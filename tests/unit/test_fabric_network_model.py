"""fabrics.network.analytical.FabricAnalytical and fabrics.scaleup.deployment on small worlds (16-64)."""

import numpy as np
import pytest

from collectives.errors import SpecError
from fabrics.network.analytical import FabricAnalytical
from fabrics.scaleup.deployment import prepare_fabric
from fabrics.network.protocol import CollectiveCall, DemandEntry, NetworkModel
from pipelines.network import fabric_from_dict
from fabrics.planner import plan, request_from_demand

R = 5e10
KINDS = ["single_eps", "single_ocs", "all_eps", "hybrid", "all_ocs"]


def fabric(kind, world, ports=8):
    d = {"kind": kind, "ports": ports, "link_rate": R}
    if kind in ("all_eps", "hybrid", "all_ocs"):  # racks of 8, 4:1 for the EPS fabrics
        d.update(accelerators=world, down_ports=8, switch_radix=16, up_ports=8 if kind == "all_ocs" else 2)
    return fabric_from_dict(d, world=world)


def mesh_demand(world, a, b, payload_a=1024, payload_b=4096, coll_a="alltoall", coll_b="allreduce"):
    """A 2-D region mesh (a, b) with a collective per axis, plus a world all-reduce."""
    return (
        DemandEntry(region="attention", axis="world", collective="allreduce", groups=1, ranks=world,
                    calls_per_step=4, payload_bytes=2048),
        DemandEntry(region="ffn", axis="ep", collective=coll_a, groups=b, ranks=a, calls_per_step=4,
                    payload_bytes=payload_a),
        DemandEntry(region="ffn", axis="tpe", collective=coll_b, groups=a, ranks=b, calls_per_step=4,
                    payload_bytes=payload_b),
    )


def mesh_groups(a, b, axis):
    """gxnet's row-major numbering: rank = ep_i * b + tpe_i."""
    if axis == "ep":
        return tuple(tuple(o * b + i for o in range(a)) for i in range(b))
    return tuple(tuple(o * b + i for i in range(b)) for o in range(a))


def call(cid, row, groups, payload=None):
    return CollectiveCall(call_id=cid, region=row.region, axis=row.axis, collective=row.collective,
                          groups=groups, payload_bytes=row.payload_bytes if payload is None else payload)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("world", [16, 64])
def test_protocol_on_every_fabric(kind, world):
    net = FabricAnalytical(fabric(kind, world))
    assert isinstance(net, NetworkModel)
    demand = mesh_demand(world, 4, world // 4)
    net.prepare(demand, world)
    calls = [call(0, demand[0], (tuple(range(world)),)), call(1, demand[1], mesh_groups(4, world // 4, "ep")),
             call(2, demand[2], mesh_groups(4, world // 4, "tpe"))]
    for c in calls:
        net.register(c, 1e-6 * c.call_id)
    done = net.advance()
    assert [c.call_id for c in done] == [0, 1, 2]
    for c in done:
        assert c.start_s == pytest.approx(1e-6 * c.call_id)
        # at least one path latency (≥ one OCS hop, 0.52 µs), at most a few µs at these sizes
        assert 0.5e-6 < c.end_s - c.start_s < 20e-6
        assert c.schedule and c.schedule != "none"
    assert net.advance() == []
    if kind in ("hybrid", "single_ocs", "all_ocs"):
        assert net.plan_json is not None and net.plan_summary()["fabric"] == kind
    else:
        assert net.plan_json is None and net.plan_summary() is None


def test_outside_demand_is_an_error():
    net = FabricAnalytical(fabric("all_eps", 32))
    demand = mesh_demand(32, 4, 8)
    net.prepare(demand, 32)
    bad = CollectiveCall(call_id=0, region="ffn", axis="ep", collective="allgather",
                         groups=mesh_groups(4, 8, "ep"), payload_bytes=64)
    with pytest.raises(RuntimeError, match="outside the declared demand"):
        net.register(bad, 0.0)


def test_register_before_prepare_is_an_error():
    net = FabricAnalytical(fabric("single_eps", 16))
    with pytest.raises(RuntimeError, match="prepare"):
        net.price(CollectiveCall(call_id=0, region="a", axis="world", collective="allreduce",
                                 groups=(tuple(range(16)),), payload_bytes=8))


def test_eps_native_choice_follows_size():
    """One-shot for small buffers, two-shot once bandwidth dominates, halving-doubling never
    cheaper on one switched hop at these sizes; each choice is the model's own minimum."""
    world = 16
    net = FabricAnalytical(fabric("single_eps", world))
    chosen = {}
    for size in (256, 1 << 20):
        demand = (DemandEntry(region="r", axis="world", collective="allreduce", groups=1, ranks=world,
                              calls_per_step=1, payload_bytes=size),)
        net.prepare(demand, world)
        c = call(0, demand[0], (tuple(range(world)),))
        t, name = net.price(c)
        lines = net.schedule_lines(c)
        assert set(lines) == {"one_shot", "two_shot", "halving_doubling"}
        assert t == pytest.approx(min(ln.time_s(size) for ln in lines.values()))
        chosen[size] = name
    assert chosen == {256: "one_shot", 1 << 20: "two_shot"}


def test_single_eps_matches_single_level_hockney():
    """On one switched hop the fabric model reduces to the single-level Hockney model (Eq. 1)."""
    from fabrics.network.analytical import SingleLevelParams, native_time_s

    world, ports = 32, 8
    net = FabricAnalytical(fabric("single_eps", world, ports))
    params = SingleLevelParams(hop_latency_s=0.81e-6, link_rate_Bps=R, ports=ports)
    for coll in ("allreduce", "alltoall", "allgather"):
        for size in (64, 4096, 1 << 18):
            demand = (DemandEntry(region="r", axis="world", collective=coll, groups=1, ranks=world,
                                  calls_per_step=1, payload_bytes=size),)
            net.prepare(demand, world)
            t, _ = net.price(call(0, demand[0], (tuple(range(world)),)))
            ref, _ = native_time_s(params, coll, world, size)
            assert t == pytest.approx(ref, rel=1e-9)


def test_concurrent_groups_share_the_oversubscribed_uplinks():
    """All-EPS, 4:1: 8 groups of 8 spanning racks load the same uplinks; one group alone is faster."""
    world = 64
    net = FabricAnalytical(fabric("all_eps", world))
    groups = mesh_groups(8, 8, "ep")  # stride 8: every member in another rack
    demand = (DemandEntry(region="ffn", axis="ep", collective="allgather", groups=8, ranks=8, calls_per_step=1,
                          payload_bytes=1 << 20),)
    net.prepare(demand, world)
    all_groups = net.schedule_lines(call(0, demand[0], groups))["one_shot"]
    pricer = net.deployment.pricer
    from fabrics.scaleup.native import native_phases

    alone = pricer.schedule_line(native_phases("allgather", "one_shot", 8), np.asarray(groups[:1]))
    assert all_groups.latency_s == pytest.approx(alone.latency_s)
    assert all_groups.seconds_per_byte > 2 * alone.seconds_per_byte


def test_prices_are_cached_per_structure_and_payload():
    net = FabricAnalytical(fabric("all_ocs", 32))
    demand = mesh_demand(32, 4, 8)
    net.prepare(demand, 32)
    groups = mesh_groups(4, 8, "tpe")
    first = net.price(call(0, demand[2], groups))
    assert net.price(call(1, demand[2], groups)) == first
    assert len(net._prices) == 1
    net.prepare(demand, 32)  # same demand: the prepared fabric is reused
    assert len(net._prices) == 1
    # the same groups at a larger payload: same line, larger time
    bigger = net.price(call(2, demand[2], groups, payload=1 << 20))
    assert bigger[1] == first[1] and bigger[0] > first[0]


def test_ocs_runs_the_plans_schedule_on_the_plans_cosets():
    world = 64
    f = fabric("all_ocs", world)
    demand = mesh_demand(world, 4, 16)
    dep = prepare_fabric(f, demand, world)
    lam = dep.plan_json["hop_latency_s"]
    assert lam == pytest.approx(0.52e-6)  # one OCS hop of Table 9
    req, where = request_from_demand(demand, world=world, ports=8, link_rate_Bps=R, hop_latency_s=lam)
    p = plan(req)
    assert dep.plan is p  # the cached plan of the same request
    for key, (m, i) in where.items():
        ax = dep.axes[key]
        ap = next(a for a in p.axes if (a.mesh, a.axis) == (m, i))
        assert ax.schedule == ap.schedule and ax.bits == tuple(ap.bits)
        groups = ax.groups(world)
        assert sorted(groups.reshape(-1).tolist()) == list(range(world))  # cosets partition the world
        assert groups.shape[1] == 1 << len(ax.bits)
    net = FabricAnalytical(f)
    net.prepare(demand, world)
    t, name = net.price(call(0, demand[2], mesh_groups(4, 16, "tpe")))
    assert name == dep.axes[("ffn", "tpe", "allreduce")].schedule
    assert t >= 0.52e-6  # at least one circuit hop


def test_forced_schedules():
    world = 16
    eps = FabricAnalytical(fabric("single_eps", world), schedule="two_shot")
    demand = (DemandEntry(region="r", axis="world", collective="allreduce", groups=1, ranks=world,
                          calls_per_step=1, payload_bytes=64),)
    eps.prepare(demand, world)
    assert eps.price(call(0, demand[0], (tuple(range(world)),)))[1] == "two_shot"
    ocs = FabricAnalytical(fabric("single_ocs", world), schedule="recursive_doubling")
    ocs.prepare(demand, world)
    assert ocs.price(call(0, demand[0], (tuple(range(world)),)))[1] == "recursive_doubling"
    bad = FabricAnalytical(fabric("single_eps", world), schedule="bruck")
    bad.prepare(demand, world)
    with pytest.raises(SpecError, match="not a native"):
        bad.price(call(0, demand[0], (tuple(range(world)),)))


def test_hybrid_keeps_the_faster_placement():
    """C.7's byte-balanced placement vs rack-contiguous: the model keeps the lower predicted time."""
    world = 64
    dep = prepare_fabric(fabric("hybrid", world), mesh_demand(world, 8, 8, payload_a=1 << 16), world)
    places = dep.plan_json["placements"]
    assert 1 <= len(places) <= 2
    best = min(places, key=lambda p: p["communication_s_per_step"])
    assert dep.plan_json["allocation"] == best["allocation"]
    counts = np.asarray(dep.plan_json["rack_circuits"])
    assert (counts.sum(axis=1) <= 2).all() and (counts.sum(axis=0) <= 2).all()  # ≤ up_ports per rack


def test_ocs_with_non_power_of_two_world_is_a_spec_error():
    f = fabric_from_dict({"kind": "single_ocs", "ports": 8, "link_rate": R}, world=24)
    demand = (DemandEntry(region="r", axis="world", collective="allreduce", groups=1, ranks=24, calls_per_step=1,
                          payload_bytes=64),)
    with pytest.raises(SpecError, match="power of two"):
        FabricAnalytical(f).prepare(demand, 24)
