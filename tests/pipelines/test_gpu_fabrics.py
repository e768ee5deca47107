"""GPU fabrics (``fabric=nvswitch | gpu_cluster``) end to end: decode on 1, 8 and 16 GPUs for zoo
models with TP, EP and DP-attention splits, ``gx collective``'s nccl-tests quantities, the ideal
analytical model's pieces, the parser. In process (``gx_inprocess``), network=analytical (the
ideal model; network=nccl is its own model's business)."""

from __future__ import annotations

import json

import pytest

from collectives.errors import SpecError
from gx_inprocess import run_task

FAST = ("network=analytical", "context=4K")


def _decode(*args, batch: int = 16):
    res, artifacts = run_task("decode", *FAST, f"batch={batch}", *args)
    assert sum(res["breakdown_s"].values()) == pytest.approx(res["decode_step_s"], rel=1e-9)
    return res


def test_single_gpu_decode_has_no_collectives_and_is_bounded_by_hbm():
    res = _decode("model=llama3_1_8b", "accelerator=h200", "precision=bf16", "fabric=nvswitch", "world=1",
                  "parallel=tp_ep", "parallel.tp=1", "parallel.ep=1")
    assert res["world"] == 1 and res["fabric"] == "nvswitch" and res["network"] == "analytical"
    assert res["breakdown_s"]["communication"] == 0.0
    assert res["collective_time_s"] == {} and "schedules" not in res
    # every weight and every KV byte crosses HBM once per step: the step cannot beat that
    assert res["decode_step_s"] >= res["memory_bytes_per_rank"] / 4.8e12


