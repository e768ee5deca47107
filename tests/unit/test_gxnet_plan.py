from gxnet.plan import PLAN_CACHE, CollectiveEntry, ComputeEntry, build_plan
from gxnet.testing import deployment


def test_plan_is_compact_and_shares_rank_behaviours():
    p = build_plan(deployment(batch=16, parallel=(4, 128, 16, 32)))
    # 101 active experts over 16 EP ranks: 5 ranks hold 7, 11 hold 6 (x 32 TPE ranks each)
    assert [(t.active_experts, t.ranks) for t in p.tracks] == [(7, 160), (6, 352)]
    block = p.sections[1]
    assert block.repeat == 128 and len(block.entries) == 10
    gemm = next(e for e in block.entries if isinstance(e, ComputeEntry) and e.kernel == "expert_gemm")
    assert gemm.durations_s[0] > gemm.durations_s[1] > 0
    fd = next(e for e in block.entries if isinstance(e, ComputeEntry) and e.kernel == "flash_decode")
    assert fd.durations_s[0] == fd.durations_s[1]


def test_collective_entries_list_every_group():
    p = build_plan(deployment(parallel=(4, 128, 64, 8)))
    colls = [e for s in p.sections for e in s.entries if isinstance(e, CollectiveEntry)]
    kvp = next(e for e in colls if e.axis == "kvp")
    assert len(kvp.groups) == 128 and all(len(g) == 4 for g in kvp.groups)


def test_plan_cache_is_keyed_by_deployment():
    PLAN_CACHE.clear()
    d = deployment(batch=2)
    assert build_plan(d) is build_plan(deployment(batch=2))
    assert build_plan(d) is not build_plan(deployment(batch=4))
    assert build_plan(d, cached=False) == build_plan(d)
    assert PLAN_CACHE.info().hits >= 1


def test_plan_as_dict_is_json():
    import json

    p = build_plan(deployment(batch=4))
    d = json.loads(json.dumps(p.as_dict()))
    assert d["sections"][1]["repeat"] == 128 and d["moe"]["active_experts"] == 30
    assert d["weights_bytes_per_rank"] + d["kv_bytes_per_rank"] == p.memory_bytes_per_rank
