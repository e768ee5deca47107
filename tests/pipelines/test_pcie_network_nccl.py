"""``network=nccl`` on ``fabric=pcie`` through the pipelines: the PCIe calibration rows
(conf/measurements/nccl_pcie.yaml = section 3 of ../shared/reference/gpu-measurements.md) as a user
runs them with ``gx collective``, the same numbers as the scheduler=nccl baseline's pricing, the
nccl-tests columns and transports, decode on the same code, and the one-line refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from collectives.errors import SpecError
from gx_inprocess import run_task
from pipelines import fit_nccl_pcie
from pipelines.nccl_fit_values import bus_factor

TOLERANCE = 0.05  # as tests/validation/test_nccl_pcie_calibration.py (the fit's own rows)


@pytest.fixture(scope="module")
def user_conf(tmp_path_factory) -> Path:
    """A user's conf dir holding the calibration set's systems as platforms (conf/platform schema)."""
    conf = tmp_path_factory.mktemp("conf")
    systems, _ = fit_nccl_pcie.load()
    (conf / "platform").mkdir()
    for name, platform in systems.items():
        (conf / "platform" / f"{name}.yaml").write_text(yaml.safe_dump(platform))
    return conf


def _collective(conf: Path, *args: str):
    res, _ = run_task("collective", "fabric=pcie", "nodes=1", "network=nccl", f"hydra.searchpath=[file://{conf}]",
                      *args)
    return res


SYSTEMS, ROWS = fit_nccl_pcie.load()
ROWS = {r.id: r for r in ROWS}


@pytest.fixture(scope="module")
def fitted_rows() -> dict:
    """The fit's own prediction of every row (pipelines.fit_nccl_pcie.residuals)."""
    return {e["id"]: e for e in fit_nccl_pcie.residuals()}


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_calibration_row_through_gx_collective(user_conf, fitted_rows, row_id):
    row, systems, fit = ROWS[row_id], SYSTEMS, fitted_rows
    world = () if row.gpus == systems[row.system]["gpus_per_node"] else (f"+fabric.world={row.gpus}",)
    res = _collective(user_conf, f"platform={row.system}", f"collective={row.collective}", *world,
                      f"size={row.size_bytes}", f"network.generations.pcie_server.p2p_level={row.p2p_level}")
    assert res["network"] == "nccl" and res["platform"] == row.system and res["group_size"] == row.gpus
    # one piece of code: the CLI's number is the fit's (the scheduler=nccl baseline's pricing)
    assert res["completion_s"] == pytest.approx(fit[row_id]["predicted_s"], rel=1e-12)
    assert abs(res["completion_s"] / row.time_s - 1.0) <= TOLERANCE, (res["completion_s"], row.time_s)
    assert res["busbw_Bps"] == pytest.approx(res["algbw_Bps"] * bus_factor(row.collective, row.gpus), rel=1e-12)
    assert f"{res['algorithm']}/{res['protocol']}" == fit[row_id]["choice"]
    # NCCL's transport: SHM without P2P (across the sockets too on the two-socket 8-GPU rings),
    # P2P through the root complex with NCCL_P2P_LEVEL=SYS
    expected = {"none": "shm" if row.gpus == 4 else "shm+shm_sys", "sys": "pci_rc"}[row.p2p_level]
    assert res["transport"] == expected


def test_nccl_and_flow_price_collectives_alike_on_pcie(user_conf):
    """network=flow (auto on pcie) already prices the non-AlltoAllv collectives with PcieNccl:
    network=nccl reports the same times, with nccl-tests' columns."""
    args = ("platform=r5080_bf3", "collective=allreduce", "size=1MiB")
    nccl = _collective(user_conf, *args)
    flow, _ = run_task("collective", "fabric=pcie", "nodes=1", "network=flow", *args)
    assert flow["network"] == "flow" and "algbw_Bps" not in flow
    assert nccl["completion_s"] == flow["completion_s"] and nccl["schedule"] == flow["schedule"] == "ring/simple"
    assert nccl["network_report"]["generation"] == "pcie_server"
    assert nccl["network_report"]["transports"] == {"collective/group/allreduce": "pci+shm"}


def test_forced_protocol_on_pcie(user_conf):
    res = _collective(user_conf, "platform=r5080_bf3", "collective=allreduce", "size=8", "network.protocol=simple")
    assert (res["algorithm"], res["protocol"]) == ("ring", "simple")


@pytest.mark.parametrize("override, words", [
    ("network.algorithm=tree", "does not run on fabric=pcie"),
    ("network.algorithm=collnet_direct", "does not run on fabric=pcie"),
    ("network.protocol=ll128", "is off on fabric=pcie"),
])
def test_pcie_forced_choice_nccl_lacks_is_one_line(user_conf, override, words):
    with pytest.raises(SpecError) as e:
        _collective(user_conf, "platform=r5080_bf3", "size=8", override)
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.slow
def test_decode_on_pcie_with_network_nccl_is_the_nccl_baseline():
    base = ("fabric=pcie", "model=qwen3_30b_a3b", "accelerator=rtx5080", "platform=r5080_bf3", "nodes=2", "ep=16",
            "context=4096", "model.layers=1", "batch=8")
    nccl, _ = run_task("decode", *base, "network=nccl")
    baseline, _ = run_task("decode", *base, "scheduler=nccl")
    assert nccl["network"] == "nccl" and baseline["network"] == "flow"
    assert nccl["decode_step_s"] == baseline["decode_step_s"]
    assert nccl["collective_time_s"] == baseline["collective_time_s"]


def test_prefill_scheduler_comparison_under_network_nccl_is_one_line():
    """NCCL runs one AlltoAllv (its pairwise grouped sends): comparing schedulers needs the flow model."""
    with pytest.raises(SpecError) as e:
        run_task("prefill", "experiment=qwen3_prefill_pcie", "network=nccl", "model.layers=1")
    assert "network=nccl runs NCCL's own" in str(e.value) and "\n" not in str(e.value)
