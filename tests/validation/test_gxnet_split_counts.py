"""Appendix B.6 (exact): 72 Helix splits for Megatron 5T and 45 for GPT-OSS-5.3-like at N = 512."""

from gxnet.splits import helix_splits
from gxnet.testing import model


def test_split_counts_at_512():
    assert len(helix_splits(model("megatron_5t"), 512)) == 72
    assert len(helix_splits(model("gpt_oss_5p3_like"), 512)) == 45


def test_every_split_is_a_valid_deployment_shape():
    m = model("megatron_5t")
    splits = helix_splits(m, 512)
    assert len(set(splits)) == len(splits)
    for s in splits:
        assert m.kv_heads % s.tpa == 0 and m.experts % s.ep == 0 and m.expert_width % s.tpe == 0
    # the paper's named optima are among them (Section 6.1)
    assert {(s.kvp, s.tpa, s.ep, s.tpe) for s in splits} >= {(4, 128, 16, 32), (4, 128, 8, 64), (4, 128, 64, 8)}
