"""GPU kernel model (gxnet.kernels): fitted efficiency, the kernel floor, engine profiles."""

from __future__ import annotations

from functools import lru_cache

import pytest
import yaml

from collectives.errors import SpecError
from gxnet.executor import execute
from gxnet.kernels import KernelModel, engine_from_dict, kernel_model, mma_precision
from gxnet.plan import BREAKDOWN_KEYS, ComputeEntry, build_plan
from gxnet.precision import precision_from_dict
from gxnet.testing import CONF, FixedLatencyNetwork, accelerator, deployment, model

ENGINES = ("cuda_graph", "eager", "persistent")


@lru_cache(maxsize=None)
def engine(name: str, accel: str = "h200"):
    return engine_from_dict(yaml.safe_load((CONF / "engine" / f"{name}.yaml").read_text()), accelerator(accel))


def measured_hbm_Bps(accel: str) -> float:
    """The highest HBM bandwidth the calibration set measured on ``accel``."""
    rows = yaml.safe_load((CONF / "measurements" / "kernels.yaml").read_text())["hbm_stream"]
    return max(r["rate_Bps"] for r in rows if r["accelerator"] == accel)


def single_gpu(engine_name: str | None, batch: int = 8, context: int = 8192):
    from gxnet.deployment import Deployment
    from gxnet.parallel import ParallelSpec

    return Deployment(model=model("llama3_1_8b"), accelerator=accelerator("h200"), world=1,
                      parallel=ParallelSpec(scheme="tp_ep", tp=1, ep=1), batch=batch, context_tokens=context,
                      precision=precision_from_dict({"name": "bf16"}),
                      engine=None if engine_name is None else engine(engine_name))


def test_achieved_bandwidth_saturates_with_size_and_the_floor_is_the_latency():
    km = KernelModel(latency_s=3e-6, hbm_Bps=4e12, flops_per_s=8e14, precision="bf16")
    assert km.kernel_s(0.0, 0.0) == 3e-6
    sizes = [1e4, 1e6, 1e8, 1e10]
    achieved = [s / km.kernel_s(0.0, s) for s in sizes]
    assert achieved == sorted(achieved) and achieved[-1] < 4e12 and achieved[-1] > 0.99 * 4e12
    assert km.kernel_s(1e12, 1e3) == pytest.approx(3e-6 + 1e12 / 8e14)  # compute-bound: FLOPs over the rate


def test_the_precision_preset_decides_the_peak():
    h100, b200 = accelerator("h100"), accelerator("b200")
    assert mma_precision(precision_from_dict({"name": "bf16"}), h100) == "bf16"
    assert mma_precision(precision_from_dict({"name": "fp8"}), h100) == "fp8"
    assert mma_precision(precision_from_dict({"name": "mxfp4"}), h100) == "fp8"  # no FP4 tensor cores on Hopper
    assert mma_precision(precision_from_dict({"name": "nvfp4"}), b200) == "fp4"
    fp8 = kernel_model(h100, precision_from_dict({"name": "fp8"}))
    assert fp8.flops_per_s == pytest.approx(h100.gemm_efficiency_fp8 * h100.peak_flops_fp8)
    assert fp8.hbm_Bps == pytest.approx(h100.hbm_efficiency * h100.hbm_bandwidth_Bps)


def test_engines_take_their_gaps_from_the_accelerator():
    acc = accelerator("h200")
    assert engine("cuda_graph").kernel_gap_s == acc.in_graph_launch_s and engine("cuda_graph").fusion == "kernel"
    assert engine("eager").kernel_gap_s == acc.kernel_launch_s and engine("eager").fusion == "op"
    assert engine("persistent").window_launch_s == acc.in_graph_launch_s and engine("persistent").kernel_gap_s == 0
    with pytest.raises(SpecError, match="fusion='fused'"):
        engine_from_dict({"name": "x", "fusion": "fused"}, acc)
    with pytest.raises(SpecError, match="kernel_gap='soon'"):
        engine_from_dict({"name": "x", "kernel_gap": "soon"}, acc)


def test_projected_hardware_has_no_kernel_model_and_keeps_the_roofline():
    with pytest.raises(SpecError, match="accelerator rx00 has no fitted kernel model.*engine=roofline"):
        deployment(engine=engine("cuda_graph"))


@pytest.mark.parametrize("engine_name", ENGINES)
def test_single_gpu_decode_is_bounded_by_bytes_read_over_measured_hbm_bandwidth(engine_name):
    d = single_gpu(engine_name)
    plan = build_plan(d)
    step = execute(plan, FixedLatencyNetwork())
    assert step.collective_calls == 0
    m = d.model
    # what one step must read: every weight but the embedding table (B rows of it are gathered), and
    # the whole KV cache; bf16 = 2 bytes per element
    embedding_bytes = m.vocab * m.hidden * 2
    read = plan.weights_bytes_per_rank - embedding_bytes + plan.kv_bytes_per_rank
    assert read > 0.9 * plan.memory_bytes_per_rank
    assert step.decode_step_s >= read / measured_hbm_Bps("h200")


def test_the_kernel_floor_is_in_the_breakdown_once_per_launched_kernel():
    d = single_gpu("cuda_graph")
    plan = build_plan(d)
    step = execute(plan, FixedLatencyNetwork(), trace=False)
    kernels = sum(s.repeat * sum(isinstance(e, ComputeEntry) for e in s.entries) for s in plan.sections)
    per_kernel = d.accelerator.kernel_latency_s + d.accelerator.in_graph_launch_s
    assert step.breakdown_s["kernel_floor"] == pytest.approx(kernels * per_kernel)
    assert step.breakdown_s["fixed"] == 0.0  # the graph's gaps are per kernel, not per window
    assert step.decode_step_s == pytest.approx(sum(step.breakdown_s.values()))
    eager = execute(build_plan(single_gpu("eager")), FixedLatencyNetwork(), trace=False)
    persistent = execute(build_plan(single_gpu("persistent")), FixedLatencyNetwork(), trace=False)
    # eager launches every operator, a persistent kernel once per window (here: the whole step)
    assert eager.breakdown_s["kernel_floor"] > step.breakdown_s["kernel_floor"] > persistent.breakdown_s["kernel_floor"]
    assert persistent.breakdown_s["kernel_floor"] == pytest.approx(d.accelerator.kernel_latency_s)
    for name in ("attention", "ffn", "other"):  # the same work, launched differently
        assert eager.breakdown_s[name] == pytest.approx(step.breakdown_s[name])


def test_without_an_engine_the_plan_is_the_papers_roofline():
    d = single_gpu(None)
    plan = build_plan(d)
    assert plan.breakdown_keys == BREAKDOWN_KEYS and plan.window_launch_s is None
    step = execute(plan, FixedLatencyNetwork(), trace=False)
    assert "kernel_floor" not in step.breakdown_s
    block = next(s for s in plan.sections if s.repeat > 1)
    for e in block.entries:  # B.3 with the step basis: eta chosen on the size summed over the layers
        assert e.floor_s == ()
        assert e.durations_s[0] == pytest.approx(d.accelerator.kernel_time_s(
            e.flops[0], e.hbm_bytes[0], e.flops[0] * block.repeat, e.hbm_bytes[0] * block.repeat), rel=1e-12)
