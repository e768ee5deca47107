"""The model zoo (conf/model/, facts from each model's config.json) against published figures.

Totals within 1 % of figures published to three digits, within 5 % of rounded ones; KV cache per
token exact from the formula; DeepSeek-V3 FP8 on 8 x H200 at 32K context: TP8 fits batch 16 and
refuses 32; every zoo model runs a decode step on 8 GPUs with a TP or EP split, with the graph
invariants checked after every pass.
"""

import pytest

from collectives.errors import SpecError
from gxnet.deployment import Deployment
from gxnet.executor import execute
from gxnet.graph import build_model_graph
from gxnet.ir import EP, KVP, TPA, TPE, B, R_rows, S
from gxnet.moe import moe_load
from gxnet.parallel import ParallelSpec
from gxnet.passes import PassManager, standard_pipeline
from gxnet.plan import build_plan
from gxnet.precision import PrecisionSpec
from gxnet.testing import FixedLatencyNetwork, accelerator, model

ZOO = ["llama3_1_8b", "llama3_1_70b", "llama3_1_405b", "mixtral_8x7b", "mixtral_8x22b", "qwen3_30b_a3b",
       "qwen3_235b_a22b", "deepseek_v3", "deepseek_r1", "kimi_k2", "gpt_oss_20b", "gpt_oss_120b"]

# name: (published total, tolerance, published active or None, tolerance). Model cards:
# Meta Llama 3.1 (8.03 B, 70.6 B, 405.9 B as listed on the HF pages), Mistral (46.7 B / 12.9 B,
# 141 B), Qwen3 (30.5 B / 3.3 B, 235 B / 22 B), DeepSeek-V3/R1 (671 B without MTP / 37 B),
# Moonshot Kimi K2 (1 T / 32 B), OpenAI GPT-OSS (116.8 B, 20.9 B).
PUBLISHED = {
    "llama3_1_8b": (8.03e9, 0.01, None, 0),
    "llama3_1_70b": (70.6e9, 0.01, None, 0),
    "llama3_1_405b": (405.9e9, 0.01, None, 0),
    "mixtral_8x7b": (46.7e9, 0.01, 12.9e9, 0.01),
    "mixtral_8x22b": (141e9, 0.05, 39e9, 0.05),
    "qwen3_30b_a3b": (30.5e9, 0.01, 3.3e9, 0.05),
    "qwen3_235b_a22b": (235e9, 0.05, 22e9, 0.05),
    "deepseek_v3": (671e9, 0.05, 37e9, 0.05),
    "deepseek_r1": (671e9, 0.05, 37e9, 0.05),
    "kimi_k2": (1e12, 0.05, 32e9, 0.05),
    "gpt_oss_120b": (116.8e9, 0.01, None, 0),
    "gpt_oss_20b": (20.9e9, 0.01, None, 0),
}
# Published "active" figures that leave out the input embedding (a table lookup, not a matmul):
# OpenAI's 5.1 B / 3.6 B for GPT-OSS, DeepSeek's 36.6 B ("including 0.9 B for the output head",
# README_WEIGHTS.md of DeepSeek-V3).
ACTIVE_WITHOUT_EMBEDDING = {"gpt_oss_120b": 5.13e9, "gpt_oss_20b": 3.61e9, "deepseek_v3": 36.6e9}


@pytest.mark.parametrize("name", ZOO)
def test_totals_and_active_match_the_published_figures(name):
    m = model(name)
    total, tol, active, atol = PUBLISHED[name]
    assert abs(m.total_params() - total) <= tol * total, m.total_params()
    if active is not None:
        assert abs(m.active_params() - active) <= atol * active, m.active_params()


@pytest.mark.parametrize("name", sorted(ACTIVE_WITHOUT_EMBEDDING))
def test_active_without_the_input_embedding(name):
    m = model(name)
    figure = ACTIVE_WITHOUT_EMBEDDING[name]
    assert abs(m.active_params() - m.vocab * m.hidden - figure) <= 0.01 * figure


def test_deepseek_mtp_module_counts_apart():
    # README_WEIGHTS.md: the MTP module has 11.5 B unique parameters (embedding and head shared)
    m = model("deepseek_v3")
    assert m.mtp_params() == pytest.approx(11.5e9, rel=0.02)
    assert model("llama3_1_8b").mtp_params() == 0


# KV elements per token per layer from config.json: 2 x num_key_value_heads x head_dim (GQA),
# kv_lora_rank + qk_rope_head_dim (MLA); full-attention layers only (GPT-OSS: every other one).
KV_ELEMENTS = {
    "llama3_1_8b": 32 * 2 * 8 * 128, "llama3_1_70b": 80 * 2 * 8 * 128, "llama3_1_405b": 126 * 2 * 8 * 128,
    "mixtral_8x7b": 32 * 2 * 8 * 128, "mixtral_8x22b": 56 * 2 * 8 * 128, "qwen3_30b_a3b": 48 * 2 * 4 * 128,
    "qwen3_235b_a22b": 94 * 2 * 4 * 128, "deepseek_v3": 61 * (512 + 64), "deepseek_r1": 61 * (512 + 64),
    "kimi_k2": 61 * (512 + 64), "gpt_oss_20b": 12 * 2 * 8 * 64, "gpt_oss_120b": 18 * 2 * 8 * 64,
}


@pytest.mark.parametrize("name", ZOO)
def test_kv_cache_per_token_exact(name):
    assert model(name).kv_bytes_per_token(kv_bits=16) == KV_ELEMENTS[name] * 2


