"""pipelines.network: conf/fabric/*.yaml → physical fabric, network model and power (config edge)."""

from pathlib import Path

import pytest
import yaml

from collectives.errors import SpecError
from fabrics.network.analytical import AnalyticalSingleLevel, FabricAnalytical
from fabrics.scaleup.physical import build_fabric
from pipelines.network import build_network, cluster_spec
from pipelines.power import accelerator_power_W, fabric_power

CONF = Path(__file__).resolve().parents[2] / "conf" / "fabric"


class Rx00:
    name = "rx00"
    scaleup_ports = 36


def cfg(kind, **over):
    fab = yaml.safe_load((CONF / f"{kind}.yaml").read_text())
    fab.update(over)
    return {"fabric": fab, "network": {"name": "analytical"}}


@pytest.mark.parametrize("kind", ["single_eps", "single_ocs", "all_eps", "hybrid", "all_ocs"])
def test_every_fabric_yaml_builds(kind):
    c = cfg(kind)
    cluster = cluster_spec(c, Rx00(), 512)
    assert cluster.family == "scaleup" and cluster.nodes == 1 and cluster.scale_out is None
    f = build_fabric(cluster.node)
    assert f.spec.kind == kind and f.spec.ports == 36 and f.spec.link_rate_Bps == pytest.approx(5e10)
    assert f.spec.accelerators == (512 if kind.startswith("single") else 576)
    assert isinstance(build_network(c, Rx00(), 512), FabricAnalytical)


def test_units_are_parsed_at_the_edge():
    cluster = cluster_spec(cfg("all_ocs", ocs_pass_through="20ns", link_rate="800Gb/s", hop_latency="0.6us"), Rx00(), 512)
    assert cluster.node.latency.ocs_pass_through_s == pytest.approx(2e-8)
    assert cluster.node.link_rate_Bps == pytest.approx(1e11)
    assert cluster.options.planner_hop_latency_s == pytest.approx(6e-7) and cluster.options.schedule == "auto"


def test_one_parser_for_every_model_and_family_keys_refused():
    from fabrics.network.simlette import SimletteNetwork
    from fabrics.network.flow import FabricFlow

    c = cfg("all_eps", up_ports=4)
    sim = build_network({**c, "network": {"name": "simlette"}}, Rx00(), 512)
    ana = build_network(c, Rx00(), 512)
    flow = build_network({**c, "network": {"name": "flow"}}, Rx00(), 512)
    assert isinstance(sim, SimletteNetwork) and isinstance(flow, FabricFlow)
    assert sim.fabric.phys.spec == ana.fabric.spec == flow.fabric.spec  # same defaults, same parser
    with pytest.raises(SpecError, match="link_rate is required"):
        cluster_spec(cfg("all_eps", link_rate=None), Rx00(), 512)
    with pytest.raises(SpecError, match="fabric.platform belongs to the other fabric family"):
        cluster_spec(cfg("all_eps", platform="fig1"), Rx00(), 512)
    with pytest.raises(SpecError, match="unknown fabric key fabric.rails"):
        cluster_spec(cfg("all_eps", rails=3), Rx00(), 512)


def test_network_models_refuse_fabrics_they_do_not_declare():
    pcie = {"fabric": {"name": "pcie", "platform": "fig1", "nodes": 1}, "platform": None, "scheduler": None}
    for name in ("analytical", "simlette"):
        with pytest.raises(SpecError, match=f"network={name} does not run on fabric=pcie.*choose network=flow"):
            build_network({**pcie, "network": {"name": name}}, Rx00(), 4)
    from fabrics.network.pcie import PcieNetwork

    assert isinstance(build_network({**pcie, "network": {"name": "flow"}}, Rx00(), 4), PcieNetwork)


def test_single_level_model_still_available():
    c = cfg("single_eps")
    c["network"]["model"] = "single_level"
    assert isinstance(build_network(c, Rx00(), 512), AnalyticalSingleLevel)


def test_power_from_config():
    p400 = fabric_power(cfg("all_eps"), Rx00(), 512)
    p16 = fabric_power(cfg("all_eps", link_rate="1.6Tb/s"), Rx00(), 512)
    o400 = fabric_power(cfg("all_ocs"), Rx00(), 512)
    o16 = fabric_power(cfg("all_ocs", link_rate="1.6Tb/s"), Rx00(), 512)
    assert p400["system_power_W"] / o400["system_power_W"] == pytest.approx(1.33, rel=0.01)
    assert p16["system_power_W"] / o16["system_power_W"] == pytest.approx(1.60, rel=0.01)
    assert fabric_power({"fabric": {"name": "pcie"}}, Rx00(), 16) is None
    odd = fabric_power(cfg("all_eps", link_rate="300Gb/s"), Rx00(), 512)
    assert odd["system_power_W"] is None and "Table 12" in odd["power_note"]


def test_accelerator_power():
    assert accelerator_power_W({}, Rx00()) == 2631.0
    assert accelerator_power_W({"accelerator_power": 1454}, Rx00()) == 1454.0

    class H100:
        name = "h100"

    assert accelerator_power_W({}, H100()) is None
    with pytest.raises(SpecError, match="accelerator_power"):
        accelerator_power_W({"accelerator_power": -1}, Rx00())


def test_unknown_network_is_a_spec_error():
    c = cfg("all_eps")
    c["network"] = {"name": "ns3"}
    with pytest.raises(SpecError, match="ns3"):
        build_network(c, Rx00(), 512)
