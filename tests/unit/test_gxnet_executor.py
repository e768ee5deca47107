import json

import pytest

from fabrics.network.protocol import CollectiveCall
from gxnet.executor import execute
from pipelines.trace import chrome_trace
from gxnet.plan import build_plan
from gxnet.testing import FixedLatencyNetwork, deployment


@pytest.fixture(scope="module")
def run():
    d = deployment(batch=16, parallel=(4, 128, 16, 32))
    net = FixedLatencyNetwork(latency_s=3e-6)
    return d, net, execute(build_plan(d), net)


def test_step_is_the_sum_of_its_breakdown(run):
    d, net, r = run
    assert set(r.breakdown_s) >= {"attention", "ffn", "communication", "fixed"}
    assert sum(r.breakdown_s.values()) == pytest.approx(r.decode_step_s, rel=1e-12)
    assert r.interactivity_tok_s_user == pytest.approx(1 / r.decode_step_s)
    assert r.throughput_tok_s == pytest.approx(16 / r.decode_step_s)


def test_every_collective_instance_is_registered_with_all_groups(run):
    d, net, r = run
    assert net.prepared == 1 and net.world == 512
    assert r.collective_calls == len(net.registered) == 128 * 4 + 1
    assert r.breakdown_s["communication"] == pytest.approx(len(net.registered) * 3e-6)
    for call, _ in net.registered:
        assert sorted(x for g in call.groups for x in g) == list(range(512))
    starts = [t for _, t in net.registered]
    assert starts == sorted(starts)


def test_launch_per_execution_window(run):
    d, net, r = run
    # one window opens at step start and after every collective that is followed by compute
    # (per layer: after the all-to-all, the all-reduce and the EP all-gather)
    assert r.breakdown_s["fixed"] == pytest.approx((1 + 3 * 128) * 0.8e-6)


def test_busiest_track_sets_the_pace(run):
    d, net, r = run
    p = build_plan(d)
    gemm = next(e for e in p.sections[1].entries if getattr(e, "kernel", "") == "expert_gemm")
    slow = [e for e in r.events if e.name == "expert_gemm" and e.track == p.tracks[0].name]
    fast = [e for e in r.events if e.name == "expert_gemm" and e.track == p.tracks[1].name]
    assert slow[0].dur_s == gemm.durations_s[0] > fast[0].dur_s


def test_collective_outside_the_demand_is_an_error():
    d = deployment(batch=1)
    net = FixedLatencyNetwork()
    net.prepare(build_plan(d).demand, 512)
    bogus = CollectiveCall(call_id=0, region="ffn", axis="kvp", collective="allreduce",
                           groups=((0, 1),), payload_bytes=8)
    with pytest.raises(RuntimeError, match="outside the declared demand"):
        net.register(bogus, 0.0)


def test_chrome_trace_is_json_with_one_thread_per_behaviour(run):
    d, net, r = run
    tr = chrome_trace(r.events)
    json.dumps(tr)
    threads = [e for e in tr["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert len(threads) == len(r.tracks) == 2
    slices = [e for e in tr["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in slices} == {"compute", "collective"}
    assert max(e["ts"] + e["dur"] for e in slices) == pytest.approx(r.decode_step_s * 1e6)


def test_trace_off_gives_the_same_timing(run):
    d, net, r = run
    r2 = execute(build_plan(d), FixedLatencyNetwork(latency_s=3e-6), trace=False)
    assert r2.decode_step_s == r.decode_step_s and r2.events == []
