"""pipelines/power.py: one power entry for every fabric family, with the shipped figures.

Scale-up fabrics keep Table 12 exactly (tests/validation/test_power_ratio.py, the golden files);
GPU deployments get power from conf/power/gpu.yaml and the accelerator YAMLs.
"""

from pathlib import Path

import pytest
import yaml

from collectives.errors import SpecError
from fabrics.nvswitch import NvSwitchDomain
from fabrics.power import ACCELERATOR_W, CPO_PORT_W
from fabrics.spec import ClusterSpec, ScaleOutSpec
from pipelines.network import cluster_spec
from pipelines.power import (
    accelerator_power_W, deployment_power, fabric_power, gpu_power_figures, power_line, power_results,
)
from pipelines.specs import accelerator_spec

ROOT = Path(__file__).resolve().parents[2]


def accel(name):
    return accelerator_spec({"accelerator": yaml.safe_load((ROOT / "conf/accelerator" / f"{name}.yaml").read_text())})


def gpu_cluster(a, gpus, nodes=1, nics=8, rate=400e9 / 8):
    node = NvSwitchDomain(name=a.name, gpus=gpus, max_gpus=a.nvlink_domain_max, nvlink_ports=a.nvlink_ports,
                          nvlink_rate_Bps=a.nvlink_rate_Bps, nvls=a.nvls, gpus_per_tray=a.gpus_per_tray)
    out = None if nodes == 1 else ScaleOutSpec(topology="rail_optimized", nics_per_node=nics, nic_rate_Bps=rate)
    return ClusterSpec(name="nvswitch" if nodes == 1 else "gpu_cluster", nodes=nodes, node=node, scale_out=out)


@pytest.fixture(scope="module")
def figures():
    return gpu_power_figures()


@pytest.mark.parametrize("name", ["h100", "h200", "b200", "gb200", "gb300"])
def test_every_gpu_accelerator_has_power_and_a_reference_system(figures, name):
    a = accel(name)
    assert a.board_power_W > 0 and a.host_power_W > 0
    ref = figures.system(name)
    assert ref.gpus == a.nvlink_domain_max and ref.host_rest_W(a.host_power_W) > 0


@pytest.mark.parametrize("name, table", [("gb200", "B200"), ("gb300", "B300")])
def test_nvl72_figures_reproduce_table12_per_xpu_power(figures, name, table):
    # Table 12: per-XPU = (rack - 9 switch trays) / 72; here board + host share - its switch-tray share
    assert accelerator_power_W({}, accel(name), figures) == pytest.approx(ACCELERATOR_W[table], rel=1e-3)


def test_a_full_dgx_h100_is_its_rated_power_less_the_idle_nics(figures):
    a = accel("h100")
    p = deployment_power(gpu_cluster(a, 8), a, 8, figures=figures)
    assert p["system_power_W"] == pytest.approx(10_200 - 8 * 25.0)  # DGX H100 10.2 kW; 8 CX-7 unused
    assert p["deployment_power_W"] == p["system_power_W"] == p["power_breakdown_W"]["total_W"]
    assert p["accelerator_power_W"] == pytest.approx(700 + 575)


def test_gpu_deployments_are_charged_what_they_use(figures):
    gb = accel("gb200")
    eight = deployment_power(gpu_cluster(gb, 8), gb, 8, figures=figures)["power_breakdown_W"]
    rack = deployment_power(gpu_cluster(gb, 72), gb, 72, figures=figures)["power_breakdown_W"]
    assert eight["compute_trays"] == 2 and eight["nvswitch_W"] == pytest.approx(1700.0)
    assert rack["compute_trays"] == 18 and rack["total_W"] == pytest.approx(120_000 - 72 * 25.0, rel=1e-4)
    h = accel("h100")
    one = deployment_power(gpu_cluster(h, 8), h, 8, figures=figures)["system_power_W"]
    two = deployment_power(gpu_cluster(h, 8, nodes=2), h, 16, figures=figures)["power_breakdown_W"]
    assert (two["nodes"], two["nics"], two["switch_ports"]) == (2, 16, 48)
    assert two["total_W"] == pytest.approx(2 * one + two["network_W"])


