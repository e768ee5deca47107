from collections import Counter

import sympy as sp

from gxnet.graph import build_model_graph
from gxnet.ir import B, S, Tq
from gxnet.testing import model


def test_megatron_repeats_one_layer():
    g = build_model_graph(model("megatron_5t"))
    names = [s.name for s in g.sections]
    assert names == ["embedding", "decoder_block", "lm_head"]
    block = g.sections[1]
    assert block.repeat == 128
    ops = Counter(n.op for n in block.nodes)
    assert ops == Counter({"rmsnorm": 2, "qkv_proj": 1, "kv_append": 1, "flash_attention": 1, "attn_combine": 1,
                           "o_proj": 1, "add": 2, "router": 1, "expert_swiglu": 1, "expert_combine": 1})
    assert g.tensors["L0.kv"].shape == (B, S, 128, 2, 64)
    assert g.tensors["L0.w_o"].shape == (16384, 8192)  # 16,384 -> 8192 (Figure 26a)
    assert g.tensors["L0.y"].shape == (B * Tq * 8, 8192)


def test_gpt_oss_repeats_a_sliding_full_pair_with_sinks_and_bias():
    g = build_model_graph(model("gpt_oss_5p3_like"))
    block = g.sections[1]
    assert block.repeat == 48
    kinds = [n.attrs["layer_kind"] for n in block.nodes if n.op == "flash_attention"]
    assert kinds == ["sliding", "full"]
    assert g.tensors["L0.kv"].shape[1] == sp.Min(S, 128) and g.tensors["L1.kv"].shape[1] == S
    fd = next(n for n in block.nodes if n.op == "flash_attention")
    assert "L0.sinks" in fd.inputs and fd.attrs["gqa_ratio"] == 8
    assert "L0.b_qkv" in next(n for n in block.nodes if n.op == "qkv_proj").inputs


def test_graph_is_immutable_and_cached():
    m = model("megatron_235b")
    assert build_model_graph(m) is build_model_graph(m)
    g = build_model_graph(m)
    try:
        g.tensors["x"] = None  # type: ignore[index]
    except TypeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("graph tensors must be read-only")
