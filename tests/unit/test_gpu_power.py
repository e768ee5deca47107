"""Power of GPU deployments (fabrics.power, GPU section): what a deployment uses is what it is charged.

Reference figures are built here by hand (round numbers) so that every expected value follows
from the counting rules, not from the shipped data; tests/unit/test_pipelines_power.py checks
the shipped conf/power/gpu.yaml and the accelerator YAMLs.
"""

import pytest

from collectives.errors import SpecError
from fabrics.nvswitch import NvSwitchDomain
from fabrics.power import (
    EPS_PORT_W, PLUGGABLE_W, GpuPowerFigures, ReferenceSystem, charged_gpus, gpu_power_breakdown,
    gpus_per_node_used, scale_out_counts,
)
from fabrics.spec import ClusterSpec, ScaleOutSpec

G400 = 400e9 / 8
# an HGX-like node (8 GPUs, 4 switch chips of 200 W, 8 NICs of 25 W) and an NVL72-like rack
# (72 GPUs, 9 switch trays of 1.7 kW, 72 NICs), host share 575 / 450 W per GPU
HGX = ReferenceSystem(name="hgx", gpus=8, switches=4, switch_W=200.0, nics=8, nic_W=25.0)
NVL = ReferenceSystem(name="nvl", gpus=72, switches=9, switch_W=1700.0, nics=72, nic_W=25.0)
FIG = GpuPowerFigures(systems={"hgx": HGX, "nvl": NVL}, nic_W={400: 25.0, 800: 32.5})
BOARD, HOST = {"hgx": 700.0, "nvl": 1200.0}, {"hgx": 575.0, "nvl": 450.0}


def cluster(name, gpus, nodes=1, nics=8, rate=G400, oversubscription=1.0):
    tray = 4 if name == "nvl" else None
    node = NvSwitchDomain(name=name, gpus=gpus, max_gpus=72 if name == "nvl" else 8, nvlink_ports=18,
                          nvlink_rate_Bps=25e9, nvls=True, gpus_per_tray=tray)
    out = None if nodes == 1 else ScaleOutSpec(topology="rail_optimized", nics_per_node=nics, nic_rate_Bps=rate,
                                               oversubscription=oversubscription)
    return ClusterSpec(name="nvswitch" if nodes == 1 else "gpu_cluster", nodes=nodes, node=node, scale_out=out)


def power(name, gpus, nodes=1, world=None, **kw):
    return gpu_power_breakdown(cluster(name, gpus, nodes, **kw), world=world or gpus * nodes,
                               board_power_W=BOARD[name], host_power_W=HOST[name], figures=FIG)


def test_one_hgx_node_counts_grow_with_the_gpus_used():
    rest = 575.0 - 4 * 200.0 / 8 - 8 * 25.0 / 8  # host share less its NVSwitch and NIC parts
    previous = 0.0
    for n in (1, 2, 4, 8):
        p = power("hgx", n)
        assert p.gpus == p.gpus_charged == n and p.compute_trays == 0 and p.nodes == 1
        assert p.gpu_boards_W == pytest.approx(700.0 * n) and p.host_W == pytest.approx(rest * n)
        # a single GPU talks to nobody over NVLink: no switch share; otherwise n/8 of the 4 chips
        assert p.switch_units == pytest.approx(0.0 if n == 1 else 4 * n / 8)
        assert p.nics == p.switch_ports == p.transceivers == 0 and p.network_W == 0.0  # one node: no NICs used
        assert p.total_W > previous
        previous = p.total_W
    # the whole node: the reference system's rated power less its idle NICs
    assert previous == pytest.approx(8 * (700.0 + 575.0) - 8 * 25.0)


def test_8_of_72_nvl72_gpus_are_charged_two_trays_and_one_ninth_of_the_switch_trays():
    p = power("nvl", 8)
    assert p.compute_trays == 2 and p.gpus_charged == 8
    assert p.switch_units == pytest.approx(9 * 8 / 72) and p.nvswitch_W == pytest.approx(1700.0)
    rest = 450.0 - 9 * 1700.0 / 72 - 25.0
    assert p.total_W == pytest.approx(8 * (1200.0 + rest) + 1700.0)
    assert p.total_W < power("nvl", 72).total_W / 8  # not the rack, not the 576 of Table 12


