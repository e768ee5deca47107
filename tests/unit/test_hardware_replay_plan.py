"""Replay plans (pipelines.hardware.replay_plan): lane pieces, relays, byte pattern, baselines."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from collectives.alltoallv import workloads
from collectives.errors import SpecError
from pipelines.hardware.replay_plan import (ReplayPlan, bandwidths, mismatches, pairwise_plan, pattern,
                                            plan_from_schedule, single_call_plan)
from pipelines.hardware.cpu_testbed import schedule_json


def simulate(plan: ReplayPlan) -> np.ndarray:
    """Execute a plan with numpy buffers the way the worker does: origins send pattern bytes,
    relays forward exactly what they received; returns the bytes delivered per (origin, final)
    after checking every delivered byte."""
    n = plan.world_size
    held: dict[tuple[int, int, int], list] = {}
    got = np.zeros((n, n), dtype=np.int64)
    for act in plan.activations:
        arrivals = []
        for lane in act:
            if lane.src == lane.origin:
                data = np.concatenate([pattern(lane.origin, lane.final, o, l) for o, l in lane.pieces])
            else:
                parts = []
                for o, l in lane.pieces:
                    start, buf = next((s, b) for s, b in held[(lane.src, lane.origin, lane.final)]
                                      if s <= o and o + l <= s + b.size)
                    parts.append(buf[o - start:o - start + l])
                data = np.concatenate(parts)
            assert data.size == lane.nbytes
            if lane.delivers:
                assert mismatches(data, lane.origin, lane.final, lane.pieces) == 0
                got[lane.origin, lane.final] += lane.nbytes
            else:
                pos = 0
                for o, l in lane.pieces:
                    arrivals.append(((lane.dst, lane.origin, lane.final), (o, data[pos:pos + l])))
                    pos += l
        for key, item in arrivals:
            held.setdefault(key, []).append(item)
    return got


@pytest.mark.parametrize("scheduler,nodes", [("variopath", 1), ("nccl", 1), ("variopath", 2), ("deepep", 2), ("fast", 2)])
def test_plan_of_every_scheduler_delivers_the_demand(scheduler, nodes):
    n = 4 * nodes
    demand = workloads.zipf(n, 64 * 1024, 0.8, seed=11)
    plan = plan_from_schedule(schedule_json(scheduler, nodes, demand))
    assert plan.world_size == n and plan.total_bytes == int(demand.sum())
    assert np.array_equal(simulate(plan), demand)
    for act in plan.activations:  # tags are the global lane order
        assert [l.tag for l in act] == list(range(len(act)))
        for lane in act:
            assert sum(l for _, l in lane.pieces) == lane.nbytes


def test_relay_schedules_have_relays_and_pieces_cover_each_commodity_once():
    demand = workloads.moe(8, 16, experts=16, top_k=4, hidden=128, seed=2)
    plan = plan_from_schedule(schedule_json("deepep", 2, demand))
    relays = [l for act in plan.activations for l in act if l.src != l.origin]
    assert relays, "deepep on two nodes forwards inter-node data"
    covered: dict = {}
    for act in plan.activations:
        for lane in act:
            if lane.delivers:
                covered.setdefault((lane.origin, lane.final), []).extend(lane.pieces)
    for (o, f), pieces in covered.items():
        pieces.sort()
        pos = 0
        for off, ln in pieces:
            assert off == pos
            pos += ln
        assert pos == demand[o, f]


def _doc(lanes, demand):
    return {"format": "gxnet.alltoallv.schedule/1", "scheduler": "hand", "platform": "x", "world_size": len(demand),
            "demand_bytes": demand, "activations": [{"lanes": act} for act in lanes]}


def test_forwarding_data_in_the_activation_it_arrives_is_rejected():
    demand = [[0, 0, 10], [0, 0, 0], [0, 0, 0]]
    same = [[{"src": 0, "dst": 1, "origin": 0, "final": 2, "bytes": 10},
             {"src": 1, "dst": 2, "origin": 0, "final": 2, "bytes": 10}]]
    with pytest.raises(SpecError, match="does not hold"):
        plan_from_schedule(_doc(same, demand))
    later = [[{"src": 0, "dst": 1, "origin": 0, "final": 2, "bytes": 10}],
             [{"src": 1, "dst": 2, "origin": 0, "final": 2, "bytes": 4}, {"src": 1, "dst": 2, "origin": 0, "final": 2, "bytes": 6}]]
    plan = plan_from_schedule(_doc(later, demand))
    assert [l.pieces for l in plan.activations[1]] == [((0, 4),), ((4, 6),)]
    assert np.array_equal(simulate(plan), np.array(demand))


@pytest.mark.parametrize("doc,match", [
    ({"format": "other"}, "format"),
    (_doc([[{"src": 0, "dst": 1, "bytes": 5}]], [[0, 6], [0, 0]]), "delivers 5 B"),
    (_doc([[{"src": 0, "dst": 1, "bytes": 7}]], [[0, 6], [0, 0]]), "does not hold"),
    (_doc([[{"src": 0, "dst": 2, "bytes": 6}]], [[0, 6], [0, 0]]), "not a rank"),
    (_doc([[{"src": 1, "dst": 1, "bytes": 6}]], [[0, 6], [0, 0]]), "self-transfer"),
    (_doc([], [[0, 6, 1], [0, 0, 0]]), "shape"),
])
def test_bad_schedules_are_one_line_spec_errors(doc, match):
    with pytest.raises(SpecError, match=match) as err:
        plan_from_schedule(doc)
    assert "\n" not in str(err.value)


def test_pattern_distinguishes_commodities_and_offsets():
    a = pattern(0, 1, 0, 4096)
    assert not np.array_equal(a, pattern(1, 0, 0, 4096))
    assert not np.array_equal(a, pattern(0, 2, 0, 4096))
    assert np.array_equal(a[100:200], pattern(0, 1, 100, 100))  # offsets are absolute
    assert np.count_nonzero(a[1:] != a[:-1]) > 4000  # no long runs a shifted copy would pass
    bad = a.copy()
    bad[17] ^= 1
    assert mismatches(bad, 0, 1, [(0, 2048), (2048, 2048)]) == 1
    assert mismatches(a[:10], 0, 1, [(0, 10)]) == 0


def test_pairwise_and_single_call_baselines():
    demand = workloads.zipf(6, 6000, 0.5, seed=1)
    p = pairwise_plan(demand)
    assert len(p.activations) == 5
    for k, act in enumerate(p.activations, start=1):
        assert all(l.dst == (l.src + k) % 6 and l.nbytes == demand[l.src, l.dst] for l in act)
    assert np.array_equal(simulate(p), demand)
    s = single_call_plan(demand)
    assert s.kind == "all_to_all_single" and s.n_activations == 1 and s.total_bytes == demand.sum()
    assert ReplayPlan.from_json(p.to_json()) == p


def test_bandwidths_follow_nccl_tests_all_to_all():
    algbw, busbw = bandwidths(8 * 1000, 8, 2.0)
    assert algbw == pytest.approx(500.0)  # bytes per rank / time
    assert busbw == pytest.approx(500.0 * 7 / 8)
    assert bandwidths(100, 4, 0.0) == (0.0, 0.0)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 7), seed=st.integers(0, 10_000), skew=st.floats(0.0, 1.2))
def test_pairwise_plans_deliver_any_demand(n, seed, skew):
    demand = workloads.zipf(n, 5000, skew, seed=seed)
    assert np.array_equal(simulate(plan_from_schedule(_doc(
        [[{"src": l.src, "dst": l.dst, "bytes": l.nbytes} for l in act] for act in pairwise_plan(demand).activations],
        demand.tolist()))), demand)
