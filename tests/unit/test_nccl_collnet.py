"""CollNet / SHARP in the NCCL-like model (fabrics/network/nccl/collnet.py): NCCL's enable rules,
its latency formulas, the bytes each level carries, the choice on a 2-node H100 cluster, forced
choices and the one-line refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collectives.errors import SpecError
from fabrics.gpu_cluster import GpuFabricOptions
from fabrics.network.nccl import collnet, cost, tuner
from fabrics.network.nccl.collnet import Sharp
from fabrics.network.nccl.cost import Links, Placement
from fabrics.network.protocol import CollectiveCall
from fabrics.network.registry import build_network_model
from fabrics.nvswitch import NvSwitchDomain
from fabrics.spec import ClusterSpec, ScaleOutSpec
from pipelines.nccl_params import collnet_spec
from pipelines.nccl_params import default_mapping, nccl_spec

SPEC = nccl_spec(default_mapping())
HOPPER = SPEC.generation_for("h100")
PARAMS = collnet.params_for(SPEC.collnet, "hopper_hgx")
MiB, GiB = 2**20, 2**30
US = 1e-6


def gpu_cluster(nodes=2, gpus=8, sharp=True, nvls=True, nics=8, name="h100", max_gpus=8):
    node = NvSwitchDomain(name=name, gpus=gpus, max_gpus=max_gpus, nvlink_ports=18, nvlink_rate_Bps=25e9, nvls=nvls)
    out = ScaleOutSpec(topology="rail_optimized", nics_per_node=nics, nic_rate_Bps=50e9) if nodes > 1 else None
    return ClusterSpec(name="gpu_cluster", nodes=nodes, node=node, scale_out=out,
                       options=GpuFabricOptions(hop_latency_s=0.81e-6, sharp=sharp))


def price(model, collective, size, groups=None):
    n = model.system.nodes * model.system.gpus_per_node
    return model.price(CollectiveCall(call_id=0, region="r", axis="a", collective=collective,
                                      groups=groups or (tuple(range(n)),), payload_bytes=size))


def links(inter_Bps=400e9, intra_Bps=450e9, nvls=True):
    return Links(intra_transport="nvlink", intra_Bps=intra_Bps, inter_Bps=inter_Bps, gpu_nic_Bps=inter_Bps / 8,
                 nvls=nvls)


def test_nccl_constants_are_parsed_for_both_nvlink_generations():
    assert {p.generation for p in SPEC.collnet} == {"hopper_hgx", "blackwell_nvl72"}
    assert PARAMS.intra_hop_latency_s == {"collnet_direct": pytest.approx(3.7 * US), "collnet_chain": pytest.approx(2.8 * US)}
    assert PARAMS.net_hop_latency_s["collnet_direct"] == pytest.approx(31 * US)


def test_latency_is_nccls_formula():
    sharp = Sharp(params=PARAMS, nics_per_node=8)
    place = Placement(ranks=16, nodes=2, per_node=8)
    direct = collnet.collnet_direct(sharp, HOPPER, links(), place, "allreduce", "simple", 8)
    chain = collnet.collnet_chain(sharp, HOPPER, links(), place, "allreduce", "simple", 8)
    # tuning.cc: 2 (min(1, p-1) 3.7 + (p-1) 0.4) + 31 and 2 (p-1) 2.8 + 30
    assert direct.latency_s == pytest.approx((2 * (3.7 + 7 * 0.4) + 31) * US)
    assert chain.latency_s == pytest.approx((2 * 7 * 2.8 + 30) * US)
    one = collnet.collnet_direct(sharp, HOPPER, links(), Placement(ranks=2, nodes=2, per_node=1), "allreduce",
                                 "simple", 8)
    assert one.latency_s == pytest.approx(HOPPER.hop("net", "tree", "simple"))  # ppn = 1: the tree's NET latency


def test_the_network_carries_the_buffer_once_not_twice():
    """A node's NICs carry S per direction through reducing switches; a ring 2(n-1)/n S."""
    sharp = Sharp(params=PARAMS, nics_per_node=8)
    place = Placement(ranks=16, nodes=2, per_node=8)
    fast_nvlink = links(intra_Bps=1e15)
    direct = collnet.collnet_direct(sharp, HOPPER, fast_nvlink, place, "allreduce", "simple", GiB)
    ring = cost.ring(HOPPER, fast_nvlink, place, "allreduce", "simple", GiB)
    assert direct.bandwidth_s == pytest.approx(GiB / (400e9 * PARAMS.net_efficiency["collnet_direct"]))
    assert ring.bandwidth_s == pytest.approx(2 * 15 / 16 * GiB / (400e9 * HOPPER.eff("net", "ring", "simple")))
    # on NVLink a head carries (p + h - 2) S / h: 14/8 S with one NIC per GPU, (p - 1) S with one NIC
    slow_nics = links(inter_Bps=1e15)
    eight = collnet.collnet_direct(sharp, HOPPER, slow_nics, place, "allreduce", "simple", GiB)
    one = collnet.collnet_direct(Sharp(params=PARAMS, nics_per_node=1), HOPPER, slow_nics, place, "allreduce",
                                 "simple", GiB)
    assert one.bandwidth_s / eight.bandwidth_s == pytest.approx(7 / (14 / 8))


