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
