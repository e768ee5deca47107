"""Latency budget of Table 9 and per-path decomposition."""

import pytest

from collectives.errors import SpecError
from fabrics.scaleup.latency import LatencyBudget


@pytest.mark.parametrize("case", ["low", "nominal", "high"])
def test_switched_hop_is_810ns_in_every_case(case):
    b = LatencyBudget(case=case)
    assert b.switched_hop_s == pytest.approx(810e-9)
    assert b.switch_total_s + b.mmu_tlb_s == pytest.approx(550e-9)


def test_ocs_hop_replaces_switch_total_by_pass_through():
    b = LatencyBudget()
    assert b.ocs_hop_s == pytest.approx(b.switched_hop_s - b.switch_total_s + 10e-9)
    assert b.ocs_hop_s == pytest.approx(0.52e-6)


def test_components_add_up_and_count_cables():
    b = LatencyBudget(level2_cable_s=100e-9)
    comp = b.components_s(eps_hops=3, ocs_passes=0, level2_cables=2)
    assert comp["cable_s"] == pytest.approx(2 * 10e-9 + 2 * 100e-9)  # 4 cables, 2 of them rack to rack
    assert sum(comp.values()) == pytest.approx(b.path_latency_s(eps_hops=3, ocs_passes=0, level2_cables=2))
    # each extra switch adds its total plus one cable
    assert b.path_latency_s(eps_hops=2, ocs_passes=0) - b.path_latency_s(eps_hops=1, ocs_passes=0) == pytest.approx(
        b.switch_total_s + b.cable_s)


def test_switch_core_override_moves_latency_out_of_the_accelerator():
    b = LatencyBudget(switch_core_s=300e-9)
    assert b.switched_hop_s == pytest.approx(810e-9)
    assert b.ocs_hop_s < LatencyBudget().ocs_hop_s


@pytest.mark.parametrize("kw", [{"case": "extreme"}, {"switch_core_s": 600e-9}, {"cable_s": -1.0}])
def test_bad_latency_inputs(kw):
    with pytest.raises(SpecError):
        LatencyBudget(**kw)
