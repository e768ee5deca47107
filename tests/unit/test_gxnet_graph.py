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


def test_deepseek_v3_has_dense_prefix_and_mla_layers():
    m = model("deepseek_v3")
    g = build_model_graph(m)
    assert [(s.name, s.repeat) for s in g.sections] == [
        ("embedding", 1), ("dense_layers", 3), ("decoder_block", 58), ("lm_head", 1)]
    dense, moe = g.sections[1], g.sections[2]
    assert {n.op for n in dense.nodes} >= {"latent_attention", "matmul"} and "router" not in {n.op for n in dense.nodes}
    assert g.tensors["D0.w_dense"].shape == (3, 7168, 18432)
    # the cache holds the latent and the shared rope key: 512 + 64 elements per token
    assert g.tensors["L0.kv"].shape == (B, S, 576)
    assert g.tensors["L0.w_shared"].shape == (3, 7168, 2048) and "L0.b_router" in g.tensors
    assert "L0.s" in next(n for n in moe.nodes if n.op == "expert_combine").inputs


def test_graph_weights_match_the_parameter_count():
    # every matrix and bias of the graph, times its section's repeats, is the model's count minus
    # the RMSNorm gains (not graph tensors)
    for name in ("deepseek_v3", "llama3_1_8b", "gpt_oss_20b", "mixtral_8x7b"):
        m = model(name)
        g = build_model_graph(m)
        n = 0
        for sec in g.sections:
            names = {t for node in sec.nodes for t in node.inputs + node.outputs}
            n += sec.repeat * sum(int(g.tensors[t].numel(local=False)) for t in names
                                  if g.tensors[t].role == "weight")
        assert n == m.total_params() - m.param_groups()["norms"], name
