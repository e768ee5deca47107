"""Simlette as a NetworkModel: protocol, concurrent calls, episode reuse, errors."""

from __future__ import annotations

import pytest

from collectives.errors import SpecError
from fabrics.network.protocol import CollectiveCall, DemandEntry, NetworkModel
from fabrics.network.simlette.build import simulate_collective
from pipelines.network import simlette_from_config
from fabrics.network.simlette.params import SimletteParams

N = 16


def _net(**network):
    return simlette_from_config({"kind": "single_eps", "ports": 4, "link_rate_Bps": 5e10, "accelerators": N},
                                {"mode": "optimized", **network})


def _demand():
    return (
        DemandEntry(region="attention", axis="world", collective="allreduce", groups=1, ranks=N, calls_per_step=1,
                    payload_bytes=32768),
        DemandEntry(region="ffn", axis="tp", collective="allreduce", groups=4, ranks=4, calls_per_step=1,
                    payload_bytes=32768),
    )


def _world_call(i, size=32768):
    return CollectiveCall(call_id=i, region="attention", axis="world", collective="allreduce",
                          groups=(tuple(range(N)),), payload_bytes=size)


def _tp_call(i):
    return CollectiveCall(call_id=i, region="ffn", axis="tp", collective="allreduce",
                          groups=tuple(tuple(range(4 * g, 4 * g + 4)) for g in range(4)), payload_bytes=32768)


def test_implements_the_network_model_protocol():
    assert isinstance(_net(), NetworkModel)


def test_concurrent_calls_share_links_and_finish_later_than_alone():
    alone = _net()
    alone.prepare(_demand(), N)
    alone.register(_world_call(1), 0.0)
    t_alone = alone.advance()[0].end_s

    both = _net()
    both.prepare(_demand(), N)
    both.register(_world_call(1), 0.0)
    both.register(_world_call(2), 0.0)
    both.register(_tp_call(3), 0.0)
    ends = {}
    while len(ends) < 3:
        for c in both.advance():
            ends[c.call_id] = c.end_s
    # ports serve in FIFO order, so the first call may keep its time; nobody gets faster, and the
    # later one waits for at least half of the other's bytes on the shared ports
    assert min(ends[1], ends[2]) >= t_alone * (1 - 1e-12)
    assert max(ends[1], ends[2]) > t_alone + 0.5 * 2 * 15 / 16 * 32768 / (4 * 5e10)


def test_repeated_idle_episodes_are_reused_and_identical():
    net = _net()
    net.prepare(_demand(), N)
    t, durations = 0.0, []
    for i in range(5):
        net.register(_world_call(i), t)
        (c,) = net.advance()
        durations.append(c.end_s - c.start_s)
        t = c.end_s + 1e-6  # compute between the collectives: network idle again
    rep = net.simulation_report()
    assert rep["cache_hits"] == 4 and rep["episodes_simulated"] == 1 and rep["episodes_reused"] == 4
    assert durations == pytest.approx([durations[0]] * 5, rel=1e-12)
    fresh = _net()
    fresh.prepare(_demand(), N)
    fresh.register(_world_call(0), 0.0)
    assert fresh.advance()[0].end_s == durations[0]


def _episode(net, base, second_size):
    """A short tp call and a long world call start together; when the tp call is done (the world call
    still running) another world call of ``second_size`` joins: one episode, two advance points."""
    net.register(_tp_call(1), base)
    net.register(_world_call(2, 1 << 20), base)
    ends = {}
    first = net.advance()
    for c in first:
        ends[c.call_id] = c.end_s - base
    assert [c.call_id for c in first] == [1]
    net.register(_world_call(3, second_size), first[0].end_s)
    while len(ends) < 3:
        for c in net.advance():
            ends[c.call_id] = c.end_s - base
    return ends


