"""engine=auto|roofline|cuda_graph|eager|persistent at the config edge, and the kernel-model fit."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from collectives.errors import SpecError
from pipelines.specs import engine_name
from tests.pipelines.gx_inprocess import run_task

ROOT = Path(__file__).resolve().parents[2]
# Llama 3.1 8B in BF16, TP8 on eight H200 (a paper fabric: the engine is forced)
H200_TP8 = ("accelerator=h200", "model=llama3_1_8b", "precision=bf16", "parallel=tp_ep", "parallel.tp=8",
            "parallel.ep=1", "world=8", "fabric=single_eps", "context=8K", "batch=8")


@pytest.mark.parametrize("cfg, expected", [
    ({"engine": {"name": "auto"}, "fabric": {"name": "nvswitch"}}, "cuda_graph"),
    ({"engine": {"name": "auto"}, "fabric": {"name": "gpu_cluster"}}, "cuda_graph"),
    ({"engine": {"name": "auto"}, "fabric": {"name": "all_eps"}}, "roofline"),
    ({"engine": {"name": "auto"}, "fabric": {"name": "pcie"}}, "roofline"),
    ({"fabric": {"name": "nvswitch"}}, "roofline"),  # a pipeline without the engine group
    ({"engine": {"name": "eager"}, "fabric": {"name": "all_eps"}}, "eager"),
])
def test_auto_is_cuda_graph_on_gpu_fabrics_and_the_papers_roofline_elsewhere(cfg, expected):
    assert engine_name(cfg) == expected


def test_a_forced_engine_reports_its_kernel_floor_and_auto_keeps_the_paper_path():
    forced, _ = run_task("decode", *H200_TP8, "engine=cuda_graph")
    paper, _ = run_task("decode", *H200_TP8)
    assert forced["engine"] == "cuda_graph" and forced["breakdown_s"]["kernel_floor"] > 0
    assert "engine" not in paper and "kernel_floor" not in paper["breakdown_s"]
    assert forced["decode_step_s"] > paper["decode_step_s"]  # the roofline is a lower bound (D.3)
    assert forced["collective_time_s"] == pytest.approx(paper["collective_time_s"])  # the engine times kernels only


def test_an_engine_on_projected_hardware_is_refused():
    with pytest.raises(SpecError, match="rx00 has no fitted kernel model"):
        run_task("decode", "engine=persistent")


def test_the_committed_kernel_model_is_the_fit_of_the_calibration_set(capsys):
    from pipelines import fit_kernels

    assert fit_kernels.main(["--check"]) == 0
    table = capsys.readouterr().out
    assert table.count("\n") == len(_rows()) + 2 + 2  # header, rule, a roofline check per D.3 row


def _rows() -> list:
    data = yaml.safe_load((ROOT / "conf" / "measurements" / "kernels.yaml").read_text())
    return data["hbm_stream"] + data["decode_kernels"] + data["kernel_floor"] + data["gemm"]


@pytest.mark.skipif(not (ROOT / "conf" / "fabric" / "nvswitch.yaml").exists(), reason="needs fabric=nvswitch")
def test_single_gpu_decode_on_nvswitch_is_bounded_by_bytes_read_over_measured_hbm_bandwidth():
    res, _ = run_task("decode", "accelerator=h200", "model=llama3_1_8b", "precision=bf16", "parallel=tp_ep",
                      "parallel.tp=1", "parallel.ep=1", "world=1", "fabric=nvswitch", "fabric.world=1",
                      "context=8K", "batch=8")
    assert res["engine"] == "cuda_graph" and res["breakdown_s"]["communication"] == 0.0
    rows = yaml.safe_load((ROOT / "conf" / "measurements" / "kernels.yaml").read_text())["hbm_stream"]
    measured = max(r["rate_Bps"] for r in rows if r["accelerator"] == "h200")
    # every weight but the embedding table (vocab 128256 x hidden 4096, BF16) plus the KV cache
    kv = 32 * 2 * 8 * 128 * 2 * 8 * 8000  # layers x (K, V) x KV heads x head dim x bytes x batch x context
    weights = res["memory_bytes_per_rank"] - kv
    assert res["decode_step_s"] >= (weights - 128256 * 4096 * 2 + kv) / measured
    assert res["breakdown_s"]["kernel_floor"] > 0
