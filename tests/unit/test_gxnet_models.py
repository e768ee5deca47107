import pytest

from collectives.errors import SpecError
from gxnet.models import ModelSpec, model_from_dict

TINY = dict(name="tiny", layers=4, hidden=8, q_heads=4, kv_heads=2, head_dim=2, experts=4,
            expert_width=6, top_k=2, vocab=10)


def test_parameter_counts_follow_the_layer_structure():
    m = model_from_dict(TINY)
    attn = 8 * (4 + 2 * 2) * 2 + 4 * 2 * 8 + 8  # Q/K/V, O, norm gain
    expert = 3 * 8 * 6
    ffn_total = 8 * 4 + 4 * expert + 8
    ffn_active = 8 * 4 + 2 * expert + 8
    emb = 2 * 10 * 8 + 8
    assert m.total_params() == 4 * (attn + ffn_total) + emb
    assert m.active_params() == 4 * (attn + ffn_active) + emb


def test_kv_bytes_count_only_full_layers():
    full = model_from_dict(TINY)
    sw = model_from_dict({**TINY, "attention_pattern": ["sliding", "full"], "window_tokens": 16})
    assert full.kv_bytes_per_token() == 4 * 2 * 2 * 2 // 2
    assert sw.kv_bytes_per_token() == full.kv_bytes_per_token() // 2
    assert sw.layer_kinds() == ("sliding", "full") * 2 and sw.block_repeats == 2


def test_biases_sinks_and_tied_embeddings_change_counts():
    base = model_from_dict(TINY)
    assert model_from_dict({**TINY, "qkv_bias": True}).total_params() == base.total_params() + 4 * (4 + 4) * 2
    assert model_from_dict({**TINY, "attention_sinks": True}).total_params() == base.total_params() + 4 * 4
    assert model_from_dict({**TINY, "tied_embeddings": True}).total_params() == base.total_params() - 80


@pytest.mark.parametrize("patch, words", [
    ({"kv_heads": 3}, ["kv_heads=3", "divide", "q_heads=4"]),
    ({"top_k": 5}, ["top_k=5", "experts=4"]),
    ({"layers": 3, "attention_pattern": ["sliding", "full"], "window_tokens": 8}, ["layers=3", "multiple"]),
    ({"attention_pattern": ["local"]}, ["attention_pattern", "full, sliding"]),
    ({"attention_pattern": ["sliding"]}, ["window_tokens"]),
    ({"hidden": 0}, ["hidden=0", "positive"]),
    ({"hidden": 2.5}, ["hidden=2.5", "integer"]),
    ({"colour": "red"}, ["unknown field", "colour"]),
])
def test_bad_models_are_refused_with_one_line(patch, words):
    with pytest.raises(SpecError) as e:
        model_from_dict({**TINY, **patch})
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_missing_fields_are_named():
    d = dict(TINY)
    del d["vocab"]
    with pytest.raises(SpecError, match="missing field.*vocab"):
        model_from_dict(d)


def test_spec_is_frozen_and_hashable():
    m = model_from_dict(TINY)
    with pytest.raises(AttributeError):
        m.layers = 5  # type: ignore[misc]
    assert hash(m) == hash(model_from_dict(TINY)) and isinstance(m, ModelSpec)


# ---- architectures beyond paper 003 ---------------------------------------------------------
MLA = dict(name="mla", layers=4, hidden=64, q_heads=4, vocab=10, q_lora_rank=16, kv_lora_rank=8,
           qk_nope_head_dim=4, qk_rope_head_dim=2, v_head_dim=3, experts=4, expert_width=6, top_k=2,
           shared_experts=1, first_k_dense=1, ffn_width=12)
DENSE = dict(name="dense", layers=3, hidden=8, q_heads=4, kv_heads=1, head_dim=2, ffn_width=5, vocab=10)


def test_mla_parameters_and_latent_kv_cache():
    m = model_from_dict(MLA)
    q = 64 * 16 + 16 * 4 * (4 + 2)
    kv = 64 * (8 + 2) + 8 * 4 * (4 + 3)
    o = 4 * 3 * 64
    norms = 64 + 8 + 16  # pre-attention, kv latent, q latent
    assert m.attention_params() == q + kv + o + norms
    assert (m.kv_heads, m.head_dim) == (1, 6)  # one latent for all heads; q/k head dim nope + rope
    assert m.kv_elements_per_layer() == 8 + 2
    assert m.kv_bytes_per_token(kv_bits=16) == 4 * 10 * 2


