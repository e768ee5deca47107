"""Simlette layers 1 and 4: simulator links and routes from ``fabrics.scaleup.physical``."""

from __future__ import annotations

import pytest

from collectives.errors import SpecError
from collectives.topology import hypercube, with_folds
from fabrics.network.simlette.build import simulate_collective
from pipelines.network import simlette_from_config


def _fabric(kind, n, ports, topology=None, **extra):
    return simlette_from_config({"kind": kind, "ports": ports, "link_rate_Bps": 5e10, "accelerators": n, **extra},
                                {"mode": "optimized"}, topology=topology).fabric


def test_single_eps_paths_go_through_the_switch_of_each_rail():
    f = _fabric("single_eps", 8, 3)
    assert f.n_paths(0, 5) == 3
    paths = [f.path(0, 5, j) for j in range(3)]
    assert len({p[0] for p in paths}) == 3 and len({p[1] for p in paths}) == 3
    for j, (up, down) in enumerate(paths):
        assert f.names[up].startswith("acc0:") and f.names[down].endswith("acc5:" + str(j))
        # 10 ns cable + 300 ns switch; then 10 ns cable + 140 ns sink
        assert f.after_s[up] == pytest.approx(310e-9) and f.after_s[down] == pytest.approx(150e-9)


def test_two_level_eps_sprays_over_rails_and_uplinks_across_racks():
    f = _fabric("all_eps", 64, 2, down_ports=32, up_ports=4, switch_radix=72)
    assert f.n_paths(0, 1) == 2  # same rack: one level-1 switch per rail
    assert f.n_paths(0, 40) == 8  # other rack: rails x uplinks
    assert len(f.path(0, 40, 5)) == 4
    assert len({f.path(0, 40, c) for c in range(8)}) == 8


def test_ocs_circuits_realise_the_cayley_topology_with_multiplicity():
    topo = with_folds(hypercube(3), [0b111])
    f = _fabric("single_ocs", 8, 4, topology=topo)
    assert f.n_paths(2, 2 ^ 0b111) == 1 and f.n_paths(2, 3) == 1
    with pytest.raises(SpecError, match="no OCS circuit"):
        f.n_paths(0, 3)
    g = _fabric("single_ocs", 8, 6, topology=hypercube(3, multiplicity=2))
    assert g.n_paths(0, 4) == 2
    # one optical hop: 10 ns cable + 10 ns pass-through + 10 ns cable + 140 ns sink
    assert g.after_s[g.path(0, 4, 0)[0]] == pytest.approx(170e-9)


def test_two_level_eps_runs_a_collective_across_racks():
    net = simlette_from_config({"kind": "all_eps", "ports": 2, "link_rate_Bps": 5e10, "accelerators": 64,
                                "down_ports": 32, "up_ports": 4}, {"mode": "optimized"})
    res = simulate_collective(net, "allreduce", 4096)
    # three switches on the cross-rack path: at least 350 + 3*(10+300) + 10 + 140 ns per phase
    assert res["completion_s"] > 1.43e-6


def test_deployed_fabrics_need_the_deployment_before_calls():
    from fabrics.network.protocol import CollectiveCall

    net = simlette_from_config({"kind": "hybrid", "ports": 2, "link_rate_Bps": 5e10, "accelerators": 64},
                               {"mode": "optimized"})
    assert net.fabric is None and net.planner is not None  # circuits come from prepare(demand, world)
    with pytest.raises(RuntimeError, match="prepare"):
        net.register(CollectiveCall(call_id=0, region="r", axis="a", collective="allreduce",
                                    groups=(tuple(range(8)),), payload_bytes=1024), 0.0)


def test_write_responses_use_the_reverse_links_without_delaying_posted_writes():
    def run(resp):
        net = simlette_from_config({"kind": "single_eps", "ports": 2, "link_rate_Bps": 5e10, "accelerators": 8},
                                   {"mode": "optimized", "write_responses": resp, "schedule": "one_shot"})
        return simulate_collective(net, "allreduce", 4096)

    off, on = run(False), run(True)
    assert on["completion_s"] == pytest.approx(off["completion_s"], rel=1e-3)
    assert on["events"] > off["events"]


def test_spray_pointer_survives_destinations_with_different_path_counts():
    from fabrics.scaleup.latency import LatencyBudget
    from pipelines.network import simlette_params as params_from_network
    from fabrics.network.simlette.engine import Engine, Message

    net = simlette_from_config({"kind": "all_eps", "ports": 2, "link_rate_Bps": 5e10, "accelerators": 64,
                                "down_ports": 32, "up_ports": 4}, {"mode": "flit"})
    eng = Engine(net.fabric, params_from_network({"mode": "flit"}, LatencyBudget()))
    done = []
    # 3 flits across racks (8 paths) leave the pointer at 3; the next message has only 2 paths
    eng.inject(Message(0, 40, done.append, 0), 3 * 640, 0.0)
    eng.inject(Message(0, 1, done.append, 1), 640, 0.0)
    eng.run()
    assert len(done) == 2
