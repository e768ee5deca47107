"""Per-rank kernel shapes read off GXNET's sharded graph (pipelines.hardware.calibration_shapes):
same entries as the plan, and GXNET's FLOP counts follow from the shapes a torch kernel gets."""

import math

import pytest

from gxnet import testing as T
from gxnet.plan import build_plan
from pipelines.hardware.calibration_shapes import kernel_shapes, n_tracks


@pytest.fixture(scope="module")
def megatron():
    return T.deployment()  # Megatron 5T, 512 RX00, Helix (4,128,16,32), 5M context, batch 1


def _op(ks, op):
    return next(o for o in ks.ops if o.op == op)


def test_kernels_are_the_plans_compute_entries_per_track(megatron):
    plan = build_plan(megatron)
    entries = [(s.name, e.name, e.kernel) for s in plan.sections for e in s.entries if hasattr(e, "kernel")]
    assert n_tracks(megatron) == len(plan.tracks) == 2
    for track in range(2):
        ks = kernel_shapes(megatron, track)
        assert [(k.section, k.name, k.kernel) for k in ks] == entries
        by = {(s.name, e.name): e for s in plan.sections for e in s.entries if hasattr(e, "kernel")}
        for k in ks:
            e = by[(k.section, k.name)]
            assert k.roofline_s == pytest.approx(e.durations_s[track])
            assert k.hbm_bytes == pytest.approx(e.hbm_bytes[track])


def test_per_rank_shapes_of_megatron_helix(megatron):
    ks = {k.kernel: k for k in kernel_shapes(megatron, 0)}
    fd = _op(ks["flash_decode"], "flash_attention")
    q, kv = fd.inputs[0], fd.inputs[1]
    assert q.shape == (1, 1, 2, 64)  # 256 Q heads / TPA 128
    assert kv.shape == (1, 5_000_000 // 4, 1, 2, 64)  # KV shard: context / KVP, 128 KV heads / TPA
    qkv = _op(ks["qkv_proj"], "qkv_proj")
    assert qkv.inputs[1].shape == (8192, 4, 64)  # hidden x (2 Q + 2 x 1 KV heads) x d
    # GXNET's FLOPs are those of the GEMM a torch kernel runs at these shapes
    assert _op(ks["qkv_proj"], "qkv_proj") and ks["qkv_proj"].flops >= 2 * 8192 * 4 * 64
    oproj = _op(ks["o_proj"], "o_proj")
    assert oproj.inputs[1].shape == (16384 // 512, 8192)  # row-parallel over the world
    exp = ks["expert_gemm"]
    assert exp.value("E_loc") == 1 and exp.value("T_exp") == 1
    w = _op(exp, "expert_swiglu").inputs[1].shape
    assert w == (256 // 16, 3, 8192, 6144 // 32)
    assert exp.flops == 2 * 3 * 8192 * (6144 // 32) * exp.value("E_loc") * exp.value("T_exp")
    lm = _op(ks["lm_head"], "lm_head")
    assert lm.inputs[1].shape == (8192, 51200 // 512)
    assert fd.inputs[0].numel * 4 * kv.shape[1] == ks["flash_decode"].flops  # 4 B Hq d ctx


def test_scaling_the_context_changes_only_context_kernels(megatron):
    full = {k.name: k for k in kernel_shapes(megatron, 0)}
    small = {k.name: k for k in kernel_shapes(megatron, 0, S=50_000)}
    for name, k in full.items():
        if k.depends_on("S"):  # flash-decode reads the shard; the KV append writes one token either way
            assert small[name].hbm_bytes < k.hbm_bytes or k.kernel == "qkv_proj"
        else:
            assert small[name].hbm_bytes == k.hbm_bytes and small[name].ops == k.ops
    fd = full["L0.flash_decode"]
    assert fd.depends_on("S") and not full["L0.experts"].depends_on("S") and full["L0.experts"].depends_on("E_loc")
    # KV bytes are linear in the context: the extrapolation basis
    kv = lambda k: math.prod(_op(k, "flash_attention").inputs[1].shape)
    assert kv(fd) == 100 * kv(small["L0.flash_decode"])
    with pytest.raises(ValueError):
        kernel_shapes(megatron, 0, B=2)


def test_lightest_track_has_fewer_active_experts(megatron):
    busy = next(k for k in kernel_shapes(megatron, 0) if k.kernel == "expert_gemm")
    light = next(k for k in kernel_shapes(megatron, 1) if k.kernel == "expert_gemm")
    assert light.value("E_loc") < busy.value("E_loc") and light.flops < busy.flops