def test_issue_examples():
    assert model("deepseek_v3").kv_bytes_per_token(kv_bits=16) == 576 * 61 * 2 == 70_272
    assert model("llama3_1_8b").kv_bytes_per_token(kv_bits=16) == 131_072


def _deepseek_tp8(batch: int) -> Deployment:
    return Deployment(model=model("deepseek_v3"), accelerator=accelerator("h200"), world=8,
                      parallel=ParallelSpec(scheme="tp_ep", tp=8, ep=1), batch=batch,
                      context_tokens=32 * 1024, precision=PrecisionSpec.preset("fp8"))


def test_deepseek_v3_fp8_tp8_fits_batch_16_and_refuses_32():
    d = _deepseek_tp8(16)
    plan = build_plan(d)
    # TP over heads replicates the latent cache: every rank holds all 16 users' 32K tokens
    assert plan.kv_bytes_per_rank == 16 * 32 * 1024 * 70_272
    assert plan.memory_bytes_per_rank <= 141e9
    with pytest.raises(SpecError) as e:
        _deepseek_tp8(32)
    msg = str(e.value)
    assert msg.startswith("batch=32 needs") and "141.0 GB HBM of h200" in msg and msg.endswith("is 16")


def _split(m) -> ParallelSpec:
    return ParallelSpec(scheme="tp_ep", tp=1, ep=8) if m.is_moe else ParallelSpec(scheme="tp_ep", tp=8, ep=1)


# DeepSeek-R1 has DeepSeek-V3's architecture: counted above, not compiled twice
ARCHITECTURES = [n for n in ZOO if n != "deepseek_r1"]
# one of each architecture family in the default suite, the rest with -m slow
REPRESENTATIVE = {"llama3_1_8b", "mixtral_8x7b", "qwen3_30b_a3b", "deepseek_v3", "gpt_oss_20b"}


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_every_zoo_model_decodes_on_8_gpus(name):
    m = model(name)
    d = Deployment(model=m, accelerator=accelerator("h200"), world=8, parallel=_split(m), batch=4,
                   context_tokens=8192, precision=PrecisionSpec.preset("fp8"))
    r = execute(build_plan(d), FixedLatencyNetwork(latency_s=5e-6))
    assert r.decode_step_s > 0 and r.memory_bytes_per_rank <= 141e9
    assert sum(r.breakdown_s.values()) == pytest.approx(r.decode_step_s, rel=1e-9)


@pytest.mark.parametrize("name", [n if n in REPRESENTATIVE else pytest.param(n, marks=pytest.mark.slow)
                                  for n in ARCHITECTURES])
@pytest.mark.parametrize("scheme", ["tp_ep", "helix"])
def test_invariants_hold_after_every_pass(name, scheme):
    m = model(name)
    if scheme == "helix":  # attention KVP 2 x TPA (4, or 2 for MLA's latent), FFN EP x TPE
        tpa = 2 if m.is_mla else 4
        p = ParallelSpec(kvp=8 // tpa, tpa=tpa, ep=8 if m.is_moe else 1, tpe=1 if m.is_moe else 8)
    else:
        p = _split(m)
    load = moe_load(4, m.top_k, m.experts, p.ep)
    binds = {KVP: p.kvp, TPA: p.tpa, EP: p.ep, TPE: p.tpe, B: 4, S: 4096, R_rows: load.busiest_rows}
    pm = PassManager(standard_pipeline(p.scheme, PrecisionSpec.preset("fp8"), accelerator("h200")),
                     check_invariants=True, bindings=binds)
    g = pm.run(build_model_graph(m))  # raises PassError naming the pass on any violation
    assert len(pm.history) == 8 and g.collectives()


def test_deepseek_v3_dp_attention_8_ep_8_fits_batch_64():
    d = Deployment(model=model("deepseek_v3"), accelerator=accelerator("h200"), world=8,
                   parallel=ParallelSpec(scheme="dp_attention", dpa=8, ep=8), batch=64,
                   context_tokens=32 * 1024, precision=PrecisionSpec.preset("fp8"))
    plan = build_plan(d)
    # each attention group holds only its own 64 / 8 users' latent cache
    assert plan.kv_bytes_per_rank == 8 * 32 * 1024 * 70_272
    assert plan.memory_bytes_per_rank <= 141e9
    rows = {(r.region, r.axis, r.collective): r for r in plan.demand}
    # the attention output of every group is gathered before the FFN: B x hidden x BF16
    assert rows[("attention", "dpa", "allgather")].payload_bytes == 64 * 7168 * 2
    assert rows[("attention", "dpa", "allgather")].calls_per_step == 61


@pytest.mark.parametrize("name", ["deepseek_v3", "llama3_1_8b", "gpt_oss_20b"])
@pytest.mark.parametrize("dpa, tpa, ep", [(8, 1, 8), (4, 2, 8), (2, 4, 2)])
def test_dp_attention_invariants_hold_after_every_pass(name, dpa, tpa, ep):
    m = model(name)
    p = ParallelSpec(scheme="dp_attention", dpa=dpa, tpa=tpa, ep=ep if m.is_moe else 1)
    load = moe_load(16, m.top_k, m.experts, p.ep)
    binds = {KVP: p.kvp, TPA: p.tpa, EP: p.ep, TPE: p.tpe, B: 16, S: 4096, R_rows: load.busiest_rows}
    pm = PassManager(standard_pipeline(p.scheme, PrecisionSpec.preset("fp8"), accelerator("h200")),
                     check_invariants=True, bindings=binds)
    g = pm.run(build_model_graph(m))
    assert any(n.attrs["axis"] == "dpa" and n.op == "allgather" for _, n in g.collectives())
