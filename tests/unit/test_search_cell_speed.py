"""The search's fast paths give what the plain paths give, to the last bit: hybrid placement
(candidates' rack demands in one pass, bound-pruned circuit sizing, cached deployments),
and the executor's path without a trace."""

from itertools import combinations

import numpy as np
import pytest

from fabrics.scaleup import allocation as A
from fabrics.scaleup.allocation import TrafficGroups, balanced_hybrid_allocation, bit_allocation, rack_demand_bytes
from fabrics.scaleup.circuit_sizing import rack_circuit_counts, rack_circuit_load
from gxnet.executor import execute
from gxnet.plan import build_plan
from gxnet.testing import FixedLatencyNetwork, deployment
from pipelines.network import fabric_from_dict

WORLD = 64


def hybrid_fabric(up_ports=2):
    return fabric_from_dict({"kind": "hybrid", "ports": 4, "link_rate": 5e10, "accelerators": WORLD, "down_ports": 8,
                             "switch_radix": 16, "up_ports": up_ports}, world=WORLD)


def random_traffic(rng):
    """A few group structures (mesh axes) with non-dyadic pair bytes, sometimes unequal groups."""
    out = []
    for _ in range(int(rng.integers(1, 4))):
        size = 1 << int(rng.integers(1, 6))
        perm = rng.permutation(WORLD)
        groups = tuple(tuple(int(x) for x in perm[i:i + size]) for i in range(0, WORLD, size))
        out.append(TrafficGroups(groups=groups, pair_bytes=float(rng.random() * 10 ** rng.integers(0, 9))))
    if rng.random() < 0.3:
        out.append(TrafficGroups(groups=((0, 9, 18), (27, 36, 45, 54, 63)), pair_bytes=float(rng.random() * 1e5)))
    return out


def brute_force(f, traffic, up_ports):
    """The placement as first written: every rack-local bit set sized, the smallest key kept."""
    best = None
    for bits in combinations(range(6), 3):
        demand = rack_demand_bytes(bit_allocation(WORLD, 8, bits).rack_of_rank(f), traffic, f.spec.racks)
        worst = float(rack_circuit_load(demand, rack_circuit_counts(demand, up_ports)).max(initial=0.0))
        key = (worst, float(demand.sum()), bits)
        best = key if best is None or key < best else best
    return bit_allocation(WORLD, 8, best[2]).accelerators


@pytest.mark.parametrize("up_ports", [1, 2, 4])
def test_pruned_placement_is_the_brute_force_one(up_ports):
    rng = np.random.default_rng(up_ports)
    f = hybrid_fabric(up_ports)
    for _ in range(12):
        traffic = random_traffic(rng)
        assert balanced_hybrid_allocation(f, WORLD, traffic).accelerators == brute_force(f, traffic, up_ports)


def test_candidates_rack_demands_equal_one_at_a_time_to_the_bit():
    rng = np.random.default_rng(7)
    f = hybrid_fabric()
    bit_sets, racks_of = A._racks_by_bit_set(WORLD, 6, 3)
    for _ in range(10):
        prepared = A._prepared(random_traffic(rng))
        together = A._rack_demands(racks_of, prepared, f.spec.racks)
        for i, bits in enumerate(bit_sets):
            alone = A._rack_demand(bit_allocation(WORLD, 8, bits).rack_of_rank(f), prepared, f.spec.racks)
            assert together[i].tobytes() == alone.tobytes()


def test_cached_circuit_counts_are_private_copies():
    demand = np.array([[0.0, 5.0, 1.0], [2.0, 0.0, 3.0], [1.0, 1.0, 0.0]])
    first = rack_circuit_counts(demand, 2)
    first[:] = 99
    assert (rack_circuit_counts(demand, 2) <= 2).all()


@pytest.mark.parametrize("parallel,batch", [((4, 128, 16, 32), 16), ((8, 64, 256, 2), 1), ((512, 1, 32, 16), 1)])
def test_untraced_path_is_the_traced_path_to_the_bit(parallel, batch):
    d = deployment(batch=batch, parallel=parallel, context=32_768)
    plan = build_plan(d)
    fast = execute(plan, FixedLatencyNetwork(latency_s=3.3e-6), trace=False)
    full = execute(plan, FixedLatencyNetwork(latency_s=3.3e-6), trace=True)  # the general loop
    assert fast.summary() == full.summary()
    assert [c[1:] for c in fast.call_log] == [c[1:] for c in full.call_log] and fast.events == []


def test_circuit_sizing_is_invariant_to_a_power_of_two_scale():
    from fabrics.scaleup import circuit_sizing as C

    rng = np.random.default_rng(3)
    for _ in range(40):
        k = int(rng.integers(2, 9))
        demand = rng.random((k, k)) * 10 ** rng.integers(0, 12) * (rng.random((k, k)) < 0.6)
        np.fill_diagonal(demand, 0.0)
        up = int(rng.integers(1, 4))
        counts = C._water_fill(demand, up, reserve_ring=False)
        load = C.rack_circuit_load(demand, counts)
        for scale in (2.0 ** int(rng.integers(-20, 20)), 2.0, 0.5):
            scaled = demand * scale
            assert np.array_equal(C._water_fill(scaled, up, reserve_ring=False), counts)
            assert C.rack_circuit_load(scaled, counts).tobytes() == (load * scale).tobytes()
            fresh = float(C.rack_circuit_load(scaled, C.rack_circuit_counts(scaled, up)).max(initial=0.0))
            assert C.busiest_circuit_bytes(scaled, up) == fresh


