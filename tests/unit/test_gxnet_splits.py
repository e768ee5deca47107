import pytest

from collectives.errors import SpecError
from gxnet.models import model_from_dict
from gxnet.splits import helix_splits

TINY = dict(name="tiny", layers=2, hidden=8, q_heads=8, kv_heads=4, head_dim=2, experts=8,
            expert_width=12, top_k=2, vocab=10)


def test_enumeration_obeys_b6():
    m = model_from_dict(TINY)
    splits = helix_splits(m, 16)
    # TPA in {1,2,4} (divides 4 KV heads); EP in {1,2,4,8} with TPE = 16/EP dividing 12 -> TPE <= 4
    assert {(s.tpa, s.ep) for s in splits} == {(t, e) for t in (1, 2, 4) for e in (4, 8)}
    for s in splits:
        assert s.kvp * s.tpa == s.ep * s.tpe == 16


def test_world_must_be_power_of_two():
    with pytest.raises(SpecError, match="world=12"):
        helix_splits(model_from_dict(TINY), 12)
