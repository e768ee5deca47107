"""The shared-host search's leaf bounds are lower bounds, and its memo keys name everything the
memoised value reads (``fabrics.planner.shared_host``): pruning by them leaves plans unchanged
(the plans themselves are compared with the unpruned search in test_fabrics_planner_search.py)."""

import random

import pytest

import fabrics.planner.shared_host as sh
from fabrics.planner import clear_plan_cache, request_from_dict

R, LAM = 5e10, 0.52e-6

REQUESTS = [
    (64, 14, [{"shape": [64], "collective": "allreduce", "payloads": [4096], "weights": [128]},
              {"shape": [8, 8], "collectives": ["allgather", "allreduce"], "payloads": [131072, 4096],
               "weights": [128, 128]}]),
    (64, 16, [{"shape": [4, 16], "collectives": ["alltoall", "allreduce"], "payloads": [1 << 20, 512]},
              {"shape": [16, 4], "collectives": ["allgather", "reducescatter"], "payloads": [65536, 1 << 22],
               "weights": [4, 1]}]),
]


def _request(world, ports, meshes):
    return request_from_dict(world=world, ports=ports, link_rate_Bps=R, hop_latency_s=LAM, meshes=meshes)


def _leaves(req, rng, count):
    """(search, hits, spare, value) of random leaves of random partitions: ``value`` is the leaf's
    objective as the search computes it (raised, nothing pruned)."""
    axes, pricer, budget = sh._axes(req), sh._Pricer(req), req.ports
    active = [k for k, ax in enumerate(axes) if ax.active]
    parts = sh._partition_sets(req)
    out = []
    while len(out) < count:
        bits = [b for mesh in rng.choice(parts) for b in mesh]
        search = sh._LeafSearch(req, axes, bits, pricer, budget, active)
        chosen, host = [], 0
        for k in active:
            opt = search.option(k, rng.choice(sh._aligned_ladder(axes[k], k, bits, pricer, budget)))
            chosen.append((k, opt))
            host |= opt[1]
        if host.bit_count() + search.min_step > budget:
            continue  # no multiplicity step fits: the leaf is never raised nor bounded
        value = search.leaf((), chosen, host, None, None)[0]
        # the separate bound: with a bound of 0 every leaf is pruned, after its per-row memo is filled
        assert search.leaf((), chosen, host, None, 0.0) is None
        hits = [search._contrib[k][(own_bits, host & search.subgroups[k])] for k, (_, own_bits, _) in chosen]
        out.append((search, hits, req.ports - host.bit_count(), value))
    return out


@pytest.mark.parametrize("world, ports, meshes", REQUESTS)
def test_leaf_bounds_are_lower_bounds(world, ports, meshes):
    clear_plan_cache()
    rng = random.Random(7)
    req = _request(world, ports, meshes)
    for search, hits, spare, value in _leaves(req, rng, 60):
        separate = 0.0
        for h in hits:
            separate += h[3][spare]
        joint = search.joint_bound(hits, spare)
        # the joint bound only adds a constraint (one mesh's axes share the spare ports)
        assert separate <= joint * (1 + 1e-12)
        assert joint <= value * (1 + 1e-12), (joint, value)


def test_joint_bound_is_tighter_somewhere():
    """Not vacuous: on the two-axis meshes the joint bound rises above the separate one."""
    clear_plan_cache()
    req = _request(*REQUESTS[0])
    gains = []
    for search, hits, spare, value in _leaves(req, random.Random(3), 40):
        separate = sum(h[3][spare] for h in hits)
        gains.append(search.joint_bound(hits, spare) - separate)
    assert max(gains) > 0


@pytest.mark.parametrize("world, ports, meshes", REQUESTS)
def test_aligned_ladder_memo_equals_fresh(world, ports, meshes):
    """The aligned ladder is memoised by (axis, bits, budget, the masks inside the other axes'
    blocks): filled by every partition in turn, it returns what an empty table computes."""
    req = _request(world, ports, meshes)
    axes = sh._axes(req)
    clear_plan_cache()
    warm = sh._Pricer(req)
    for parts in sh._partition_sets(req):
        bits = [b for mesh in parts for b in mesh]
        for k, ax in enumerate(axes):
            if not ax.active:
                continue
            memoised = sh._aligned_ladder(ax, k, bits, warm, ports)
            sh.clear_search_tables()
            fresh = sh._aligned_ladder(ax, k, bits, sh._Pricer(req), ports)
            assert memoised == fresh  # ``warm`` keeps its own (older) tables
