"""PCIe cluster as a NetworkModel (fabrics/network/pcie.py)."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from collectives.alltoallv.validity import check_schedule
from collectives.errors import SpecError
from fabrics.network.protocol import CollectiveCall, DemandEntry
from fabrics.pcie.evaluator import evaluate
from pipelines.network import pcie_cluster
from fabrics.network.pcie import PcieNetwork, PcieNetworkParams, native_schedule

CONF = Path(__file__).resolve().parents[2] / "conf" / "platform"


def cluster(name="r5080_bf3", nodes=1):
    return pcie_cluster(yaml.safe_load((CONF / f"{name}.yaml").read_text()), nodes)


def net(scheduler="nccl", nodes=1, name="r5080_bf3", **kw):
    return PcieNetwork(cluster(name, nodes), PcieNetworkParams(scheduler=scheduler, **kw))


def row(collective, ranks, payload, axis="ep", region="ffn", groups=1, calls=1):
    return DemandEntry(region=region, axis=axis, collective=collective, groups=groups, ranks=ranks,
                       calls_per_step=calls, payload_bytes=payload)


def run_call(n, call, demand, start=0.0):
    n.prepare(demand, sum(len(g) for g in call.groups))
    n.register(call, start)
    (c,) = n.advance()
    assert c.call_id == call.call_id
    return c


def test_ring_allgather_inside_one_node_runs_at_the_pcie_rate():
    # ring 0->1->...->7->0 on one R5080-BF3 node: the two cross-switch lanes go opposite ways
    # through the CPU, so no resource is shared and each step is chunk / 64 GB/s
    n = net()
    sigma = 8 * 2**20
    call = CollectiveCall(call_id=0, region="attention", axis="world", collective="allgather",
                          groups=(tuple(range(8)),), payload_bytes=sigma)
    c = run_call(n, call, (row("allgather", 8, sigma, axis="world", region="attention"),))
    assert c.end_s == pytest.approx(7 * (sigma / 8) / 64e9, rel=1e-9)
    ar = CollectiveCall(call_id=1, region="attention", axis="world", collective="allreduce",
                        groups=(tuple(range(8)),), payload_bytes=sigma)
    c2 = run_call(n, ar, (row("allreduce", 8, sigma, axis="world", region="attention"),))
    assert c2.end_s == pytest.approx(2 * c.end_s, rel=1e-9)


def test_native_schedules_show_contention_between_groups():
    n = net(nodes=2)
    one = CollectiveCall(call_id=0, region="ffn", axis="tp", collective="allgather",
                         groups=((0, 8),), payload_bytes=2**24)
    both = CollectiveCall(call_id=1, region="ffn", axis="tp", collective="allgather",
                          groups=((0, 8), (1, 9), (2, 10), (3, 11), (4, 12), (5, 13), (6, 14), (7, 15)), payload_bytes=2**24)
    t1 = run_call(n, one, (row("allgather", 2, 2**24, axis="tp"),)).end_s
    t8 = run_call(n, both, (row("allgather", 2, 2**24, axis="tp", groups=8),)).end_s
    assert t8 > 1.5 * t1  # eight GPUs share four NICs per node
    sched = native_schedule(n, "alltoall", ((0, 1, 2, 3),), 4000)
    assert sched.n_activations == 3 and all(len(a.lanes) == 4 for a in sched.activations)


def test_alltoallv_uses_the_scheduler_and_validity_checked_schedule():
    n = net("nccl", nodes=2)
    rng = np.random.default_rng(0)
    d = rng.integers(0, 2_000_000, size=(16, 16))
    np.fill_diagonal(d, 0)
    call = CollectiveCall(call_id=7, region="ffn", axis="ep", collective="alltoallv", groups=(tuple(range(16)),),
                          payload_bytes=int(d.sum(1).max()), demand=d)
    c = run_call(n, call, (row("alltoallv", 16, int(d.sum(1).max())),), start=1e-3)
    sched, ev = n.plan_alltoallv(n.embed(d, tuple(range(16))))
    assert check_schedule(sched, n.topology).valid
    assert c.start_s == 1e-3 and c.end_s == pytest.approx(1e-3 + ev.completion_s)  # static: no planning
    assert ev.completion_s == evaluate(sched, n.capacity).completion_s
    # lower bound: the busiest rank's bytes through its 64 GB/s attachment
    assert ev.completion_s >= max(d.sum(0).max(), d.sum(1).max()) / 64e9
    rep = n.report().details
    assert c.planning_s == 0.0 and rep["calls"] == 1
    assert rep["activations"] == sched.n_activations and rep["bytes"] == d.sum()
    assert n.report().schedules == {"ffn/ep/alltoallv": "nccl"}


def test_planning_is_charged_per_activation_or_measured():
    d = np.full((8, 8), 1_000_000)
    np.fill_diagonal(d, 0)
    call = CollectiveCall(call_id=0, region="ffn", axis="ep", collective="alltoallv", groups=(tuple(range(8)),),
                          payload_bytes=7_000_000, demand=d)
    demand = (row("alltoallv", 8, 7_000_000),)
    n = net("fixed_peers", planning_cost_per_activation_s=10e-6)
    c = run_call(n, call, demand)
    activations = n.report().details["activations"]
    assert c.planning_s == pytest.approx(10e-6 * activations) and activations > 1
    assert c.end_s == pytest.approx(c.planning_s + c.parts["movement"])
    none = net("fixed_peers", planning="none")
    assert run_call(none, call, demand).end_s == pytest.approx(c.parts["movement"])
    measured = net("fixed_peers", planning="measured")
    assert run_call(measured, call, demand).planning_s > 0


def test_uniform_alltoallv_cache_reuses_one_plan():
    n = net("nccl")
    d = np.full((8, 8), 1000)
    calls = [CollectiveCall(call_id=i, region="ffn", axis="ep", collective="alltoallv", groups=(tuple(range(8)),),
                            payload_bytes=7000, demand=d) for i in range(3)]
    n.prepare((row("alltoallv", 8, 7000, calls=3),), 8)
    for c in calls:
        n.register(c, 0.0)
    assert len(n.advance()) == 3 and len(n._a2av_cache) == 1


def test_bad_inputs():
    with pytest.raises(SpecError, match="not an AlltoAllv scheduler"):
        PcieNetworkParams(scheduler="ring")
    with pytest.raises(SpecError, match="planning"):
        PcieNetworkParams(planning="sometimes")
    n = net()
    with pytest.raises(SpecError, match="set nodes=2") as e:
        n.prepare((), 16)
    assert "\n" not in str(e.value)
    n.prepare((row("alltoallv", 8, 10),), 8)
    with pytest.raises(RuntimeError, match="outside the declared demand"):
        n.register(CollectiveCall(call_id=0, region="ffn", axis="ep", collective="allgather",
                                  groups=(tuple(range(8)),), payload_bytes=10), 0.0)


def test_same_demand_same_schedule_in_fresh_networks(tmp_path):
    rng = np.random.default_rng(4)
    d = rng.integers(0, 3_000_000, size=(16, 16))
    np.fill_diagonal(d, 0)
    runs = []
    for _ in range(2):
        n = net("variopath", nodes=2, catalog_dir=str(tmp_path))
        sched, ev = n.plan_alltoallv(n.embed(d, tuple(range(16))))
        assert check_schedule(sched, n.topology).valid and sched.channels
        runs.append((sched.n_activations, ev.completion_s, n.planning_cost_s(sched)))
    assert runs[0] == runs[1]  # deterministic, planning charged per activation (not measured)
