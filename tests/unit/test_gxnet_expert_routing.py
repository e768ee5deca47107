"""Expert routing models: per-layer dispatch demand and expert load (gxnet/expert_routing.py)."""

import json
import math

import numpy as np
import pytest

from collectives.errors import SpecError
from gxnet.expert_routing import (
    RoutingProblem,
    RoutingSpec,
    _draw,
    expert_hosts,
    layer_routing,
    trace_ids,
    route_layers,
    routing_from_dict,
    token_sources,
)

PROB = RoutingProblem(tokens=2048, experts=128, top_k=8, layers=3, ep=16, token_bytes=4096, model_name="qwen3")


def _one_line(exc):
    assert "\n" not in str(exc.value)


def test_uniform_is_the_expectation_and_identical_per_layer():
    layers = route_layers(RoutingSpec(), PROB)
    assert len(layers) == 3 and layers[0] is layers[2]
    d = layers[0].dispatch_bytes
    # P(token hits a rank with 8 of 128 experts) = 1 - C(120, 8) / C(128, 8)
    p = 1 - math.comb(120, 8) / math.comb(128, 8)
    assert d[0, 1] == round(128 * p * 4096)
    assert np.all(np.diag(d) == 0) and np.array_equal(d, d.T)
    assert layers[0].rows_per_rank.sum() == 2048 * 8


def test_rows_are_conserved_and_dedup_never_sends_more():
    for model in ("topk", "zipf"):
        spec = RoutingSpec(model=model, seed=3)
        lr = layer_routing(spec, PROB, 0, expert_hosts(128, 16))
        assert lr.rows_per_rank.sum() == PROB.tokens * PROB.top_k  # dropless
        nodedup = layer_routing(RoutingSpec(model=model, seed=3, dedup=False), PROB, 0, expert_hosts(128, 16))
        assert (lr.dispatch_bytes <= nodedup.dispatch_bytes).all()
        assert lr.dispatch_bytes.sum() < nodedup.dispatch_bytes.sum()


def test_draw_gives_distinct_experts_and_is_seeded():
    ids = _draw(RoutingSpec(model="topk", seed=1), PROB, 0)
    assert ids.shape == (2048, 8)
    srt = np.sort(ids, axis=1)
    assert (srt[:, 1:] != srt[:, :-1]).all() and ids.min() >= 0 and ids.max() < 128
    assert np.array_equal(ids, _draw(RoutingSpec(model="topk", seed=1), PROB, 0))
    assert not np.array_equal(ids, _draw(RoutingSpec(model="topk", seed=2), PROB, 0))
    assert not np.array_equal(ids, _draw(RoutingSpec(model="topk", seed=1), PROB, 1))  # each layer its own draw


def test_topk_matches_uniform_expectation_on_average():
    big = RoutingProblem(tokens=16384, experts=128, top_k=8, layers=1, ep=16, token_bytes=1)
    hosts = expert_hosts(128, 16)
    sampled = layer_routing(RoutingSpec(model="topk"), big, 0, hosts).dispatch_bytes
    expected = layer_routing(RoutingSpec(), big, 0, hosts).dispatch_bytes
    assert sampled.sum() == pytest.approx(expected.sum(), rel=0.01)
    assert sampled.sum(axis=0).max() / sampled.sum(axis=0).mean() < 1.05


def test_global_zipf_makes_hot_receivers_per_source_zipf_does_not():
    hosts = expert_hosts(128, 16)
    uni = layer_routing(RoutingSpec(model="topk"), PROB, 0, hosts)
    glob = layer_routing(RoutingSpec(model="zipf", zipf_s=0.8), PROB, 0, hosts)
    per = layer_routing(RoutingSpec(model="zipf", zipf_s=0.8, zipf_scope="per_source"), PROB, 0, hosts)
    col = lambda lr: lr.dispatch_bytes.sum(axis=0).max() / lr.dispatch_bytes.sum(axis=0).mean()
    assert col(glob) > 1.4 > col(per) and col(per) > col(uni)
    assert glob.rows_per_rank.max() > 1.5 * uni.rows_per_rank.max()
    s0 = layer_routing(RoutingSpec(model="zipf", zipf_s=0.0), PROB, 0, hosts)
    assert col(s0) < 1.1  # s = 0 is uniform top-k


