import pytest

from gxnet.memory import max_batch, memory_breakdown_bytes, memory_per_rank_bytes
from gxnet.testing import deployment


def test_kv_share_per_rank_for_megatron_5t():
    d = deployment(batch=1)
    w, kv = memory_breakdown_bytes(d.model, d.accelerator, d.parallel, d.precision, 1, 5_000_000)
    # 1 MiB per context token over 512 ranks (one KV head per rank, a quarter of the context)
    assert kv == 5_000_000 * 2**20 // 512
    # experts dominate the weights: 128 layers x 256 experts x 3 x 8192 x 6144 params / 512 ranks, FP4
    experts = 128 * 256 * 3 * 8192 * 6144 // 512 // 2
    assert experts < w < experts * 1.15
    assert memory_per_rank_bytes(d) == w + kv


def test_kv_scales_with_batch_and_context_weights_do_not():
    d = deployment(batch=1)
    w1, kv1 = memory_breakdown_bytes(d.model, d.accelerator, d.parallel, d.precision, 1, 1_000_000)
    w2, kv2 = memory_breakdown_bytes(d.model, d.accelerator, d.parallel, d.precision, 4, 2_000_000)
    assert w1 == w2 and kv2 == 8 * kv1


def test_sliding_layers_hold_only_their_window():
    d = deployment("gpt_oss_5p3_like", parallel=(32, 16, 64, 8), batch=1)
    _, kv = memory_breakdown_bytes(d.model, d.accelerator, d.parallel, d.precision, 1, 2_000_000)
    per_token_per_layer = 1 * 2 * 64 // 2  # one KV head per rank (16 / TPA 16), K and V, FP4
    full = 48 * (2_000_000 // 32) * per_token_per_layer  # 48 full layers, context over KVP 32
    sliding = 48 * (128 // 32) * per_token_per_layer  # 48 sliding layers hold their 128-token window
    assert kv == full + sliding


def test_max_batch_is_a_power_of_two_that_fits():
    d = deployment(batch=1)
    b = max_batch(d)
    assert b == 16
    assert memory_breakdown_bytes(d.model, d.accelerator, d.parallel, d.precision, b, 5_000_000)[1] < 288e9


def _deepseek(parallel, precision="fp8"):
    from gxnet.precision import PrecisionSpec
    from gxnet.testing import accelerator, model

    return model("deepseek_v3"), accelerator("h200"), parallel, PrecisionSpec.preset(precision)


def test_mla_latent_cache_is_replicated_by_tp_and_split_by_kvp():
    from gxnet.parallel import ParallelSpec

    per_user = 32768 * 61 * 576 * 2  # latent + rope key, BF16, every layer
    _, kv_tp = memory_breakdown_bytes(*_deepseek(ParallelSpec(scheme="tp_ep", tp=8, ep=1)), 2, 32768)
    assert kv_tp == 2 * per_user  # TP over heads: every rank holds the whole latent cache
    _, kv_kvp = memory_breakdown_bytes(*_deepseek(ParallelSpec(kvp=8, tpa=1, ep=8, tpe=1)), 2, 32768)
    assert kv_kvp == 2 * per_user // 8  # KVP splits it by sequence


def test_largest_batch_is_exact():
    from gxnet.memory import largest_batch
    from gxnet.parallel import ParallelSpec

    m, a, p, prec = _deepseek(ParallelSpec(scheme="tp_ep", tp=8, ep=1))
    n = largest_batch(m, a, p, prec, 32768)
    assert sum(memory_breakdown_bytes(m, a, p, prec, n, 32768)) <= a.hbm_bytes
    assert sum(memory_breakdown_bytes(m, a, p, prec, n + 1, 32768)) > a.hbm_bytes
    assert 16 <= n < 32