def _single_level():
    from fabrics.network.analytical import AnalyticalSingleLevel, SingleLevelParams

    return AnalyticalSingleLevel(SingleLevelParams(hop_latency_s=0.81e-6, link_rate_Bps=5e10, ports=36))


class _Opaque:
    """The same model seen only through the protocol (not an IndependentCalls): the general loop."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("parallel,batch", [((4, 128, 16, 32), 16), ((8, 64, 256, 2), 3), ((512, 1, 32, 16), 1)])
def test_independent_calls_walk_is_the_traced_walk_to_the_bit(parallel, batch):
    """A model with independent call prices is asked once per entry and its calls are timed by the
    executor itself: the same step, breakdown, per-call log and booked schedules as the traced
    loop and the general untraced loop (both go through register / advance for every call)."""
    from gxnet.executor import _execute_untraced

    plan = build_plan(deployment(batch=batch, parallel=parallel, context=32_768))
    nets = [_single_level() for _ in range(3)]
    fast = execute(plan, nets[0], trace=False)
    full = execute(plan, nets[1], trace=True)
    nets[2].prepare(plan.demand, plan.deployment.world)
    general = _execute_untraced(plan, _Opaque(nets[2]))
    assert fast.summary() == full.summary() == general.summary()
    assert [c[1:] for c in fast.call_log] == [c[1:] for c in full.call_log] == [c[1:] for c in general.call_log]
    assert [c[0] for c in fast.call_log] == [c[0] for c in full.call_log]
    assert nets[0].report() == nets[1].report() == nets[2].report()
    assert fast.summary()["breakdown_s"]["communication"] > 0


@pytest.mark.parametrize("engine_name", ["cuda_graph", "eager", "persistent"])
def test_independent_calls_walk_with_kernel_floors_to_the_bit(engine_name):
    """Engine plans (per-kernel floors, per-window floors, two pending parts more) on 8 GPUs."""
    import yaml

    from gxnet.deployment import Deployment, precision_from_dict
    from gxnet.kernels import engine_from_dict
    from gxnet.parallel import ParallelSpec
    from gxnet.testing import CONF, accelerator, model

    h200 = accelerator("h200")
    engine = engine_from_dict(yaml.safe_load((CONF / "engine" / f"{engine_name}.yaml").read_text()), h200)
    d = Deployment(model=model("llama3_1_8b"), accelerator=h200, world=8,
                   parallel=ParallelSpec(scheme="tp_ep", tp=8, ep=1), batch=8, context_tokens=8192,
                   precision=precision_from_dict({"name": "bf16"}), engine=engine)
    plan = build_plan(d)
    fast = execute(plan, _single_level(), trace=False)
    full = execute(plan, _single_level(), trace=True)
    assert fast.summary() == full.summary() and fast.collective_calls > 0
    assert [c[1:] for c in fast.call_log] == [c[1:] for c in full.call_log]


def test_independent_calls_walk_on_odd_section_shapes_to_the_bit():
    """Sections that start or end with a collective, hold only kernels, repeat zero times or carry
    kernels into the next section: the segments of the walk must still be the traced loop's."""
    from dataclasses import replace

    from gxnet.plan import CollectiveEntry, PlanSection

    plan = build_plan(deployment(batch=4, parallel=(8, 64, 256, 2), context=32_768))
    entries = [e for s in plan.sections for e in s.entries]
    (c1, c2), (k1, k2) = ([e for e in entries if isinstance(e, CollectiveEntry)][:2],
                          [e for e in entries if not isinstance(e, CollectiveEntry)][1:3])
    shapes = [("a", 2, (c1, k1, c2)), ("b", 3, (k1, k2)), ("c", 0, (k1, c1)), ("d", 2, (c1, c2, k1)),
              ("e", 1, (k2,)), ("f", 2, (k2, c2, k1, k2, c1))]
    odd = replace(plan, sections=tuple(PlanSection(name, r, es) for name, r, es in shapes))
    fast = execute(odd, _single_level(), trace=False)
    full = execute(odd, _single_level(), trace=True)
    assert fast.summary() == full.summary() and fast.collective_calls == 2 * 2 + 2 * 2 + 2 * 2
    assert [c[1:] for c in fast.call_log] == [c[1:] for c in full.call_log]


@pytest.mark.parametrize("tracks", [1, 3])
def test_independent_calls_walk_with_one_or_three_tracks_to_the_bit(tracks):
    """Decode plans have one or two tracks; other plans (expert-parallel phases) may have more."""
    from dataclasses import replace

    from gxnet.plan import ComputeEntry, PlanSection, Track

    plan = build_plan(deployment(batch=4, parallel=(8, 64, 256, 2), context=32_768))

    def widened(e):
        if not isinstance(e, ComputeEntry):
            return e
        grow = tuple(e.durations_s[0] * (1 + 0.37 * k) for k in range(tracks))  # track 2 the slowest: exercised
        return replace(e, durations_s=grow, flops=(e.flops[0],) * tracks, hbm_bytes=(e.hbm_bytes[0],) * tracks)

    sections = tuple(PlanSection(s.name, s.repeat, tuple(widened(e) for e in s.entries)) for s in plan.sections)
    wide = replace(plan, sections=sections, tracks=tuple(Track(f"t{k}", 1, 1) for k in range(tracks)))
    fast = execute(wide, _single_level(), trace=False)
    full = execute(wide, _single_level(), trace=True)
    assert fast.summary() == full.summary() and len(fast.tracks) == tracks
    assert [c[1:] for c in fast.call_log] == [c[1:] for c in full.call_log]