def test_enable_rules():
    sharp = Sharp(params=PARAMS, nics_per_node=8)
    two = Placement(ranks=16, nodes=2, per_node=8)
    assert collnet.rows(sharp, links(), two, "allreduce") == ["collnet_direct", "collnet_chain", "nvls"]
    assert collnet.rows(None, links(), two, "allreduce") == []  # no SHARP switches
    assert collnet.rows(sharp, links(), Placement(ranks=8, nodes=1, per_node=8), "allreduce") == []
    assert collnet.rows(sharp, links(nvls=False), two, "allreduce") == ["collnet_direct", "collnet_chain"]
    # all-gather / reduce-scatter: one NIC per GPU (localRanks <= nHeads), collnet_direct and NVLS only
    assert collnet.rows(sharp, links(), two, "allgather") == ["collnet_direct", "nvls"]
    assert collnet.rows(Sharp(params=PARAMS, nics_per_node=4), links(), two, "reducescatter") == []
    assert collnet.rows(sharp, links(), two, "alltoall") == []
    # more than 8 GPUs per node (NVL72 domains): no CollNet, NVLS across nodes still
    big = Placement(ranks=144, nodes=2, per_node=72)
    assert collnet.rows(Sharp(params=PARAMS, nics_per_node=72), links(), big, "allreduce") == ["nvls"]
    pairs = tuner.candidates(HOPPER, links(), two, "allreduce", sharp)
    assert [a for a, _ in pairs] == sorted([a for a, _ in pairs], key=collnet.NCCL_ORDER.index)


SIZES = [32 * 1024 * 4**k for k in range(10)]  # 32 KiB .. 8 GiB


def test_choice_on_two_h100_nodes_with_sharp_is_never_slower_and_wins_large():
    with_sharp = build_network_model("nccl", gpu_cluster(), SPEC, 16)
    without = build_network_model("nccl", gpu_cluster(sharp=False), SPEC, 16)
    table = {s: (price(with_sharp, "allreduce", s), price(without, "allreduce", s)) for s in SIZES}
    for s, (a, b) in table.items():
        assert a.time_s <= b.time_s  # more candidates, least time
    assert table[32 * 1024][0].algorithm in ("tree", "ring")  # CollNet's 44 us of latency loses small
    assert table[8 * GiB][0].schedule == "nvls/simple"  # NVLS over SHARP: one network hop, no tree
    assert table[8 * GiB][1].schedule == "nvls_tree/simple"
    assert any(a.algorithm.startswith("collnet") for a, _ in table.values())  # a window where CollNet wins


def test_forced_collnet_runs_and_reports_its_schedule():
    m = build_network_model("nccl", gpu_cluster(), replace(SPEC, algorithm="collnet_chain"), 16)
    assert price(m, "allreduce", GiB).schedule == "collnet_chain/simple"
    assert price(m, "allgather", GiB).algorithm != "collnet_chain"  # not a CollNet Chain collective: auto
    m = build_network_model("nccl", gpu_cluster(), replace(SPEC, algorithm="collnet_direct"), 16)
    assert price(m, "reducescatter", GiB).schedule == "collnet_direct/simple"


@pytest.mark.parametrize("cluster, words", [
    (gpu_cluster(sharp=False), "has none; set fabric.sharp=true"),
    (gpu_cluster(nodes=1), "runs between nodes"),
])
def test_forced_collnet_the_fabric_lacks_is_one_line(cluster, words):
    for algorithm in ("collnet_direct", "collnet_chain"):
        with pytest.raises(SpecError) as e:
            build_network_model("nccl", cluster, replace(SPEC, algorithm=algorithm), 16 if cluster.nodes == 2 else 8)
        assert words in str(e.value) and "\n" not in str(e.value)


def test_forced_collnet_without_constants_is_one_line():
    with pytest.raises(SpecError, match="has no CollNet constants"):
        build_network_model("nccl", gpu_cluster(), replace(SPEC, algorithm="collnet_direct", collnet=()), 16)


@pytest.mark.parametrize("change, words", [
    (lambda d: d["hopper_hgx"].pop("net_hop_latency"), "net_hop_latency is missing"),
    (lambda d: d["hopper_hgx"].update(colour="red"), "colour is not a known key"),
    (lambda d: d["hopper_hgx"]["nvlink_factor"].update(collnet_direct=1.5), "must be a number in [0.0, 1.0]"),
    (lambda d: d.update(ampere={}), "names no generation"),
])
def test_bad_collnet_block_is_one_line(change, words):
    block = default_mapping()["collnet"]
    change(block)
    with pytest.raises(SpecError) as e:
        collnet_spec(block, SPEC.generations)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_fabric_sharp_option():
    from pipelines.network import gpu_cluster_spec
    from gxnet.accelerators import accelerator_from_dict
    import yaml
    from pathlib import Path

    acc = accelerator_from_dict(yaml.safe_load((Path(__file__).resolve().parents[2] / "conf" / "accelerator"
                                                / "h100.yaml").read_text()))
    assert gpu_cluster_spec({"name": "gpu_cluster", "nodes": 2, "sharp": True}, acc, 16).options.sharp is True
    assert gpu_cluster_spec({"name": "gpu_cluster", "nodes": 2}, acc, 16).options.sharp is False
    with pytest.raises(SpecError, match="fabric.sharp='yes' must be true or false"):
        gpu_cluster_spec({"name": "gpu_cluster", "nodes": 2, "sharp": "yes"}, acc, 16)
    with pytest.raises(SpecError, match="fabric.sharp belongs to fabric=gpu_cluster"):
        gpu_cluster_spec({"name": "nvswitch", "sharp": True}, acc, 8)


def test_forced_collnet_without_sharp_is_exit_2_through_the_cli(pipeline):
    proc, out = pipeline("collective", "accelerator=h100", "fabric=gpu_cluster", "fabric.nodes=2", "network=nccl",
                         "network.algorithm=collnet_direct", "size=1MiB", "tracking=off")
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "fabric.sharp=true" in lines[0]
    assert not (out / "results.json").exists()
