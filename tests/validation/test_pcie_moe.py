"""Skewed expert routing on a PCIe cluster: AlltoAllv completion and scheduler advantage.

Issue #9 acceptance: with Zipf expert popularity s = 0.8 the EP AlltoAllv completion grows
against uniform routing, and VarioPath's advantage over NCCL-like grows with it. Timed with
the flow-level evaluator (planning excluded: data movement only) on 2 R5080-BF3 nodes, EP16,
Qwen3-30B-A3B rows (hidden 2048, BF16), 8,192 prompt tokens, 3 layers.
"""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.network import pcie_cluster
from fabrics.network.pcie import PcieNetwork, PcieNetworkParams
from gxnet.precision import precision_from_dict
from gxnet.ep_phase import EpDeployment, PhaseSpec, build_phase_plan, execute_phase
from gxnet.expert_routing import RoutingProblem, RoutingSpec, expert_hosts, layer_routing
from gxnet.testing import accelerator, model

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = yaml.safe_load((ROOT / "conf" / "platform" / "r5080_bf3.yaml").read_text())
BF16 = precision_from_dict({"name": "bf16", "weights_bits": 16, "kv_bits": 16})
QWEN3 = dataclasses.replace(model("qwen3_30b_a3b"), layers=3)
CLUSTER = pcie_cluster(PLATFORM, 2)


@pytest.fixture(scope="module")
def networks(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("catalog"))
    return {s: PcieNetwork(CLUSTER, PcieNetworkParams(scheduler=s, planning="none", catalog_dir=cache))
            for s in ("nccl", "variopath")}


def alltoallv_per_layer(networks, routing: RoutingSpec) -> dict[str, float]:
    plan = build_phase_plan(EpDeployment(model=QWEN3, accelerator=accelerator("rtx5080"), ep=16,
                                         phase=PhaseSpec(prompt_tokens=8192), routing=routing, precision=BF16))
    out = {}
    for name, net in networks.items():
        s = execute_phase(plan, net, trace=False).summary()
        out[name] = s["alltoallv"]["total_s"] / (2 * len(plan.layers))
    return out


def test_zipf_popularity_grows_alltoallv_completion(networks):
    uni = alltoallv_per_layer(networks, RoutingSpec())
    hot = alltoallv_per_layer(networks, RoutingSpec(model="zipf", zipf_s=0.8))
    for s in ("nccl", "variopath"):
        assert hot[s] > 1.2 * uni[s], (s, uni, hot)
    assert uni["nccl"] > uni["variopath"] and hot["nccl"] > hot["variopath"]


def test_variopath_advantage_grows_with_pairwise_expert_skew(networks):
    # Zipf popularity with one order per source rank spreads the skew over rank pairs (paper
    # 000's skew AlltoAllv): NCCL's fixed pairwise stages wait for their heaviest pair, VarioPath
    # rebinds peers and paths, so its advantage grows with the skew.
    uni = alltoallv_per_layer(networks, RoutingSpec())
    skew = alltoallv_per_layer(networks, RoutingSpec(model="zipf", zipf_s=0.8, zipf_scope="per_source"))
    assert skew["nccl"] > uni["nccl"] and skew["variopath"] > uni["variopath"]
    assert skew["nccl"] / skew["variopath"] > 1.05 * uni["nccl"] / uni["variopath"], (uni, skew)


def test_global_popularity_skew_is_bounded_by_hot_receivers(networks):
    # With one popularity order for all tokens the ranks hosting the hot experts receive most
    # of the traffic; no schedule beats their ingress (one 64 GB/s PCIe attachment each), so
    # the relative advantage shrinks even though every scheduler slows down. VarioPath stays
    # near that bound; NCCL-like does not.
    prob = RoutingProblem(tokens=8192, experts=128, top_k=8, layers=1, ep=16, token_bytes=4096)
    lr = layer_routing(RoutingSpec(model="zipf", zipf_s=0.8), prob, 0, expert_hosts(128, 16))
    d = lr.dispatch_bytes
    bound = max(d.sum(axis=0).max(), d.sum(axis=1).max()) / 64e9
    t = {s: n.plan_alltoallv(n.embed(d, tuple(range(16))))[1].completion_s for s, n in networks.items()}
    assert bound <= t["variopath"] < 1.3 * bound
    assert t["nccl"] > 1.5 * bound


@settings(max_examples=20, deadline=None)
@given(tokens=st.integers(16, 3000), ep_log=st.integers(1, 4), seed=st.integers(0, 1000),
       kind=st.sampled_from(["uniform", "topk", "zipf"]), s=st.floats(0.0, 1.2))
def test_routing_conservation(tokens, ep_log, seed, kind, s):
    ep = 2 ** ep_log
    prob = RoutingProblem(tokens=max(tokens, ep), experts=64, top_k=4, layers=1, ep=ep, token_bytes=1)
    lr = layer_routing(RoutingSpec(model=kind, seed=seed, zipf_s=s), prob, 0, expert_hosts(64, ep))
    d = lr.dispatch_bytes
    assert (d >= 0).all() and not np.diag(d).any()
    # a token reaches at most min(k, N - 1) other ranks, and exactly k rows are computed per token
    assert d.sum() <= prob.tokens * min(4, ep - 1) + ep * ep
    assert lr.rows_per_rank.sum() == pytest.approx(prob.tokens * 4, abs=ep)
    assert (lr.active_experts_per_rank <= 64 // ep).all()


ONE_NODE = pcie_cluster(PLATFORM, 1)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.integers(1_000, 4_000_000), sched=st.sampled_from(["nccl", "variopath", "deepep"]))
def test_alltoallv_on_pcie_respects_the_ingress_egress_bound(tmp_path_factory, seed, scale, sched):
    # every schedule is validity-checked inside plan_alltoallv; its evaluated completion can never
    # beat the busiest GPU's bytes through its 64 GB/s attachment
    rng = np.random.default_rng(seed)
    d = rng.integers(0, scale, size=(8, 8))
    np.fill_diagonal(d, 0)
    net = PcieNetwork(ONE_NODE, PcieNetworkParams(scheduler=sched, planning="none",
                                                  catalog_dir=str(tmp_path_factory.getbasetemp() / "cat1")))
    _, ev = net.plan_alltoallv(net.embed(d, tuple(range(8))))
    bound = max(d.sum(axis=0).max(), d.sum(axis=1).max()) / 64e9
    assert ev.completion_s >= bound * (1 - 1e-9)