# (model, accelerator, precision, fabric, world, parallel overrides): TP in a node, EP in a node,
# DP-attention + EP across two nodes, TP x EP across two nodes
CASES = [
    ("llama3_1_8b", "h100", "fp8", "nvswitch", 8, ("parallel=tp_ep", "parallel.tp=8", "parallel.ep=1")),
    ("mixtral_8x7b", "h200", "bf16", "nvswitch", 8, ("parallel=tp_ep", "parallel.tp=1", "parallel.ep=8")),
    ("deepseek_v3", "h200", "fp8", "gpu_cluster", 16, ("parallel=dp_attention", "parallel.dpa=16", "parallel.ep=16")),
    pytest.param("llama3_1_70b", "h100", "fp8", "gpu_cluster", 16, ("parallel=tp_ep", "parallel.tp=16", "parallel.ep=1"),
                 marks=pytest.mark.slow),
    pytest.param("qwen3_30b_a3b", "h100", "bf16", "gpu_cluster", 16, ("parallel=tp_ep", "parallel.tp=2", "parallel.ep=8"),
                 marks=pytest.mark.slow),
    pytest.param("gpt_oss_120b", "gb300", "fp4", "nvswitch", 64, ("parallel=tp_ep", "parallel.tp=1", "parallel.ep=64"),
                 marks=pytest.mark.slow),
    pytest.param("mixtral_8x7b", "b200", "fp8", "gpu_cluster", 16, ("parallel=dp_attention", "parallel.dpa=16", "parallel.ep=8"),
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize("model,accel,precision,fabric,world,par", CASES)
def test_decode_on_gpu_fabrics(model, accel, precision, fabric, world, par):
    res = _decode(f"model={model}", f"accelerator={accel}", f"precision={precision}", f"fabric={fabric}",
                  f"world={world}", *par)
    assert res["world"] == world and res["fabric"] == fabric and res["accelerator"] == accel
    assert res["breakdown_s"]["communication"] > 0
    names = set(res["schedules"].values())
    spans_nodes = fabric == "gpu_cluster"
    # inside one node the Eq. 1 native schedules; across nodes at least one hierarchical collective
    assert names <= {"one_shot", "two_shot", "hierarchical"}
    assert ("hierarchical" in names) == spans_nodes
    cluster = res["cluster"]
    assert cluster["nodes"] == (2 if spans_nodes else 1)
    assert cluster["nodes"] * cluster["gpus_per_node"] == world
    assert cluster["nvlink_ports"] == 18 and (cluster["nics_per_node"] == 8) == spans_nodes


def test_cross_node_collectives_follow_the_nic_rate():
    base = ("model=llama3_1_8b", "accelerator=h100", "precision=fp8", "fabric=gpu_cluster", "world=16",
            "parallel=tp_ep", "parallel.tp=16", "parallel.ep=1")
    slow = _decode(*base, "fabric.nic_rate=200Gb/s")
    fast = _decode(*base, "fabric.nic_rate=800Gb/s")
    assert fast["breakdown_s"]["communication"] < slow["breakdown_s"]["communication"]
    assert fast["breakdown_s"]["ffn"] == slow["breakdown_s"]["ffn"]  # compute does not see the network


# --- gx collective: nccl-tests quantities -------------------------------------------------------------

def _collective(*args):
    res, artifacts = run_task("collective", "network=analytical", *args)
    return res, artifacts


@pytest.mark.parametrize("collective,factor", [
    ("allreduce", lambda n: 2 * (n - 1) / n),
    pytest.param("allgather", lambda n: (n - 1) / n, marks=pytest.mark.slow),
    pytest.param("reducescatter", lambda n: (n - 1) / n, marks=pytest.mark.slow),
    pytest.param("alltoall", lambda n: (n - 1) / n, marks=pytest.mark.slow)])
def test_collective_reports_nccl_tests_quantities(collective, factor):
    res, artifacts = _collective("accelerator=h200", "fabric=nvswitch", f"collective={collective}",
                                 "size=32KiB..1GiB*32")
    assert res["world"] == 8 and res["group_size"] == 8 and res["accelerator"] == "h200"
    assert [r["size"] for r in res["sweep"]] == [32 << 10, 1 << 20, 32 << 20, 1 << 30]
    for row in res["sweep"]:
        assert set(row) >= {"size", "completion_s", "algbw_Bps", "busbw_Bps", "algorithm", "protocol"}
        assert row["algbw_Bps"] == pytest.approx(row["size"] / row["completion_s"])
        assert row["busbw_Bps"] == pytest.approx(row["algbw_Bps"] * factor(8))
        assert row["algorithm"] is None and row["protocol"] is None  # ideal model: no NCCL choice
    busbw = [r["busbw_Bps"] for r in res["sweep"]]
    assert busbw == sorted(busbw)
    # the ideal model never beats the GPU's NVLink line rate (H200: 18 x 25 GB/s per direction)
    assert busbw[-1] <= 18 * 25e9 * (1 + 1e-9)
    assert "completion_time.png" in artifacts and "busbw.png" in artifacts


def test_group_size_scales_gpus_inside_one_node():
    rows = {}
    for n in (4, 5, 8):
        res, _ = _collective("accelerator=h100", "fabric=nvswitch", f"group_size={n}", "size=8GiB")
        assert res["group_size"] == n and res["groups"] == 8 // n and res["world"] == 8
        rows[n] = res
    # a group of 5 of the 8 GPUs: busbw uses n = 5; ideal two-shot busbw is the line rate at every n
    for n, res in rows.items():
        assert res["busbw_Bps"] == pytest.approx(res["algbw_Bps"] * 2 * (n - 1) / n)
        assert res["busbw_Bps"] == pytest.approx(18 * 25e9, rel=1e-3)


def test_collective_results_are_deterministic(tmp_path):
    args = ("accelerator=gb300", "fabric=gpu_cluster", "fabric.nodes=2", "fabric.gpus_per_node=4",
            "size=16MiB")
    run_task("collective", "network=analytical", *args, out_dir=tmp_path / "a")
    run_task("collective", "network=analytical", *args, out_dir=tmp_path / "b")
    a, b = ((tmp_path / d / "results.json").read_bytes() for d in "ab")
    assert a == b
    res = json.loads(a)
    assert res["world"] == 8 and res["schedule"] == "hierarchical"


def test_collective_refuses_single_gpu_and_a_missing_gpu():
    with pytest.raises(SpecError, match="fabric.world=1 must be at least 2"):
        _collective("accelerator=h200", "fabric=nvswitch", "fabric.world=1")
    with pytest.raises(SpecError, match="needs the GPU: add accelerator="):
        _collective("fabric=nvswitch")
    with pytest.raises(SpecError, match="group_size=9 must be between 2 and fabric.world=8"):
        _collective("accelerator=h200", "fabric=nvswitch", "group_size=9")
