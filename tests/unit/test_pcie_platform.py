"""PCIe platforms: the config-edge builder (pipelines.network), directed resources, clusters."""

from pathlib import Path

import pytest
import yaml

from collectives.errors import SpecError
from pipelines.network import pcie_cluster, pcie_server_spec

CONF = Path(__file__).resolve().parents[2] / "conf" / "platform"
PLATFORMS = ["fig1", "r5080_cx8", "r5080_bf3", "r5090_bf3", "l20_cx7"]


def load(name):
    return yaml.safe_load((CONF / f"{name}.yaml").read_text())


@pytest.mark.parametrize("name", PLATFORMS)
def test_every_platform_yaml_builds_and_matches_table2_counts(name):
    cluster = pcie_cluster(load(name), 1)
    table2 = {"fig1": (6, 2), "r5080_cx8": (8, 4), "r5080_bf3": (8, 4), "r5090_bf3": (16, 8), "l20_cx7": (16, 8)}
    assert (cluster.n_ranks, len(cluster.server.nics)) == table2[name]


def test_nic_bandwidth_per_node_matches_table2():
    gbps = {"r5080_cx8": 3200, "r5080_bf3": 1600, "r5090_bf3": 3200, "l20_cx7": 3200}
    for name, want in gbps.items():
        s = pcie_server_spec(load(name))
        assert len(s.nics) * s.nic_rate_Bps * 8 / 1e9 == pytest.approx(want)


def test_directions_and_parallel_links_are_distinct_resources():
    cfg = load("fig1")
    cfg["links"] = [["sw0", "sw1"], ["sw0", "sw1", "32GB/s"]]
    cap = pcie_cluster(cfg, 1).capacities()
    assert cap["n0.sw0>sw1"] == 64e9 and cap["n0.sw1>sw0"] == 64e9
    assert cap["n0.sw0>sw1#1"] == 32e9 and cap["n0.sw1>sw0#1"] == 32e9


def test_multi_node_cluster_has_leaf_spine_uplinks_when_nodes_span_leaves():
    cfg = load("fig1")
    cfg["network"] = {"nodes_per_leaf": 1, "oversubscription": 2.0}
    cap = pcie_cluster(cfg, 2).capacities()
    assert cap["leaf0>spine"] == pytest.approx(2 * 50e9 / 2.0)
    assert "n1.nic0>leaf1" in cap and "leaf1>n1.nic0" in cap


@pytest.mark.parametrize("mutate, words", [
    (lambda c: c.pop("pcie_rate"), "pcie_rate"),
    (lambda c: c.update(gpus={"sw0": [0, 1, 2], "sw9": [3, 4, 5]}), "sw9"),
    (lambda c: c["gpus"].update(sw1=[3, 4, 5, 0]), "two vertices"),
    (lambda c: c["links"].append(["sw0", "nowhere"]), "nowhere"),
    (lambda c: c.update(pcie_rate="fast"), "pcie_rate"),
    (lambda c: c["gpus"].update(sw1=[3, 4]), "not attached"),
])
def test_bad_platforms_are_one_line_spec_errors(mutate, words):
    cfg = load("fig1")
    mutate(cfg)
    with pytest.raises(SpecError) as err:
        pcie_cluster(cfg, 1)
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("nodes", [0, -1, 1.5, True])
def test_nodes_must_be_positive_integers(nodes):
    with pytest.raises(SpecError):
        pcie_cluster(load("fig1"), nodes)


def test_multi_node_without_nics_is_rejected():
    cfg = load("fig1")
    cfg["nics"] = {}
    with pytest.raises(SpecError, match="no NICs"):
        pcie_cluster(cfg, 2)
