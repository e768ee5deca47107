"""``python -m pipelines.calibrate`` on CPU -> calibration.json -> ``pipelines.decode compute=measured``.

One small deployment (Megatron 235B on 8 ranks, Helix (1,8,8,1), 1M context): its flash-decode KV
shard (1.5 GB in fp32) exceeds ``max_kernel_bytes`` and is scaled and extrapolated; the other
kernels are measured at their exact shapes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

DEP = ("model=megatron_235b", "world=8", "parallel.kvp=1", "parallel.tpa=8", "parallel.ep=8", "parallel.tpe=1",
       "context=1M")


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "run"
    cmd = [sys.executable, "-m", "pipelines.calibrate", *DEP, "max_kernel_bytes=96MiB", "warmup=1", "repeats=3",
           f"hydra.run.dir={out}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out, json.loads((out / "results.json").read_text()), json.loads((out / "calibration.json").read_text())


def test_calibration_table_covers_every_kernel_with_device_and_scaling(calibrated):
    from gxnet import testing as T
    from gxnet.plan import build_plan

    out, res, table = calibrated
    assert table["format"] == "gxnet.calibration/1"
    assert table["device"]["type"] == "cpu" and table["dtype"] == "float32" and table["model_precision"] == "fp4"
    assert "FP4" in res["precision_note"]
    d = T.deployment("megatron_235b", world=8, parallel=(1, 8, 8, 1), batch=1, context=1_000_000)
    plan = build_plan(d)
    want = {(s.name, e.name, t) for s in plan.sections for e in s.entries if hasattr(e, "kernel")
            for t in range(len(plan.tracks))}
    assert {(k["section"], k["name"], k["track"]) for k in table["kernels"]} == want
    for k in table["kernels"]:
        assert k["measured_s"] > 0 and k["roofline_s"] > 0
        assert k["measured_over_roofline"] == pytest.approx(k["measured_s"] / k["roofline_s"])
        assert k["scaled"] == (k["alloc_bytes"] > 96 * 2 ** 20)
    fd = next(k for k in table["kernels"] if k["kernel"] == "flash_decode")
    assert fd["scaled"] and fd["scaled_symbol"] == "S" and 0 < fd["scale_factor"] < 1
    p1, p2 = fd["scaled_points"]
    assert p1["S"] == 2 * p2["S"] and p1["hbm_bytes"] > p2["hbm_bytes"]
    if fd["extrapolation"].startswith("linear"):  # the line through both points, evaluated at the full bytes
        slope = (p1["measured_s"] - p2["measured_s"]) / (p1["hbm_bytes"] - p2["hbm_bytes"])
        assert fd["measured_s"] == pytest.approx(p1["measured_s"] + slope * (fd["hbm_bytes"] - p1["hbm_bytes"]))
    assert fd["measured_s"] > p1["measured_s"]
    assert res["scaled_kernels"] == ["L0.flash_decode"]
    assert res["measured_compute_s"] == pytest.approx(sum(k["measured_s"] * k["repeat"] for k in table["kernels"]
                                                          if k["track"] == 0))


def test_decode_uses_the_table_and_reports_measured_over_roofline(calibrated, pipeline):
    out, res, table = calibrated
    proc, dec = pipeline("decode", *DEP, "compute=measured", f"calibration={out / 'calibration.json'}")
    assert proc.returncode == 0, proc.stderr
    r = json.loads((dec / "results.json").read_text())
    assert r["compute"] == "measured" and r["calibration"]["device"].startswith("cpu")
    ratios = r["measured_over_roofline"]
    by_name = {f"{k['section']}/{k['name']}/{k['kernel']}": k for k in table["kernels"] if k["track"] == 0}
    assert set(ratios) == set(by_name)
    for name, ratio in ratios.items():
        assert ratio == pytest.approx(by_name[name]["measured_s"] / by_name[name]["roofline_s"])
    # compute time of the step is exactly the measured kernels x repetitions (one track here)
    b = r["breakdown_s"]
    assert b["attention"] + b["ffn"] + b["other"] == pytest.approx(res["measured_compute_s"], rel=1e-9)
    roof = pipeline("decode", *DEP)
    assert roof[0].returncode == 0
    rr = json.loads((roof[1] / "results.json").read_text())
    assert rr["compute"] == "roofline" and "measured_over_roofline" not in rr
    assert r["roofline_decode_step_s"] == pytest.approx(rr["decode_step_s"])
    assert b["communication"] == pytest.approx(rr["breakdown_s"]["communication"])


@pytest.mark.parametrize("overrides,match", [
    (("compute=measured",), "compute=measured needs calibration="),
    (("compute=measured", "calibration={table}", "batch=2"), "measured for another deployment: batch=1"),
    (("compute=measured", "calibration=/nonexistent.json"), "does not exist"),
])
def test_decode_measured_bad_input(calibrated, pipeline, overrides, match):
    out, _, _ = calibrated
    proc, dec = pipeline("decode", *DEP, *(o.format(table=out / "calibration.json") for o in overrides))
    assert proc.returncode == 2 and match in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (dec / "results.json").exists()


def test_calibrate_bad_input(pipeline):
    for overrides, match in ((("dtype=fp4",), "dtype='fp4' is not supported"),
                             (("device=tpu",), "device='tpu'"),
                             (("max_kernel_bytes=1KiB", *DEP), "raise max_kernel_bytes")):
        proc, out = pipeline("calibrate", *overrides)
        assert proc.returncode == 2, proc.stderr
        assert match in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert not (out / "results.json").exists()


@pytest.mark.slow  # compiles an MLA graph and imports torch: ~15 s on a shared 2-core machine
def test_mla_kernels_run_in_torch_at_their_per_rank_shapes():
    """matmul (SwiGLU, per-head absorb / v_up, plain GEMMs), latent_attention and latent_combine:
    every kernel of a small DeepSeek-like MLA model runs on CPU torch and yields its planned shapes."""
    import torch
    import yaml

    from gxnet.deployment import Deployment
    from gxnet.models import model_from_dict
    from gxnet.parallel import ParallelSpec
    from gxnet.testing import CONF, accelerator
    from pipelines.hardware.calibration_shapes import kernel_shapes
    from pipelines.hardware.kernels import build_kernel

    d = yaml.safe_load((CONF / "model" / "deepseek_v3.yaml").read_text())
    d.update(name="mla_small", layers=2, first_k_dense=1, hidden=256, q_heads=8, q_lora_rank=64, kv_lora_rank=32,
             qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, ffn_width=512, experts=8, expert_width=64,
             top_k=2, vocab=512, mtp_layers=0)
    small = model_from_dict(d)
    dep = Deployment(model=small, accelerator=accelerator("h200"), world=2,
                     parallel=ParallelSpec(scheme="tp_ep", tp=2, ep=1), batch=2, context_tokens=16)
    ops = set()
    for ks in kernel_shapes(dep, 0):
        fn, env = build_kernel(torch, ks, torch.float32, torch.device("cpu"))
        fn()
        for op in ks.ops:
            ops.add(op.op)
            for out in op.outputs:
                if out.name in env:
                    assert tuple(env[out.name].shape) == tuple(out.shape), (op.node, out.name)
    assert {"matmul", "latent_attention", "latent_combine", "kv_append"} <= ops


GPT_OSS = ("model=gpt_oss_20b", "world=16", "parallel=tp_ep", "parallel.tp=4", "parallel.ep=4", "context=1K")


def test_layers_of_two_kinds_keep_their_own_entries_and_the_decode_reads_them(pipeline):
    """GPT-OSS interleaves sliding-window and full attention: the second layer kind's kernels of
    the same shapes as the first's share one measurement, yet each keeps its own entry (name,
    section, repeat), so ``compute=measured`` finds every kernel of the plan."""
    from gxnet import testing as T
    from gxnet.deployment import Deployment
    from gxnet.parallel import ParallelSpec
    from gxnet.plan import ComputeEntry, build_plan

    proc, cal = pipeline("calibrate", *GPT_OSS, "warmup=1", "repeats=3", "max_kernel_bytes=1GiB")
    assert proc.returncode == 0, proc.stderr
    table = json.loads((cal / "calibration.json").read_text())
    d = Deployment(model=T.model("gpt_oss_20b"), accelerator=T.accelerator("rx00"), world=16,
                   parallel=ParallelSpec(scheme="tp_ep", tp=4, ep=4), batch=1, context_tokens=1024)
    plan = build_plan(d)
    want = {(s.name, e.name, t): s.repeat for s in plan.sections for e in s.entries if isinstance(e, ComputeEntry)
            for t in range(len(plan.tracks))}
    assert {(k["section"], k["name"], k["track"]): k["repeat"] for k in table["kernels"]} == want
    by_key = {(k["name"], k["track"]): k for k in table["kernels"]}
    reused = [k for k in table["kernels"] if k.get("reused_from")]
    assert any(k["name"].startswith("L1.") for k in reused), "the full-attention layer reuses the sliding one's"
    for k in reused:
        first = by_key[k["reused_from"]["name"], k["reused_from"]["track"]]
        assert first.get("reused_from") is None and first["kernel"] == k["kernel"]
        assert k["measured_s"] == first["measured_s"] and (k["name"], k["track"]) != (first["name"], first["track"])
    res = json.loads((cal / "results.json").read_text())
    assert [k.get("reused_from") for k in res["kernels"]] == [k.get("reused_from") for k in table["kernels"]]
    proc, dec = pipeline("decode", *GPT_OSS, "compute=measured", f"calibration={cal / 'calibration.json'}")
    assert proc.returncode == 0, proc.stderr
    b = json.loads((dec / "results.json").read_text())["breakdown_s"]
    assert b["attention"] + b["ffn"] + b["other"] == pytest.approx(res["measured_compute_s"], rel=1e-9)
