"""Power model: component counting rules (D.4) on small fabrics."""

import pytest

from collectives.errors import SpecError
from pipelines.network import fabric_from_dict
from fabrics.power import (
    CPO_PORT_W, EPS_PORT_W, OCS_PORT_W, PLUGGABLE_W, power_breakdown, rate_key, system_power_W,
    tokens_per_s_per_MW, transceiver_counts,
)

R400 = 400e9 / 8


def fab(kind, world=64, **kw):
    return fabric_from_dict({"kind": kind, "ports": 4, "link_rate": R400, "down_ports": 16,
                             "up_ports": 16 if kind == "all_ocs" else 4, **kw}, world=world)


def test_rate_key_maps_table12_columns():
    assert rate_key(R400) == 400 and rate_key(1.6e12 / 8) == 1600 and rate_key(800e9 / 8) == 800
    with pytest.raises(SpecError, match="Table 12"):
        rate_key(100e9 / 8)


def test_single_level_eps_counts_switch_ports_and_no_modules():
    f = fab("single_eps", world=16)
    p = power_breakdown(f, 1000.0)
    assert p.eps_ports == 4 * 16 and p.pluggables == 0 and p.cpo_ports == 0
    assert p.total_W == pytest.approx(16 * 1000 + 64 * EPS_PORT_W[400])


def test_single_level_ocs_uses_cpo_at_every_accelerator_port():
    f = fab("single_ocs", world=16)
    p = power_breakdown(f, 1000.0)
    assert p.cpo_ports == 16 * 4 and p.pluggables == 0 and p.ocs_ports == 4 * 16
    assert p.network_W == pytest.approx(64 * OCS_PORT_W[400] + 64 * CPO_PORT_W[400])


def test_two_level_transceivers_follow_cable_ends():
    racks, up, L = 4, 4, 4  # world 64, racks of 16
    uplink_cables = racks * L * up
    assert transceiver_counts(fab("all_eps")) == (2 * uplink_cables, 0)  # pluggable at both EPS ends
    assert transceiver_counts(fab("hybrid")) == (uplink_cables, 0)  # OCS end is passive
    assert transceiver_counts(fab("all_ocs")) == (0, 64 * L)  # CPO at accelerators only


def test_every_chip_port_is_counted_even_unused():
    f = fab("all_eps")
    p = power_breakdown(f, 1000.0)
    used = sum(d.ports for d in f.devices if d.kind == "eps")
    assert p.eps_ports == sum(g.chips * 72 for g in f.chips) > used


def test_link_rate_selects_column_and_power_grows_with_rate():
    f = fab("all_eps")
    p4, p16 = power_breakdown(f, 1.0), power_breakdown(f, 1.0, 1.6e12 / 8)
    assert p16.pluggables_W / p4.pluggables_W == pytest.approx(PLUGGABLE_W[1600] / PLUGGABLE_W[400])
    assert p16.total_W > p4.total_W
    assert system_power_W(f, 1.0) == pytest.approx(p4.total_W)


def test_tokens_per_s_per_mw():
    assert tokens_per_s_per_MW(1000.0, 2e6) == pytest.approx(500.0)
    with pytest.raises(SpecError):
        power_breakdown(fab("all_eps"), 0.0)
