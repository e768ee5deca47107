"""``pipelines.decode fabric=pcie``: the EP decode phase with AlltoAllv dispatch/combine (issue #9), CLI end to end."""

import json

import pytest

# Qwen3-30B-A3B on 2 x R5080-BF3, EP16; two layers keep each run to a few seconds
BASE = ("fabric=pcie", "model=qwen3_30b_a3b", "accelerator=rtx5080", "platform=r5080_bf3", "nodes=2", "ep=16",
        "context=4096", "model.layers=2", "tracking.enabled=false")


def _results(out):
    return json.loads((out / "results.json").read_text())


@pytest.mark.parametrize("scheduler", ["nccl", "variopath"])
def test_decode_on_pcie_reports_alltoallv_planning_and_decode_keys(pipeline, scheduler):
    proc, out = pipeline("decode", *BASE, f"scheduler={scheduler}", "batch=32")
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = _results(out)
    assert res["fabric"] == "pcie" and res["phase"] == "decode" and res["scheduler"] == scheduler
    assert res["platform"] == "r5080_bf3" and res["nodes"] == 2 and res["ep"] == res["world"] == 16
    assert res["batch"] == res["tokens"] == 32 and res["context_tokens"] == 4096
    a2a = res["alltoallv"]
    assert len(a2a["per_layer_dispatch_s"]) == 2 == len(a2a["per_layer_combine_s"])
    assert all(t > 0 for t in a2a["per_layer_dispatch_s"] + a2a["per_layer_combine_s"])
    assert a2a["total_s"] == pytest.approx(sum(a2a["per_layer_dispatch_s"]) + sum(a2a["per_layer_combine_s"]))
    assert res["collective_time_s"]["ffn/ep/alltoallv_dispatch"] == pytest.approx(sum(a2a["per_layer_dispatch_s"]))
    # static NCCL schedules plan nothing online; VarioPath's planning is charged on the critical path
    assert (res["planning"]["total_s"] > 0) == (scheduler == "variopath")
    assert res["breakdown_s"]["planning"] == pytest.approx(res["planning"]["total_s"])
    # decode keys: end-to-end step, per-user and aggregate token rates
    assert res["decode_step_s"] == res["latency_s"]
    assert sum(res["breakdown_s"].values()) == pytest.approx(res["decode_step_s"], rel=1e-9)
    assert res["interactivity_tok_s_user"] == pytest.approx(1 / res["decode_step_s"])
    assert res["throughput_tok_s"] == pytest.approx(32 / res["decode_step_s"])
    trace = json.loads((out / "trace.json").read_text())
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert max(e["ts"] + e["dur"] for e in slices) == pytest.approx(res["decode_step_s"] * 1e6, rel=1e-6)
    assert f"{res['interactivity_tok_s_user']:.1f} tok/s/user" in proc.stdout


def test_decode_on_pcie_zipf_routing_grows_alltoallv_against_uniform(pipeline):
    runs = {}
    for routing in ("uniform", "zipf"):
        proc, out = pipeline("decode", *BASE, "scheduler=nccl", "batch=512", f"routing={routing}", "routing.dedup=false")
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[routing] = _results(out)
    assert runs["zipf"]["routing"]["model"] == "zipf" and runs["zipf"]["routing"]["zipf_s"] == 0.8
    assert runs["zipf"]["alltoallv"]["max_s"] > runs["uniform"]["alltoallv"]["max_s"]


@pytest.mark.parametrize("overrides, message", [
    (("ep=24", "nodes=3", "batch=32"), "EP=24 must divide the 128 experts"),
    (("ep=32", "batch=32"), "set nodes=4"),
    (("batch=32", "compute=measured"), "compute='measured' is not available with fabric=pcie"),
])
def test_decode_on_pcie_bad_input_is_one_line_exit_2(pipeline, overrides, message):
    proc, out = pipeline("decode", *BASE, *overrides)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not (out / "results.json").exists()


def test_decode_on_pcie_with_fewer_requests_than_ep_ranks(pipeline):
    # DP attention: 8 requests on 16 ranks leave 8 ranks without tokens (they still host experts)
    proc, out = pipeline("decode", *BASE, "scheduler=nccl", "batch=8")
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = _results(out)
    assert res["tokens"] == 8 and res["tokens_per_rank"] == 1 and res["ep"] == 16
    assert res["alltoallv"]["total_s"] > 0
