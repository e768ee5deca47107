"""Simlette on the two-level fabrics of Appendix C.7 at full size: 512 ranks of the 576-accelerator
hybrid and all-OCS systems (18 racks of 32, 36 ports, 400 Gb/s), against the fabric-aware
analytical model that plans the same placement and circuits.

* all-OCS: planned circuits, no contention inside a collective -> equal to the analytical model
  (C.4's consistency, now across three OCS pass-throughs between racks); a whole Megatron 5T
  decode step agrees within 1 % (the calls of one step barely overlap).
* hybrid: native EPS schedules over rack circuits -> never faster than the analytical model,
  slower by the contention it cannot see.
"""

from __future__ import annotations

import pytest

from fabrics.network.analytical import FabricAnalytical
from fabrics.network.protocol import CollectiveCall, DemandEntry
from fabrics.scaleup.physical import FabricSpec, build_fabric
from fabrics.network.simlette.build import simulate_collective
from pipelines.network import simlette_from_config

R = 5e10
KIB = 1024
WORLD = 512
UP = {"hybrid": 8, "all_ocs": 32}


def _spec(kind):
    return dict(kind=kind, accelerators=576, ports=36, link_rate_Bps=R, switch_radix=72, down_ports=32,
                up_ports=UP[kind])


def _both(kind, collective, size, group_size=WORLD):
    groups = tuple(tuple(range(g, g + group_size)) for g in range(0, WORLD, group_size))
    sim = simulate_collective(simlette_from_config(_spec(kind), {"mode": "optimized"}), collective, size,
                              groups=groups)
    ana = FabricAnalytical(build_fabric(FabricSpec(**_spec(kind))))
    ana.prepare((DemandEntry(region="standalone", axis="world", collective=collective, groups=len(groups),
                             ranks=group_size,
                             calls_per_step=1, payload_bytes=size),), WORLD)
    t, name = ana.price(CollectiveCall(call_id=0, region="standalone", axis="world", collective=collective,
                                       groups=groups, payload_bytes=size))
    return sim, t, name


def test_all_ocs_world_allreduce_equals_the_analytical_model():
    sim, t, name = _both("all_ocs", "allreduce", 40 * KIB)
    assert sim["schedule"] == name
    assert sim["completion_s"] == pytest.approx(t, rel=0.01)


def test_hybrid_groups_of_eight_allreduce_pays_for_contention():
    sim, t, name = _both("hybrid", "allreduce", 16 * KIB, group_size=8)
    assert sim["schedule"] == name
    assert t < sim["completion_s"] < 2.5 * t
    assert sim["simlette"]["link_utilisation"]["links_used"] > 0


@pytest.mark.slow
def test_hybrid_world_allreduce_pays_for_contention():
    sim, t, name = _both("hybrid", "allreduce", 4 * KIB)  # two-shot, 2 x 261 632 messages (~10 s)
    assert sim["schedule"] == name
    assert t < sim["completion_s"] < 2.5 * t


def _decode(fabric, network):
    from hydra import compose, initialize_config_dir

    from gxnet.executor import execute
    from gxnet.plan import build_plan
    from pipelines.app import CONF_DIR
    from pipelines.network import build_network
    from pipelines.specs import deployment_spec

    with initialize_config_dir(config_dir=CONF_DIR, version_base=None):
        cfg = compose(config_name="decode", overrides=[f"world={WORLD}", f"fabric={fabric}", f"network={network}"])
    dep = deployment_spec(cfg)
    net = build_network(cfg, dep.accelerator, dep.world)
    return execute(build_plan(dep), net), net


def test_megatron_decode_step_on_all_ocs_agrees_with_the_analytical_model():
    sim, net = _decode("all_ocs", "simlette")
    ana, ana_net = _decode("all_ocs", "analytical")
    assert sim.decode_step_s == pytest.approx(ana.decode_step_s, rel=0.01)
    rep = net.simulation_report()
    assert rep["episodes_reused"] > 100 * rep["episodes_simulated"]  # 128 identical layers: one simulation
    assert {tuple(k.split("/")): v for k, v in rep["schedules"].items()} == dict(ana_net.schedules_used)


@pytest.mark.slow
def test_megatron_decode_step_on_hybrid_is_slower_than_analytical():
    sim, _ = _decode("hybrid", "simlette")
    ana, _ = _decode("hybrid", "analytical")
    assert ana.decode_step_s < sim.decode_step_s < 1.5 * ana.decode_step_s