def test_gpu_power_notes_instead_of_silence(figures):
    h = accel("h100")
    odd = deployment_power(gpu_cluster(h, 8, nodes=2, rate=200e9 / 8), h, 16, figures=figures)
    assert odd["system_power_W"] is None and "nic_rate=200Gb/s" in odd["power_note"]

    class Bare:
        name = "h100"
        board_power_W = None
        host_power_W = None

    bare = deployment_power(gpu_cluster(h, 8), Bare(), 8, figures=figures)
    assert bare["system_power_W"] is None and "board_power_W" in bare["power_note"]
    Bare.board_power_W, Bare.host_power_W = 700.0, 50.0  # below its NVSwitch + NIC share: bad input
    with pytest.raises(SpecError, match="host_power_W=50 of DGX H100 does not cover"):
        deployment_power(gpu_cluster(h, 8), Bare(), 8, figures=figures)
    with pytest.raises(SpecError, match="accelerator_power.*board_power_W"):
        deployment_power(gpu_cluster(h, 8), h, 8, accelerator_power=1000.0, figures=figures)


def scaleup(kind, **fabric):
    fab = yaml.safe_load((ROOT / "conf/fabric" / f"{kind}.yaml").read_text())
    return {"fabric": {**fab, **fabric}, "network": {"name": "analytical"}}


def test_scaleup_system_power_stays_table12_and_the_deployment_share_sits_beside_it():
    rx = accel("rx00")
    eps = fabric_power(scaleup("all_eps"), rx, 512)
    assert eps["system_power_W"] == pytest.approx(2_220_998.4)  # 576 x 2631 W + EPS ports + pluggables
    assert eps["deployment_power_W"] == pytest.approx(2_220_998.4 - 64 * 2631.0)
    ocs = fabric_power(scaleup("all_ocs"), rx, 512)
    assert ocs["system_power_W"] == pytest.approx(1_673_568.0)
    assert ocs["deployment_power_W"] == pytest.approx(1_673_568.0 - 64 * (2631.0 + 36 * CPO_PORT_W[400]))
    whole = fabric_power(scaleup("single_eps"), rx, 512)
    assert whole["deployment_power_W"] == pytest.approx(whole["system_power_W"])


def test_gpus_on_a_scaleup_fabric_get_power_less_their_own_nvswitches(figures):
    h = accel("h100")
    assert accelerator_power_W({}, h, figures) == pytest.approx(700 + 575 - 4 * 200.0 / 8)
    p = fabric_power(scaleup("single_eps", world=8), h, 8)
    assert p["system_power_W"] > 8 * 1175.0 and p["accelerator_power_W"] == pytest.approx(1175.0)
    assert accelerator_power_W({}, accel("b200")) == ACCELERATOR_W["B200"]  # Table 12 wins by name
    assert fabric_power(scaleup("all_eps"), accel("l20"), 512)["system_power_W"] is None


def test_pcie_has_no_power_model():
    assert fabric_power({"fabric": {"name": "pcie"}}, accel("rtx5080"), 16) is None
    cluster = cluster_spec({"fabric": {"name": "pcie", "platform": "fig1", "nodes": 1}, "platform": None,
                            "scheduler": None}, accel("rtx5080"), 4)
    assert deployment_power(cluster, accel("rtx5080"), 4) is None


def test_results_keys_and_power_line():
    power = {"system_power_W": 2e6, "accelerator_power_W": 2631.0, "power_breakdown_W": {"total_W": 2e6},
             "deployment_power_W": 1.5e6}
    res = power_results(power, 1000.0)
    assert res["tokens_per_s_per_MW"] == pytest.approx(500.0) and "deployment_power_W" not in res
    assert "deployment's own 1.500 MW" in power_line(res, power)
    assert "own" not in power_line(res, dict(power, deployment_power_W=2e6))
    assert power_results(None, 1.0) == {}
