"""fabrics/pcie/paths.py: path enumeration per ordered GPU pair."""

from pathlib import Path

import pytest
import yaml

from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster

CONF = Path(__file__).resolve().parents[2] / "conf" / "platform"


def topo(name, nodes=1, **changes):
    cfg = yaml.safe_load((CONF / f"{name}.yaml").read_text())
    cfg.update(changes)
    return channel_topology(pcie_cluster(cfg, nodes))


def kinds(t, i, j):
    return sorted(p.kind for p in t.options(i, j))


def test_fig1_paths_and_footprints():
    t = topo("fig1")
    assert kinds(t, 0, 1) == ["PIX"]  # same switch, one NIC per switch: no NIC hairpin
    assert kinds(t, 0, 3) == ["NIC", "PXB"]
    pxb = next(p for p in t.options(0, 3) if p.kind == "PXB")
    assert pxb.shared == ("n0.sw0>sw1",) and pxb.rate_Bps == 64e9
    nic = next(p for p in t.options(0, 3) if p.kind == "NIC")
    # GPU -> switch -> NIC -> network -> NIC -> switch -> GPU, also inside one node
    assert nic.resources == ("n0.g0>sw0", "n0.sw0>nic0", "n0.nic0>leaf0", "leaf0>n0.nic1", "n0.nic1>sw1", "n0.sw1>g3")
    assert nic.rate_Bps == 50e9
    assert set(nic.shared) == set(nic.resources) - {"n0.g0>sw0", "n0.sw1>g3"}
    assert t.nearest(0, 3).kind == "PXB" and t.nearest(0, 1).kind == "PIX"


def test_ring_of_switches_offers_both_directions():
    t = topo("r5090_bf3")
    pxb = [p for p in t.options(0, 8) if p.kind == "PXB"]  # sw0 -> sw2, opposite on the ring
    assert len(pxb) == 2
    assert {p.shared for p in pxb} == {("n0.sw0>sw1", "n0.sw1>sw2"), ("n0.sw0>sw3", "n0.sw3>sw2")}


def test_host_bridge_and_socket_kinds():
    t = topo("r5080_cx8")
    assert "PHB" in kinds(t, 0, 2)  # cx0 -> cpu0 -> cx1
    assert "SYS" in kinds(t, 0, 4)  # cx0 -> cpu0 -> cpu1 -> cx2
    assert "PIX" in kinds(t, 0, 1)


def test_inter_node_pairs_have_only_nic_paths_and_rates_are_bottlenecks():
    t = topo("l20_cx7", nodes=2)
    assert set(kinds(t, 0, 16)) == {"NIC"}
    assert all(p.rate_Bps == 32e9 for p in t.options(0, 16))  # Gen4 GPU attachment limits
    assert all(p.resources[0] == "n0.g0>sw0" and p.resources[-1] == "n1.sw0>g0" for p in t.options(0, 16))


def test_nic_affinity_makes_nearest_paths_alternate_nics():
    t = topo("r5080_bf3", nodes=2)
    out0 = [r for r in t.nearest(0, 8).shared if r.endswith(">leaf0")]
    out1 = [r for r in t.nearest(1, 8).shared if r.endswith(">leaf0")]
    assert out0 == ["n0.nic0>leaf0"] and out1 == ["n0.nic1>leaf0"]


def test_groups_are_switch_local_and_equal():
    t = topo("r5080_bf3", nodes=2)
    assert t.groups == ((0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15))
    assert t.topology_hash() == topo("r5080_bf3", nodes=2).topology_hash()
    assert t.topology_hash() != topo("r5080_bf3", nodes=1).topology_hash()


def test_every_path_is_a_connected_walk():
    t = topo("r5090_bf3")
    for (i, j), opts in t.paths.items():
        for p in opts:
            heads = [r.split(">")[0].split(".")[-1] for r in p.resources]
            tails = [r.split(">")[1].split(".")[-1].split("#")[0] for r in p.resources]
            assert all(tails[k] == heads[k + 1] for k in range(len(heads) - 1)), p.resources
