"""Table 12 / Appendix E: all-EPS / all-OCS system power 1.33 at 400 G and 1.60 at 1.6 T (1 %),
from component counts derived by constructing the 576-accelerator fabrics of Appendix C.7."""

import pytest

from pipelines.network import fabric_from_dict
from fabrics.power import ACCELERATOR_W, power_breakdown, system_power_W

R400 = 400e9 / 8


@pytest.fixture(scope="module")
def fabrics576():
    return {k: fabric_from_dict({"kind": k, "ports": 36, "link_rate": R400, "accelerators": 576}, world=512)
            for k in ("all_eps", "hybrid", "all_ocs")}


@pytest.mark.parametrize("rate_Bps, ratio", [(R400, 1.33), (1.6e12 / 8, 1.60)])
def test_all_eps_over_all_ocs_power_ratio(fabrics576, rate_Bps, ratio):
    eps = system_power_W(fabrics576["all_eps"], ACCELERATOR_W["RX00"], rate_Bps)
    ocs = system_power_W(fabrics576["all_ocs"], ACCELERATOR_W["RX00"], rate_Bps)
    assert eps / ocs == pytest.approx(ratio, rel=0.01)


def test_component_counts_of_table12(fabrics576):
    eps = power_breakdown(fabrics576["all_eps"], ACCELERATOR_W["RX00"])
    ocs = power_breakdown(fabrics576["all_ocs"], ACCELERATOR_W["RX00"])
    hyb = power_breakdown(fabrics576["hybrid"], ACCELERATOR_W["RX00"])
    assert (eps.eps_ports, eps.pluggables, eps.accelerators) == ((648 + 72) * 72, 10_368, 576)
    assert (ocs.ocs_ports, ocs.cpo_ports, ocs.pluggables) == ((648 + 288) * 72, 20_736, 0)
    assert (hyb.eps_ports, hyb.ocs_ports, hyb.pluggables) == (648 * 72, 72 * 72, 5_184)
    # the hybrid sits between the two
    assert ocs.total_W < hyb.total_W < eps.total_W


def test_ratio_rises_with_rate(fabrics576):
    ratios = [system_power_W(fabrics576["all_eps"], 2631.0, r) / system_power_W(fabrics576["all_ocs"], 2631.0, r)
              for r in (R400, 800e9 / 8, 1.6e12 / 8)]
    assert ratios == sorted(ratios)
