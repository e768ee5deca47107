"""End-to-end runs of the foundation pipelines (demand, splits, decode) and their bad input."""

import json

import pytest


def _results(out):
    return json.loads((out / "results.json").read_text())


def test_decode_default_writes_results_and_trace(pipeline):
    proc, out = pipeline("decode")
    assert proc.returncode == 0, proc.stderr
    res = _results(out)
    for key in ("decode_step_s", "interactivity_tok_s_user", "throughput_tok_s", "breakdown_s",
                "memory_bytes_per_rank", "parallel"):
        assert key in res
    assert set(res["breakdown_s"]) >= {"attention", "ffn", "communication", "fixed"}
    assert res["model"] == "megatron_5t" and res["world"] == 512 and res["accelerator"] == "rx00"
    # the step is the sum of its parts without HOP-B overlap (B.4)
    assert sum(res["breakdown_s"].values()) == pytest.approx(res["decode_step_s"], rel=1e-9)
    assert res["interactivity_tok_s_user"] == pytest.approx(1 / res["decode_step_s"])
    trace = json.loads((out / "trace.json").read_text())
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in slices} == {"compute", "collective"}
    assert max(e["ts"] + e["dur"] for e in slices) == pytest.approx(res["decode_step_s"] * 1e6, rel=1e-6)
    assert "decode step" in proc.stdout


def test_decode_batch_scales_throughput(pipeline):
    (p1, o1), (p4, o4) = pipeline("decode", "batch=1"), pipeline("decode", "batch=4")
    assert p1.returncode == 0 and p4.returncode == 0, p1.stderr + p4.stderr
    r1, r4 = _results(o1), _results(o4)
    assert r4["decode_step_s"] > r1["decode_step_s"]
    assert r4["throughput_tok_s"] == pytest.approx(4 / r4["decode_step_s"])


def test_demand_pipeline_table1_b4(pipeline):
    proc, out = pipeline("demand", "batch=4")
    assert proc.returncode == 0, proc.stderr
    rows = {(r["region"], r["axis"]): r for r in _results(out)["collectives"]}
    assert rows[("attention", "kvp")]["payload_bytes"] == 264
    assert rows[("ffn", "ep")]["payload_bytes"] == 512 * 1024


def test_splits_pipeline(pipeline):
    proc, out = pipeline("splits", "model=gpt_oss_5p3_like")
    assert proc.returncode == 0, proc.stderr
    res = _results(out)
    assert res["count"] == 45 == len(res["splits"])


BAD = [
    (("parallel.kvp=3", "parallel.tpa=128"), "power of two"),
    (("parallel.kvp=8", "parallel.tpa=128"), "must equal"),
    (("parallel.kvp=8", "parallel.tpa=128", "parallel.ep=16", "parallel.tpe=64"), "world"),
    (("parallel.kvp=2", "parallel.tpa=256"), "KV heads"),
    (("parallel.ep=512", "parallel.tpe=1"), "experts"),
    (("batch=32",), "batch"),
    (("model=megatron_9t",), "megatron_9t"),
    (("accelerator=tpu9",), "tpu9"),
    (("context=5Q",), "context"),
    (("fabric.link_rate=fast",), "link_rate"),
    (("parallel.kvp=four",), "kvp"),  # wrong type: caught by the structured-config schema
    (("+model.layerz=3",), "layerz"),  # unknown key in a group: caught by the schema
    (("batch=0",), "batch"),
]


@pytest.mark.parametrize("overrides,needle", BAD, ids=[b[1] + ":" + " ".join(b[0]) for b in BAD])
def test_decode_bad_input_is_one_line_exit_2(pipeline, overrides, needle):
    proc, out = pipeline("decode", *overrides)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert needle.lower() in lines[0].lower()
    assert "Traceback" not in proc.stderr
    assert not (out / "results.json").exists()
