"""Section 6 / B.5 of paper 003: attention and compute time per decode step, within 10 %."""

from dataclasses import replace

import pytest

from gxnet.deployment import Deployment
from gxnet.executor import execute
from gxnet.parallel import ParallelSpec
from gxnet.plan import build_plan
from gxnet.testing import FixedLatencyNetwork, accelerator, deployment, model


def _breakdown(d):
    return execute(build_plan(d), FixedLatencyNetwork(), trace=False).breakdown_s


@pytest.mark.parametrize("batch, paper_ms", [(1, 0.53), (16, 8.3)])
def test_megatron_5t_attention(batch, paper_ms):
    d = deployment(parallel=(4, 128, 16, 32), batch=batch, context=5_000_000)
    assert _breakdown(d)["attention"] * 1e3 == pytest.approx(paper_ms, rel=0.10)


def test_literal_per_kernel_efficiency_misses_batch_1():
    # The deviation documented in README.md: choosing eta_D on one layer's 80 MB (0.75)
    # instead of the step's 10 GB (0.9) overshoots the paper's 0.53 ms by about 20 %.
    acc = replace(accelerator("rx00"), efficiency_basis="kernel")
    d = Deployment(model=model("megatron_5t"), accelerator=acc, world=512,
                   parallel=ParallelSpec(kvp=4, tpa=128, ep=16, tpe=32), batch=1, context_tokens=5_000_000)
    assert _breakdown(d)["attention"] * 1e3 > 0.53 * 1.15


def test_megatron_5t_compute_per_step_at_batch_16():
    # B.5: "attention over the 5M-token context dominates the 8.8 ms of computation per step"
    b = _breakdown(deployment(parallel=(4, 128, 16, 32), batch=16, context=5_000_000))
    compute = b["attention"] + b["ffn"] + b["fixed"] + b["other"]
    assert compute * 1e3 == pytest.approx(8.8, rel=0.10)


def test_gpt_oss_5p3_attention_and_its_context_dependence():
    # Section 6.2: 0.41 ms at batch 16, 5M; D.1: context-dependent part 0.39 ms (32K -> 5M),
    # 0.77 ms without the sliding window, 3.1 ms with Megatron's 128 KV heads.
    def att(m, ctx):
        return _breakdown(Deployment(model=m, accelerator=accelerator("rx00"), world=512,
                                     parallel=ParallelSpec(kvp=32, tpa=16, ep=64, tpe=8), batch=16,
                                     context_tokens=ctx))["attention"] * 1e3

    m = model("gpt_oss_5p3_like")
    assert att(m, 5_000_000) == pytest.approx(0.41, rel=0.10)
    assert att(m, 5_000_000) - att(m, 32_000) == pytest.approx(0.39, rel=0.10)
    full = replace(m, attention_pattern=("full",))
    assert att(full, 5_000_000) - att(full, 32_000) == pytest.approx(0.77, rel=0.10)
    wide = replace(m, kv_heads=128)
    assert att(wide, 5_000_000) - att(wide, 32_000) == pytest.approx(3.1, rel=0.10)