def test_shared_experts_first_k_dense_and_moe_every():
    m = model_from_dict(MLA)
    assert m.ffn_kinds() == ("dense", "moe", "moe", "moe")
    moe = 64 * 4 + 4 * 3 * 64 * 6 + 3 * 64 * 6 + 64  # router, routed, shared, norm
    moe_active = 64 * 4 + 2 * 3 * 64 * 6 + 3 * 64 * 6 + 64
    dense = 3 * 64 * 12 + 64
    emb = 2 * 10 * 64 + 64
    assert m.total_params() == 4 * m.attention_params() + dense + 3 * moe + emb
    assert m.active_params() == 4 * m.attention_params() + dense + 3 * moe_active + emb
    every2 = model_from_dict({**TINY, "moe_every": 2, "ffn_width": 3})
    assert every2.ffn_kinds() == ("dense", "moe", "dense", "moe")
    assert [r for _, r in every2.segments()] == [2]  # one (dense, moe) pair repeated twice


def test_segments_split_the_dense_prefix_from_the_repeated_block():
    m = model_from_dict({**MLA, "layers": 6, "attention_pattern": ["sliding", "full"], "window_tokens": 4,
                         "first_k_dense": 3})
    (pre, r1), (block, r2) = m.segments()
    assert pre == (("sliding", "dense"), ("full", "dense"), ("sliding", "dense")) and r1 == 1
    assert block == (("full", "moe"), ("sliding", "moe"), ("full", "moe")) and r2 == 1
    assert model_from_dict({**MLA, "layers": 9}).segments()[1] == ((("full", "moe"),), 8)


def test_dense_model_has_no_experts():
    m = model_from_dict(DENSE)
    attn = 8 * (4 + 2) * 2 + 4 * 2 * 8 + 8
    assert m.total_params() == m.active_params() == 3 * (attn + 3 * 8 * 5 + 8) + 2 * 10 * 8 + 8
    assert not m.is_moe and m.ffn_kinds() == ("dense",) * 3


def test_mtp_layers_count_apart():
    m = model_from_dict({**MLA, "mtp_layers": 1})
    assert m.total_params() == model_from_dict(MLA).total_params()
    assert m.mtp_params() == m.attention_params() + m.ffn_params(False) + 2 * 64 * 64 + 3 * 64


def test_biases_count():
    base = model_from_dict(TINY)
    assert model_from_dict({**TINY, "o_bias": True}).total_params() == base.total_params() + 4 * 8
    assert model_from_dict({**TINY, "router_bias": True}).total_params() == base.total_params() + 4 * 4


@pytest.mark.parametrize("d, words", [
    ({**DENSE, "top_k": 2}, ["top_k=2", "dense model"]),
    ({k: v for k, v in DENSE.items() if k != "ffn_width"}, ["ffn_width"]),
    ({**MLA, "kv_lora_rank": 64}, ["kv_lora_rank=64", "below hidden=64"]),
    ({**MLA, "q_lora_rank": 100}, ["q_lora_rank=100", "below hidden"]),
    ({**MLA, "v_head_dim": 0}, ["v_head_dim", "MLA"]),
    ({**MLA, "kv_heads": 8}, ["kv_heads=8", "MLA"]),
    ({**TINY, "qk_rope_head_dim": 4}, ["qk_rope_head_dim", "kv_lora_rank"]),
    ({**TINY, "first_k_dense": -1}, ["first_k_dense=-1", "non-negative"]),
    ({**TINY, "first_k_dense": 4, "ffn_width": 3}, ["first_k_dense=4", "no MoE layer"]),
    ({**TINY, "first_k_dense": 1}, ["ffn_width"]),
    ({**TINY, "bf16_weights": ["gate"]}, ["bf16_weights", "gate"]),
    ({**TINY, "experts": 0}, ["dense model"]),
])
def test_bad_architectures_are_refused_with_one_line(d, words):
    with pytest.raises(SpecError) as e:
        model_from_dict(d)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_yaml_round_trip():
    from gxnet.models import model_as_dict

    for d in (TINY, MLA, DENSE):
        m = model_from_dict(d)
        assert model_from_dict(model_as_dict(m)) == m
