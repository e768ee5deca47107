"""fabrics/gpu_cluster.py (the ideal model on GPU fabrics) and its parser in pipelines/network.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from collectives.errors import SpecError
from fabrics.gpu_cluster import (
    GpuClusterAnalytical,
    GpuFabricOptions,
    group_shape,
    hierarchical_time_s,
    nic_params,
)
from fabrics.network.analytical import SingleLevelParams, native_time_s
from fabrics.network.protocol import CollectiveCall, DemandEntry
from gxnet.accelerators import accelerator_from_dict
from pipelines.network import build_network, check_network_supported, cluster_spec, network_name

CONF = Path(__file__).resolve().parents[2] / "conf"


def accel(name: str, **over):
    return accelerator_from_dict({**yaml.safe_load((CONF / "accelerator" / f"{name}.yaml").read_text()), **over})


def fabric(name: str, **over) -> dict:
    return {"fabric": {**yaml.safe_load((CONF / "fabric" / f"{name}.yaml").read_text()), **over},
            "network": {"name": "analytical"}}


def one_call(model, collective: str, groups, sigma: int) -> float:
    demand = (DemandEntry(region="r", axis="a", collective=collective, groups=len(groups), ranks=len(groups[0]),
                          calls_per_step=1, payload_bytes=sigma),)
    model.prepare(demand, sum(len(g) for g in groups))
    model.register(CollectiveCall(call_id=0, region="r", axis="a", collective=collective, groups=groups,
                                  payload_bytes=sigma), 0.0)
    (done,) = model.advance()
    return done.end_s - done.start_s


def test_nvswitch_domain_takes_links_and_rates_from_the_accelerator():
    c = cluster_spec(fabric("nvswitch"), accel("h100"), 8)
    assert c.family == "gpu" and c.nodes == 1 and c.scale_out is None
    assert (c.node.gpus, c.node.nvlink_ports, c.node.nvlink_rate_Bps, c.node.nvls) == (8, 18, 25e9, True)
    gb = cluster_spec(fabric("nvswitch"), accel("gb300"), 72)
    assert gb.node.nvlink_bandwidth_Bps == 18 * 50e9 and gb.node.gpus_per_tray == 4
    # a faster NVLink on the accelerator is what the fabric uses (no fabric-level default rate)
    fast = cluster_spec(fabric("nvswitch"), accel("h100", nvlink_rate_Bps=50e9), 8)
    slow_t = one_call(build_network(fabric("nvswitch"), accel("h100"), 8), "allreduce", (tuple(range(8)),), 1 << 30)
    fast_t = one_call(build_network(fabric("nvswitch"), accel("h100", nvlink_rate_Bps=50e9), 8), "allreduce",
                      (tuple(range(8)),), 1 << 30)
    assert fast.node.nvlink_rate_Bps == 50e9 and fast_t == pytest.approx(slow_t / 2, rel=1e-3)


def test_one_domain_is_the_single_level_fabric_of_eq1():
    model = build_network(fabric("nvswitch"), accel("h200"), 8)
    assert isinstance(model, GpuClusterAnalytical)
    params = SingleLevelParams(hop_latency_s=0.81e-6, link_rate_Bps=25e9, ports=18)
    for collective in ("allreduce", "allgather", "reducescatter", "alltoall"):
        for sigma in (4096, 1 << 20, 1 << 30):
            assert one_call(model, collective, (tuple(range(8)),), sigma) == native_time_s(params, collective, 8, sigma)[0]


def test_gpu_cluster_shape_and_nic_share():
    c = cluster_spec(fabric("gpu_cluster"), accel("h100"), 16)
    assert c.nodes == 2 and c.node.gpus == 8 and c.accelerators == 16
    so = c.scale_out
    assert (so.topology, so.nics_per_node, so.nic_rate_Bps, so.nodes_per_leaf) == ("rail_optimized", 8, 50e9, 32)
    opts = c.options
    assert (opts.hop_latency_s, opts.nic_latency_s, opts.spine_latency_s) == pytest.approx((0.81e-6, 2e-6, 1e-6))
    p = nic_params(c, opts, (0, 1))
    assert p.link_rate_Bps == 50e9 and p.hop_latency_s == pytest.approx(2e-6)  # one NIC per GPU, one leaf
    wide = cluster_spec(fabric("gpu_cluster", nodes_per_leaf=1, oversubscription=2.0, nics_per_node=4), accel("h100"), 16)
    p = nic_params(wide, wide.options, (0, 1))  # two leaves: via the spines, oversubscribed, half the NICs
    assert p.link_rate_Bps == 4 * 50e9 / 8 / 2 and p.hop_latency_s == pytest.approx(3e-6)
    assert group_shape((0, 1, 8, 9), 8) == ((0, 1), 2)


def test_cross_node_collectives_are_hierarchical_and_slower_than_in_node():
    c = fabric("gpu_cluster")
    model = build_network(c, accel("h100"), 16)
    sigma = 1 << 28
    in_node = one_call(model, "allreduce", (tuple(range(8)), tuple(range(8, 16))), sigma)
    across = one_call(model, "allreduce", (tuple(range(16)),), sigma)
    assert across > in_node
    assert model.report().schedules == {"r/a/allreduce": "hierarchical"}
    intra = SingleLevelParams(hop_latency_s=0.81e-6, link_rate_Bps=25e9, ports=18)
    inter = SingleLevelParams(hop_latency_s=2e-6, link_rate_Bps=50e9, ports=1)
    assert across == pytest.approx(hierarchical_time_s("allreduce", sigma, 8, 2, intra, inter))
    # the NIC level bounds it: a node-level two-shot all-reduce of σ/8 per GPU over its 50 GB/s share
    assert across >= (sigma / 8) / 50e9
    # one GPU per node (a DP group): the NICs alone
    dp = one_call(model, "allreduce", tuple((i, i + 8) for i in range(8)), sigma)
    assert dp == pytest.approx(native_time_s(inter, "allreduce", 2, sigma)[0])


def test_all_to_all_across_nodes_is_nic_bound():
    model = build_network(fabric("gpu_cluster"), accel("h200"), 16)
    sigma = 1 << 30
    t = one_call(model, "alltoall", (tuple(range(16)),), sigma)
    assert t == pytest.approx(2e-6 + (8 / 16) * sigma / 50e9)


def test_single_gpu_domain_and_groups_of_one():
    model = build_network(fabric("nvswitch"), accel("h200"), 1)
    assert model.price_group("allreduce", (0,), 1 << 20) == (0.0, "none")


def test_options_refuse_negative_latencies():
    with pytest.raises(SpecError, match="fabric.hop_latency=-1"):
        GpuFabricOptions(hop_latency_s=-1)


@pytest.mark.parametrize("fab,acc,world,match", [
    (fabric("nvswitch"), "rx00", 8, "fabric=nvswitch needs an NVLink GPU but accelerator=rx00 has no NVLink"),
    (fabric("gpu_cluster"), "rtx5090", 16, "accelerator=rtx5090 has no NVLink"),
    (fabric("nvswitch"), "h200", 16, "16 GPUs do not fit one NVLink domain of h200.*fabric=gpu_cluster .2 NVLink"),
    (fabric("nvswitch", world=4), "h200", 8, "world=8 ranks do not fit fabric.world=4"),
    (fabric("gpu_cluster"), "h200", 12, "world=12 does not fill whole nodes of fabric.gpus_per_node=8"),
    (fabric("gpu_cluster"), "gb300", 64, "world=64 does not fill whole nodes of fabric.gpus_per_node=72"),
    (fabric("gpu_cluster", nodes=1), "h200", 16, "fabric.nodes=1; set fabric.nodes=2"),
    (fabric("gpu_cluster", nics_per_node=0), "h200", 16, "2 NVLink domains need NICs"),
    (fabric("gpu_cluster", gpus_per_node=16), "h100", 16, "16 GPUs do not fit one NVLink domain of h100"),
    (fabric("nvswitch", nics_per_node=8), "h200", 8, "fabric.nics_per_node belongs to fabric=gpu_cluster"),
    (fabric("nvswitch", link_rate="400Gb/s"), "h200", 8, "fabric.link_rate belongs to the other fabric family"),
    (fabric("gpu_cluster", platform="fig1"), "h200", 16, "fabric.platform belongs to the other fabric family"),
    (fabric("gpu_cluster", rails=8), "h200", 16, "unknown fabric key fabric.rails"),
    (fabric("gpu_cluster", oversubscription="lots"), "h200", 16, "fabric.oversubscription='lots' must be a number"),
])
def test_bad_pairings_are_one_line(fab, acc, world, match):
    with pytest.raises(SpecError, match=match) as err:
        cluster_spec(fab, accel(acc), world)
    assert "\n" not in str(err.value)


def test_other_families_refuse_gpu_keys():
    single = {"fabric": {"name": "single_eps", "link_rate": "400Gb/s", "nics_per_node": 8}}
    with pytest.raises(SpecError, match="fabric.nics_per_node belongs to the other fabric family"):
        cluster_spec(single, accel("rx00"), 8)


def test_network_auto_and_family_check_on_gpu_fabrics():
    from fabrics.network.registry import NETWORK_MODELS

    cfg = {**fabric("nvswitch"), "network": {"name": "auto"}}
    assert network_name(cfg) == ("nccl" if "nccl" in NETWORK_MODELS.names() else "analytical")
    check_network_supported({**cfg, "network": {"name": "analytical"}})
    with pytest.raises(SpecError, match="network=simlette does not run on fabric=gpu_cluster .gpu fabrics."):
        check_network_supported({**fabric("gpu_cluster"), "network": {"name": "simlette"}})
