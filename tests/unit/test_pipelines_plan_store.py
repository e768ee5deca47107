"""The OCS plan store (pipelines/plan_store.py) and the plan records it keeps
(fabrics/planner/record.py): exact round trips, a shared store that plans each request once,
corrupt or foreign entries ignored and re-planned, and the same plan with or without a store."""

import json

import pytest

from fabrics.planner import attach_plan_store, clear_plan_cache, plan, request_from_dict, request_hash
from fabrics.planner.record import plan_from_record, plan_record
from pipelines.plan_store import PlanStore, default_plan_store

R, LAM = 5e10, 0.52e-6


def _request(sigma=4096, allocation="shared_host"):
    return request_from_dict(world=16, ports=6, link_rate_Bps=R, hop_latency_s=LAM, allocation=allocation,
                             meshes=[{"shape": [4, 4], "collective": "allreduce", "payloads": [sigma, 8 * sigma]}])


@pytest.fixture
def fresh():
    previous = attach_plan_store(None)
    clear_plan_cache()
    yield
    attach_plan_store(previous)
    clear_plan_cache()


@pytest.mark.parametrize("allocation", ["shared_host", "stacked_link"])
def test_record_round_trip_is_exact(fresh, allocation):
    p = plan(_request(allocation=allocation))
    back = plan_from_record(json.loads(json.dumps(plan_record(p))))
    assert back == p and back.meta == p.meta and back.to_json() == p.to_json()


@pytest.mark.parametrize("bad", [None, [], {"version": 99}, {"version": 1, "axes": [{}]}])
def test_malformed_records_raise_value_error(bad):
    with pytest.raises(ValueError):
        plan_from_record(bad)


def test_store_plans_each_request_once_across_processes(fresh, tmp_path, monkeypatch):
    import fabrics.planner.cache as cache

    calls = []
    real = cache._compute
    monkeypatch.setattr(cache, "_compute", lambda req: calls.append(1) or real(req))
    first = PlanStore(tmp_path, code="t")
    attach_plan_store(first)
    p = plan(_request())
    assert (len(calls), first.stats()) == (1, {"hits": 0, "misses": 1, "writes": 1})
    clear_plan_cache()  # another process: empty in-process cache, same folder
    second = PlanStore(tmp_path, code="t")
    attach_plan_store(second)
    assert plan(_request()) == p and len(calls) == 1 and second.hits == 1


def test_corrupt_or_foreign_entries_are_replanned(fresh, tmp_path):
    store = PlanStore(tmp_path, code="t")
    attach_plan_store(store)
    req, other = _request(), _request(sigma=1 << 16)
    expected = plan(req)
    path = store.path(request_hash(req))
    for damage in ("{not json", json.dumps(plan_record(plan(other)))):  # truncated; another request's plan
        path.write_text(damage)
        clear_plan_cache()
        assert plan(req) == expected
        assert plan_from_record(json.loads(path.read_text())) == expected  # rewritten whole
    assert not list(path.parent.glob("*.tmp"))


def test_planner_code_change_uses_another_folder(tmp_path):
    assert PlanStore(tmp_path, code="a").path("ab12") != PlanStore(tmp_path, code="b").path("ab12")


def test_env_switches_the_store_off(monkeypatch, tmp_path):
    monkeypatch.setenv("GX_PLAN_STORE", "off")
    assert default_plan_store() is None
    monkeypatch.setenv("GX_PLAN_STORE", str(tmp_path))
    assert default_plan_store().root.parent == tmp_path
