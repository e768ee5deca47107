"""fabrics/network/flow.py: the flow-level model on scale-up fabrics, against the analytical model."""

import numpy as np
import pytest

from fabrics.network.flow import FabricFlow, FlowPhasePricer
from fabrics.network.protocol import CollectiveCall, DemandEntry
from fabrics.scaleup.deployment import prepare_fabric
from fabrics.scaleup.native import native_phases
from fabrics.scaleup.phase_pricing import PhasePricer
from pipelines.network import fabric_from_dict

R = 5e10


def fabric(kind, accelerators=64, ports=4, **kw):
    return fabric_from_dict({"kind": kind, "ports": ports, "link_rate": R, "accelerators": accelerators, **kw},
                            world=accelerators)


def demand(ranks, groups=1, collective="allreduce"):
    return (DemandEntry(region="r", axis="a", collective=collective, groups=groups, ranks=ranks, calls_per_step=1,
                        payload_bytes=65536),)


def pricers(kind, world=64, **kw):
    dep = prepare_fabric(fabric(kind, accelerators=world, **kw), demand(world), world)
    return PhasePricer(dep.routed), FlowPhasePricer(dep.routed)


@pytest.mark.parametrize("kind", ["single_eps", "all_eps"])
@pytest.mark.parametrize("schedule", ["one_shot", "two_shot"])
def test_uniform_native_phases_price_like_the_bottleneck_bound(kind, schedule):
    ana, flow = pricers(kind)
    groups = np.arange(64)[None, :]
    a = ana.schedule_line(native_phases("allreduce", schedule, 64), groups)
    f = flow.schedule_line(native_phases("allreduce", schedule, 64), groups)
    assert f.latency_s == pytest.approx(a.latency_s)
    assert f.seconds_per_byte == pytest.approx(a.seconds_per_byte, rel=1e-9)


def test_uneven_transfers_are_never_faster_than_the_bottleneck_and_can_be_slower():
    ana, flow = pricers("all_eps", down_ports=32, up_ports=4)
    rng = np.random.default_rng(3)
    slower = 0
    for _ in range(20):
        k = 24
        src, dst = rng.integers(0, 64, k), rng.integers(0, 64, k)
        nbytes = rng.integers(1, 10, k).astype(float)
        la, sa = ana.phase_cost(src, dst, nbytes)
        lf, sf = flow.phase_cost(src, dst, nbytes)
        assert lf == pytest.approx(la)
        assert sf >= sa * (1 - 1e-9)
        slower += sf > sa * (1 + 1e-6)
    assert slower > 0  # max-min leaves a bottleneck idle while its flows wait elsewhere


def test_flow_model_runs_the_protocol_with_the_analytical_deployment():
    f = fabric("hybrid", accelerators=64)
    net = FabricFlow(f)
    d = demand(8, groups=8)
    net.prepare(d, 64)
    groups = tuple(tuple(range(g * 8, g * 8 + 8)) for g in range(8))
    net.register(CollectiveCall(call_id=1, region="r", axis="a", collective="allreduce", groups=groups,
                                payload_bytes=65536), 0.0)
    (done,) = net.advance()
    assert done.call_id == 1 and done.end_s > 0 and done.planning_s == 0.0
    report = net.report()
    assert report.model == "flow" and report.schedules == {"r/a/allreduce": done.schedule}
    assert report.plan_summary is not None and report.plan_summary["fabric"] == "hybrid"