def test_capacity_padding_pads_every_pair_and_counts_overflow():
    hosts = expert_hosts(128, 16)
    gamma = 1.25
    lr = layer_routing(RoutingSpec(model="zipf", capacity_factor=gamma), PROB, 0, hosts)
    c = math.ceil(gamma * 8 * (2048 / 16) / 128)  # Eq. 5 with m = tokens per source rank
    off = lr.dispatch_bytes[~np.eye(16, dtype=bool)]
    assert (off == c * 8 * 4096).all()  # C rows x 8 experts of the destination x bytes per row
    assert lr.dropped_rows > 0 and lr.rows_per_rank.sum() == 2048 * 8 - lr.dropped_rows
    uni = layer_routing(RoutingSpec(capacity_factor=1.0), PROB, 0, hosts)
    assert uni.dropped_rows == 0


def test_bucketing_rounds_pairs_up_to_levels():
    hosts = expert_hosts(128, 16)
    raw = layer_routing(RoutingSpec(model="topk", seed=5), PROB, 0, hosts).dispatch_bytes
    lr = layer_routing(RoutingSpec(model="topk", seed=5, bucket_levels=(1.0, 1.5, 2.0)), PROB, 0, hosts)
    mean = layer_routing(RoutingSpec(), PROB, 0, hosts).dispatch_bytes / 4096
    off = ~np.eye(16, dtype=bool)
    assert (lr.dispatch_bytes[off] >= raw[off]).all()
    levels = np.ceil(np.array([1.0, 1.5, 2.0])[None, :] * mean[off][:, None]) * 4096  # whole units per level
    assert (lr.dispatch_bytes[off][:, None] == levels).any(axis=1).all()


def test_placements():
    assert np.bincount(expert_hosts(128, 16)).tolist() == [8] * 16
    with pytest.raises(SpecError, match="EP=24 must divide the 128 experts") as e:
        expert_hosts(128, 24, "strict", "qwen3_30b_a3b")
    _one_line(e)
    counts = np.bincount(expert_hosts(128, 24, "uneven"))
    assert sorted(set(counts.tolist())) == [5, 6] and counts.sum() == 128
    with pytest.raises(SpecError, match="exceeds"):
        expert_hosts(8, 16, "uneven")


def test_token_sources_are_balanced_blocks():
    src = token_sources(8192, 24)
    counts = np.bincount(src)
    assert counts.max() - counts.min() <= 1 and (np.diff(src) >= 0).all()


def test_trace_roundtrip_and_bad_traces(tmp_path):
    prob = RoutingProblem(tokens=32, experts=16, top_k=2, layers=2, ep=4, token_bytes=10)
    ids = np.stack([np.arange(32) % 16, (np.arange(32) + 1) % 16], axis=1)
    good = tmp_path / "t.npy"
    np.save(good, ids)
    lr = route_layers(RoutingSpec(model="trace", trace_path=str(good), trace=np.load(good)), prob)[0]
    hosts = expert_hosts(16, 4)
    src = token_sources(32, 4)
    manual = np.zeros((4, 4), dtype=np.int64)
    for t in range(32):
        for j in set(hosts[ids[t]].tolist()):
            manual[src[t], j] += 10
    np.fill_diagonal(manual, 0)
    assert np.array_equal(lr.dispatch_bytes, manual)

    (tmp_path / "shape.json").write_text(json.dumps(ids[:, :1].tolist()))
    with pytest.raises(SpecError, match="shape") as e:
        trace_ids(json.loads((tmp_path / "shape.json").read_text()), prob, "shape.json")
    _one_line(e)
    bad = ids.copy()
    bad[3, 1] = 16
    np.save(tmp_path / "range.npy", bad)
    with pytest.raises(SpecError, match="out of range") as e:
        trace_ids(np.load(tmp_path / "range.npy"), prob, "range.npy")
    _one_line(e)
    dup = ids.copy()
    dup[0] = [4, 4]
    np.save(tmp_path / "dup.npy", dup)
    with pytest.raises(SpecError, match="same expert twice"):
        trace_ids(np.load(tmp_path / "dup.npy"), prob, "dup.npy")
    with pytest.raises(SpecError, match="no trace ids"):
        route_layers(RoutingSpec(model="trace", trace_path=str(tmp_path / "missing.npy")), prob)


@pytest.mark.parametrize("bad, match", [
    ({"model": "hot"}, "routing.model"),
    ({"zipf_s": -1}, "zipf_s"),
    ({"capacity_factor": 0.5}, "capacity_factor"),
    ({"bucket_levels": [2, 1]}, "bucket_levels"),
    ({"model": "trace"}, "trace_path"),
    ({"placement": "random"}, "placement"),
    ({"zipf_scope": "local"}, "zipf_scope"),
    ({"colour": 1}, "unknown option"),
])
def test_bad_routing_specs(bad, match):
    with pytest.raises(SpecError, match=match) as e:
        routing_from_dict(bad)
    _one_line(e)