def test_a_diverging_episode_is_resimulated_exactly():
    net = _net()
    net.prepare(_demand(), N)
    _episode(net, 0.0, 4096)
    events = net.events
    assert net.cache_hits == 0
    replayed = _episode(net, 1.0, 4096)  # identical: served from the cache
    hits = net.cache_hits
    assert hits >= 2 and net.events == events
    diverged = _episode(net, 2.0, 8192)  # first advance from the cache, then a different call: re-simulated
    assert net.cache_hits == hits + 1 and net.events > events

    fresh = _net()
    fresh.prepare(_demand(), N)
    expect = _episode(fresh, 0.0, 8192)
    assert diverged == pytest.approx(expect, rel=1e-9)
    assert replayed != pytest.approx(expect, rel=1e-9)


def test_out_of_demand_call_is_an_error():
    net = _net()
    net.prepare(_demand()[:1], N)
    with pytest.raises(RuntimeError, match="outside the declared demand"):
        net.register(_tp_call(3), 0.0)


def test_report_has_utilisation_and_credit_stalls():
    net = _net(buffer_bytes=1280)
    res = simulate_collective(net, "allreduce", 1 << 20)
    rep = res["simlette"]
    assert 0 < rep["link_utilisation"]["max"] <= 1.0
    assert rep["credit_stall_s"]["total"] > 0 and rep["credit_stall_s"]["worst"]
    assert res["events"] > 0 and res["schedule"] in ("one_shot", "two_shot")


@pytest.mark.parametrize("kw, match", [
    ({"mode": "fast"}, "network.mode"),
    ({"buffer_bytes": 100}, "network.buffer"),
    ({"spray": "random"}, "network.spray"),
    ({"phase_sync": "layer"}, "network.phase_sync"),
])
def test_bad_parameters_raise_one_line_spec_errors(kw, match):
    with pytest.raises(SpecError, match=match):
        SimletteParams(**kw)


def test_ocs_port_budget_is_checked():
    from collectives.topology import hypercube

    with pytest.raises(SpecError, match="fabric.ports"):
        simlette_from_config({"kind": "single_ocs", "ports": 4, "link_rate_Bps": 5e10, "accelerators": 32},
                             {"mode": "optimized"}, topology=hypercube(5))


def test_forced_schedule_is_used():
    res = simulate_collective(_net(schedule="two_shot"), "allreduce", 1024)
    assert res["schedule"] == "two_shot"


def test_network_dict_buffer_forms():
    from fabrics.scaleup.latency import LatencyBudget
    from pipelines.network import simlette_params as params_from_network

    lat = LatencyBudget()
    assert params_from_network({"buffer": "unlimited"}, lat).buffer_bytes is None
    assert params_from_network({"buffer_bytes": 16384}, lat).buffer_flits == 25
    assert params_from_network({"buffer": 4096}, lat).buffer_bytes == 4096
    assert params_from_network({"buffer": "16KiB"}, lat).buffer_bytes == 16384  # units parsed at the edge
    with pytest.raises(SpecError, match="buffer"):
        params_from_network({"buffer": "16 furlongs"}, lat)
    # Table 9 split: 350 ns before the first port, 140 ns after the last cable
    p = params_from_network({}, lat)
    assert p.source_latency_s == pytest.approx(350e-9) and p.sink_latency_s == pytest.approx(140e-9)


def test_group_barrier_aligns_the_phase_starts_of_a_group():
    """phase_sync=group: no rank starts the all-gather before the slowest rank's reduce-scatter is
    in; phase_sync=rank lets early ranks go (never slower than the barrier)."""
    from fabrics.network.simlette import runner

    starts = {}
    orig = runner.CallRun._enter

    def spy(self, g, r, k):
        if k == 1:
            starts.setdefault(self.barrier, []).append(self.engine.env.now)
        return orig(self, g, r, k)

    runner.CallRun._enter = spy
    try:
        t = {sync: simulate_collective(_net(schedule="two_shot", phase_sync=sync), "allreduce", 1 << 20)["completion_s"]
             for sync in ("rank", "group")}
    finally:
        runner.CallRun._enter = orig
    assert len(set(starts[True])) == 1 and len(set(starts[False])) > 1
    assert t["rank"] <= t["group"]
