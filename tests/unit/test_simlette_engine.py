"""Unit tests of Simlette's event core: serialization, latency, spraying, credits, modes."""

from __future__ import annotations

import pytest

from collectives.topology import hypercube
from pipelines.network import simlette_from_config
from pipelines.network import simlette_params as params_from_network
from fabrics.network.simlette.engine import Engine, Message
from fabrics.scaleup.latency import LatencyBudget

R = 5e10


def _net(kind="single_ocs", n=4, ports=2, **network):
    topo = hypercube(n.bit_length() - 1) if kind == "single_ocs" else None
    return simlette_from_config({"kind": kind, "ports": ports, "link_rate_Bps": R, "accelerators": n},
                                {"mode": "optimized", **network}, topology=topo)


def _send(net, sends, mode="optimized", buffer_bytes=None, spray="source"):
    """Inject (src, dst, bytes) at t=0 on a fresh engine; return arrival times and the engine."""
    params = params_from_network({"mode": mode, "buffer_bytes": buffer_bytes, "spray": spray}, LatencyBudget())
    eng = Engine(net.fabric, params)
    arrivals = {}

    def done(msg):
        arrivals[msg.token] = msg.arrival

    for i, (s, d, b) in enumerate(sends):
        eng.inject(Message(s, d, done, i), b, params.source_latency_s)
    eng.run()
    return arrivals, eng


@pytest.mark.parametrize("nbytes", [64, 640, 4096, 100_000])
def test_single_message_on_a_circuit_costs_lambda_plus_serialization(nbytes):
    net = _net(ports=1, n=2)
    arrivals, _ = _send(net, [(0, 1, nbytes)])
    wire = -(-nbytes // 64) * 64
    assert arrivals[0] == pytest.approx(0.52e-6 + wire / R, rel=1e-12)


def test_payload_is_rounded_up_to_whole_tl_flits():
    net = _net(ports=1, n=2)
    a, _ = _send(net, [(0, 1, 65)])
    assert a[0] == pytest.approx(0.52e-6 + 128 / R, rel=1e-12)


def test_eps_hop_pays_switch_latency_and_one_extra_flit_of_store_and_forward():
    net = _net(kind="single_eps", n=4, ports=1)
    a, _ = _send(net, [(0, 1, 6400)])
    # 810 ns per switched hop + serialization at the source + the last DL flit again at the switch
    assert a[0] == pytest.approx(0.81e-6 + 6400 / R + 640 / R, rel=1e-12)


def test_flit_and_optimized_modes_agree_without_contention():
    net = _net(kind="single_eps", n=8, ports=4)
    sends = [(0, d, 40_000) for d in range(1, 8)]
    a_opt, e_opt = _send(net, sends, mode="optimized")
    a_flit, e_flit = _send(net, sends, mode="flit")
    assert max(a_opt.values()) == pytest.approx(max(a_flit.values()), rel=1e-9)
    assert e_flit.events > 10 * e_opt.events  # one event per flit per hop vs. one per message share


def test_spraying_spreads_flits_round_robin_over_rails():
    net = _net(kind="single_eps", n=4, ports=4)
    _, eng = _send(net, [(0, 1, 640 * 8)])
    up = [eng.bytes_sent[l] for l in eng.fabric.up[0]]
    assert up == [1280, 1280, 1280, 1280]


def test_per_message_spraying_restarts_at_the_first_rail():
    net = _net(kind="single_eps", n=4, ports=4)
    _, eng = _send(net, [(0, 1, 640), (0, 2, 640), (0, 3, 640)], spray="message")
    assert [eng.bytes_sent[l] for l in eng.fabric.up[0]] == [1920, 0, 0, 0]
    _, eng = _send(net, [(0, 1, 640), (0, 2, 640), (0, 3, 640)], spray="source")
    assert [eng.bytes_sent[l] for l in eng.fabric.up[0]] == [640, 640, 640, 0]


@pytest.mark.parametrize("mode", ["flit", "optimized"])
def test_small_buffers_stall_on_credits_and_large_ones_do_not(mode):
    net = _net(ports=1, n=2)
    big = 256 * 1024
    a_unl, e_unl = _send(net, [(0, 1, big)], mode=mode)
    a_small, e_small = _send(net, [(0, 1, big)], mode=mode, buffer_bytes=2048)
    a_large, e_large = _send(net, [(0, 1, big)], mode=mode, buffer_bytes=1 << 20)
    assert a_large[0] == pytest.approx(a_unl[0], rel=1e-12)
    assert sum(e_large.stall_s) == 0
    assert a_small[0] > 1.5 * a_unl[0]
    assert max(e_small.stall_s) > 0.3 * (a_small[0] - a_unl[0])


def test_contention_on_a_shared_egress_serializes():
    net = _net(kind="single_eps", n=4, ports=1)
    alone, _ = _send(net, [(1, 0, 64_000)])
    both, _ = _send(net, [(1, 0, 64_000), (2, 0, 64_000)])
    assert max(both.values()) == pytest.approx(alone[0] + 64_000 / R, rel=1e-3)


def test_runs_are_deterministic():
    net = _net(kind="single_eps", n=8, ports=3)
    sends = [(s, d, 3000 + 7 * s + d) for s in range(8) for d in range(8) if s != d]
    assert _send(net, sends, mode="flit")[0] == _send(net, sends, mode="flit")[0]


@pytest.mark.parametrize("mode", ["flit", "optimized"])
def test_unlimited_fast_path_equals_the_credit_path_with_ample_buffers(mode):
    net = _net(kind="single_eps", n=8, ports=2)
    sends = [(s, d, 5000 + 640 * ((s + d) % 3)) for s in range(8) for d in range(8) if s != d]
    fast, _ = _send(net, sends, mode=mode)
    credit, eng = _send(net, sends, mode=mode, buffer_bytes=1 << 24)
    assert sum(eng.stall_s) == 0
    assert credit == pytest.approx(fast, rel=1e-12)