def test_a_partly_used_nvl72_tray_is_charged_whole():
    assert charged_gpus(cluster("nvl", 6).node, 6) == 8
    assert charged_gpus(cluster("hgx", 6).node, 6) == 6
    six, eight = power("nvl", 6), power("nvl", 8)
    assert six.compute_trays == 2 and six.total_W == pytest.approx(eight.total_W)
    full = power("nvl", 72)
    assert full.compute_trays == 18 and full.switch_units == pytest.approx(9.0)


def test_two_nodes_of_8_are_charged_two_nodes_16_nics_and_their_ports():
    one, two = power("hgx", 8), power("hgx", 8, nodes=2)
    assert two.nodes == 2 and two.gpus_charged == 16 and two.switch_units == pytest.approx(8.0)
    # 16 NICs on 16 leaf ports, 16 uplinks (non-blocking) on 16 more leaf ports and 16 spine ports;
    # a pluggable at both ends of each of the 32 links
    assert (two.nics, two.switch_ports, two.transceivers) == (16, 48, 64)
    assert two.nics_W == pytest.approx(16 * 25.0)
    assert two.switch_ports_W == pytest.approx(48 * EPS_PORT_W[400])
    assert two.transceivers_W == pytest.approx(64 * PLUGGABLE_W[400])
    assert two.total_W == pytest.approx(2 * one.total_W + two.network_W)


def test_scale_out_counts_follow_nodes_oversubscription_and_rate():
    spec = cluster("hgx", 8, nodes=4, oversubscription=2.0).scale_out
    assert scale_out_counts(spec, 4) == (32, 32 + 2 * 16, 64 + 2 * 16)
    assert scale_out_counts(spec, 1) == (0, 0, 0)
    fast = power("hgx", 8, nodes=2, rate=800e9 / 8)
    assert fast.nics_W == pytest.approx(16 * 32.5) and fast.switch_ports_W == pytest.approx(48 * EPS_PORT_W[800])


def test_world_fills_nodes_in_order():
    assert gpus_per_node_used(2, 8, 12) == [8, 4]
    p = power("hgx", 8, nodes=2, world=12)
    assert p.gpus == p.gpus_charged == 12 and p.switch_units == pytest.approx(4 * 12 / 8)
    with pytest.raises(SpecError, match="world=17"):
        power("hgx", 8, nodes=2, world=17)


def test_missing_figures_and_a_host_share_too_small_are_spec_errors():
    with pytest.raises(SpecError, match="nic_rate=200Gb/s has no NIC power"):
        power("hgx", 8, nodes=2, rate=200e9 / 8)
    with pytest.raises(SpecError, match="no reference system"):
        gpu_power_breakdown(cluster("hgx", 8), world=8, board_power_W=700.0, host_power_W=575.0,
                            figures=GpuPowerFigures(systems={}, nic_W={}))
    with pytest.raises(SpecError, match="host_power_W=100 of hgx does not cover"):
        gpu_power_breakdown(cluster("hgx", 8), world=8, board_power_W=700.0, host_power_W=100.0, figures=FIG)
    with pytest.raises(SpecError, match="switch_W"):
        ReferenceSystem(name="x", gpus=8, switches=4, switch_W=0.0, nics=8, nic_W=25.0)


def test_breakdown_dict_adds_up():
    d = power("hgx", 8, nodes=2).as_dict()
    parts = ("gpu_boards_W", "host_W", "nvswitch_W", "nics_W", "switch_ports_W", "transceivers_W")
    assert d["total_W"] == pytest.approx(sum(d[k] for k in parts))
    assert d["network_W"] == pytest.approx(d["nics_W"] + d["switch_ports_W"] + d["transceivers_W"])
