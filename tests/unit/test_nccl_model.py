"""fabrics.network.nccl: cost functions, the tuner, forced choices and the NetworkModel protocol."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from collectives.errors import SpecError
from fabrics.network.nccl import cost
from fabrics.network.nccl.cost import Links, Placement
from fabrics.network.protocol import CollectiveCall, DemandEntry
from fabrics.network.registry import build_network_model, check_family, supporting
from fabrics.nvswitch import NvSwitchDomain
from fabrics.spec import ClusterSpec, ScaleOutSpec
from pipelines.nccl_params import default_mapping, nccl_spec

SPEC = nccl_spec(default_mapping())
HOPPER = SPEC.generation_for("h200")
MiB, GiB = 2**20, 2**30


def h200_node(gpus=8, nvls=True):
    return NvSwitchDomain(name="h200", gpus=gpus, max_gpus=8, nvlink_ports=18, nvlink_rate_Bps=25e9, nvls=nvls)


def cluster(nodes=1, gpus=8, nvls=True):
    out = ScaleOutSpec(topology="rail_optimized", nics_per_node=8, nic_rate_Bps=50e9) if nodes > 1 else None
    return ClusterSpec(name="nvswitch" if nodes == 1 else "gpu_cluster", nodes=nodes, node=h200_node(gpus, nvls),
                       scale_out=out)


def price(model, collective, groups, size, demand=None):
    return model.price(CollectiveCall(call_id=0, region="r", axis="a", collective=collective, groups=groups,
                                      payload_bytes=size, demand=demand))


def test_registered_for_the_gpu_family_only():
    assert "nccl" in supporting("gpu")
    with pytest.raises(SpecError, match="network=nccl does not run on fabric=single_eps"):
        check_family("nccl", "single_eps", "scaleup")


def test_protocol_round_trip_with_schedule_parts_and_choices():
    m = build_network_model("nccl", cluster(), SPEC, 8)
    demand = (DemandEntry(region="attention", axis="tp", collective="allreduce", groups=1, ranks=8, calls_per_step=2,
                          payload_bytes=64 * 1024),)
    m.prepare(demand, 8)
    m.register(CollectiveCall(call_id=7, region="attention", axis="tp", collective="allreduce",
                              groups=(tuple(range(8)),), payload_bytes=64 * 1024), 1e-3)
    (done,) = m.advance()
    assert done.call_id == 7 and done.start_s == 1e-3 and done.schedule == "ring/ll"
    assert done.end_s - done.start_s == pytest.approx(done.parts["latency_s"] + done.parts["bandwidth_s"])
    assert m.advance() == []
    report = m.report()
    assert report.model == "nccl" and report.details["choices"] == {"attention/tp/allreduce": "ring/ll"}
    with pytest.raises(RuntimeError, match="outside the declared demand"):
        m.register(CollectiveCall(call_id=8, region="ffn", axis="tp", collective="allreduce",
                                  groups=(tuple(range(8)),), payload_bytes=1), 0.0)


def test_small_messages_use_few_channels_so_ring_ll_is_flat_up_to_the_plateau():
    # enqueue.cc: ring LL needs 512 threads x 8 B x 8 ranks = 32 KiB per channel
    assert cost.channels_used(HOPPER, "ring", "ll", 8, 32 * 1024) == 1
    assert cost.channels_used(HOPPER, "ring", "ll", 8, 256 * 1024) == 8
    assert cost.channels_used(HOPPER, "ring", "ll", 8, 64 * MiB) == HOPPER.channel_count("ring")
    assert cost.channels_used(HOPPER, "nvls", "simple", 8, 1024) == HOPPER.channel_count("nvls")
    links = Links(intra_transport="nvlink", intra_Bps=450e9, inter_Bps=0, gpu_nic_Bps=0, nvls=True)
    place = Placement(8, 1, 8)
    t = [cost.ring(HOPPER, links, place, "allreduce", "ll", s).time_s for s in (32 * 1024, 256 * 1024)]
    assert t[1] == pytest.approx(t[0], rel=1e-9)


def test_ring_busbw_does_not_depend_on_gpu_count_but_nvls_grows_with_it():
    links = Links(intra_transport="nvlink", intra_Bps=450e9, inter_Bps=0, gpu_nic_Bps=0, nvls=True)

    def busbw(algo, n):
        est = cost.COLLECTIVE_ALGORITHMS[algo](HOPPER, links, Placement(n, 1, n), "allreduce", "simple", 8 * GiB)
        return 8 * GiB * 2 * (n - 1) / n / est.time_s

    ring = [busbw("ring", n) for n in (2, 4, 8)]
    assert max(ring) / min(ring) < 1.001
    nvls = [busbw("nvls", n) for n in (4, 6, 8)]
    assert nvls[0] < nvls[1] < nvls[2]


def test_nvls_bytes_pipeline_and_fill():
    # S(n+1)/n pipelined plus (n-1)/n of the first fill; 2S while the message is within the fill
    assert cost.nvls_bytes("allreduce", 8, 1000, 4000) == pytest.approx(2000)
    assert cost.nvls_bytes("allreduce", 8, 8000, 4000) == pytest.approx(8000 * 9 / 8 + 4000 * 7 / 8)
    assert cost.nvls_bytes("allgather", 8, 8000, 4000) == pytest.approx(7000)


def test_forced_algorithm_and_protocol():
    m = build_network_model("nccl", cluster(), replace(SPEC, algorithm="nvls"), 8)
    assert price(m, "allreduce", (tuple(range(8)),), 1024).schedule == "nvls/simple"
    assert price(m, "alltoall", (tuple(range(8)),), 1024).algorithm == "p2p"  # not a tuner collective
    m = build_network_model("nccl", cluster(), replace(SPEC, protocol="ll128"), 8)
    assert price(m, "allreduce", (tuple(range(8)),), GiB).schedule == "ring/ll128"
    m = build_network_model("nccl", cluster(nodes=2), replace(SPEC, algorithm="tree"), 16)
    assert price(m, "allreduce", (tuple(range(16)),), MiB).algorithm == "tree"
    # the forced algorithm applies where it can run; a group inside one node takes the auto choice
    assert price(m, "allreduce", (tuple(range(8)), tuple(range(8, 16))), MiB).algorithm != "tree"


@pytest.mark.parametrize("algorithm, nodes, nvls, words", [
    ("nvls", 1, False, "needs NVLink SHARP"),
    ("nvls_tree", 2, False, "needs NVLink SHARP"),
    ("tree", 1, True, "runs between nodes but fabric=nvswitch is one node"),
    ("nvls_tree", 1, True, "runs between nodes"),
    ("collnet_direct", 2, True, "CollNet/SHARP"),
])
def test_forced_algorithm_the_fabric_lacks_is_one_line(algorithm, nodes, nvls, words):
    with pytest.raises(SpecError) as e:
        build_network_model("nccl", cluster(nodes=nodes, nvls=nvls), replace(SPEC, algorithm=algorithm), 8 * nodes)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_multi_node_groups_share_the_nics():
    m = build_network_model("nccl", cluster(nodes=2), SPEC, 16)
    one = price(m, "allreduce", ((0, 8),), GiB)  # one group alone: all 8 NICs of its nodes
    eight = price(m, "allreduce", tuple((i, i + 8) for i in range(8)), GiB)  # 8 DP groups: one NIC each
    assert eight.bandwidth_s == pytest.approx(8 * one.bandwidth_s, rel=1e-9)
    assert eight.bandwidth_s == pytest.approx(GiB / 50e9, rel=1e-9)  # 2(n-1)/n S over one 400 Gb/s NIC
    assert price(m, "allreduce", (tuple(range(16)),), GiB).algorithm in ("nvls_tree", "ring", "tree")


def test_alltoallv_prices_the_busiest_rank_of_its_demand_matrix():
    m = build_network_model("nccl", cluster(nodes=2), SPEC, 16)
    world = (tuple(range(16)),)
    demand = np.zeros((16, 16))
    demand[0, 1] = 100 * MiB  # intra-node
    demand[3, 12] = 40 * MiB  # inter-node
    est = price(m, "alltoallv", world, 100 * MiB, demand)
    g = HOPPER
    intra = 100 * MiB / (450e9 * g.eff("nvlink", "p2p", "simple"))
    inter = 40 * MiB / (400e9 / 8 * g.eff("net", "p2p", "simple"))  # 8 active GPUs share a node's NICs
    assert est.bandwidth_s == pytest.approx(max(intra, inter))
    uniform = price(m, "alltoall", world, 16 * MiB)
    assert uniform.bandwidth_s == pytest.approx(8 * MiB / (50e9 * g.eff("net", "p2p", "simple")))


def test_single_rank_and_empty_calls_cost_nothing():
    m = build_network_model("nccl", cluster(gpus=1), SPEC, 1)
    assert price(m, "allreduce", ((0,),), MiB).time_s == 0.0


def _at(version: str):
    return nccl_spec({**default_mapping(), "nccl_version": version}).generation_for("h200")


def test_nvls_channel_partition_per_release():
    """2.18.5 loops channel by channel (a 64 KiB message on channel 0; 16 KiB chunks below 8 MiB on 8 GPUs);
    2.20.5 splits over 16 channels in 4 KiB steps, 2.30.7 in 16 KiB cells (enqueue.cc per release)."""
    old, mid, new = _at("2.18.5"), _at("2.20.5"), _at("2.30.7")
    assert cost.nvls_chunk(old, 8, 16, 1 * MiB) == 16384 and cost.nvls_chunk(old, 8, 16, 1 * GiB) == 131072
    assert cost.nvls_channel_bytes(old, 8, 16, 64 * 1024) == 64 * 1024
    assert cost.nvls_channel_bytes(old, 8, 16, 1 * MiB) == 128 * 1024  # 8 channels x 8 heads x 16 KiB
    assert cost.nvls_channel_bytes(mid, 8, 16, 64 * 1024) == 4096
    assert cost.nvls_channel_bytes(new, 8, 16, 64 * 1024) == 16384
    assert cost.nvls_channel_bytes(new, 8, 16, 1000) == 1000
    for g in (old, mid, new):  # large messages: every release fills all channels alike
        assert cost.nvls_channel_bytes(g, 8, 16, 8 * GiB) == 8 * GiB // 16


def test_nccl_version_default_and_bad_value():
    assert SPEC.nccl_version == "2.30.7" and HOPPER.version.name == "2.30.7"
    with pytest.raises(SpecError, match="nccl_version='2.99.0'"):
        nccl_spec({**default_mapping(), "nccl_version": "2.99.0"})
    with pytest.raises(SpecError, match="nvls_partition"):
        nccl_spec({**default_mapping(), "versions": {"2.30.7": {"nvls_partition": "spiral"}}})
