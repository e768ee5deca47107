"""The compiled coordinate descent (``fabrics/planner/descent_kernel.c``) returns exactly the plans
of the Python descent it stands in for: on recorded figure-4 requests (their recorded plans), and
on random requests with every partition forced into the descent (against the Python descent and
the reference search of ``test_fabrics_planner_search.py``)."""

import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import fabrics.planner.shared_host as sh
from fabrics.planner import clear_plan_cache, shared_host_plan
from fabrics.planner.descent import load_descent_kernel, use_compiled_descent
from fabrics.planner.record import plan_record
from fabrics.planner.request import MeshRequest, PlanRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_fabrics_planner_search import _reference_search_partition, requests  # noqa: E402

KERNEL = load_descent_kernel()
needs_kernel = pytest.mark.skipif(KERNEL is None, reason="fabrics.planner._descent_kernel not built "
                                  "(python setup.py build_ext --inplace)")
CASES = json.loads((Path(__file__).parents[1] / "data" / "planner_figure4_requests.json").read_text())["cases"]


def _request(d: dict) -> PlanRequest:
    meshes = tuple(MeshRequest(**{k: tuple(v) for k, v in m.items()}) for m in d["meshes"])
    return PlanRequest(**{**d, "meshes": meshes})


def _record(plan) -> str:
    return json.dumps(plan_record(plan), sort_keys=True)


def _plan(request, monkeypatch, *, kernel: bool, calls: list | None = None) -> str:
    """The plan on emptied planner tables, with the compiled descent or the Python one."""
    clear_plan_cache()
    previous = use_compiled_descent(kernel)
    try:
        with monkeypatch.context() as m:
            if calls is not None:
                real = sh._compiled_descent
                m.setattr(sh, "_compiled_descent", lambda *a: calls.append(1) or real(*a))
            return _record(shared_host_plan(request))
    finally:
        use_compiled_descent(previous)


def test_kernel_switch():
    previous = use_compiled_descent(False)
    try:
        assert load_descent_kernel() is None
    finally:
        assert use_compiled_descent(previous) is False
    assert (load_descent_kernel() is None) == (KERNEL is None)


@needs_kernel
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if i == 2 else c for i, c in enumerate(CASES)],
                         ids=[f"batch{c['batch']}-split{c['split']}" for c in CASES])
def test_recorded_figure4_requests(case, monkeypatch):
    request, want = _request(case["request"]), json.dumps(case["plan"], sort_keys=True)
    calls: list = []
    assert _plan(request, monkeypatch, kernel=True, calls=calls) == want
    assert calls, "the request never reached the compiled descent"
    assert _plan(request, monkeypatch, kernel=False) == want


def _forced_descent_agrees(planned, monkeypatch):
    monkeypatch.setattr(sh, "MAX_LEAVES", 0)  # every partition goes to the coordinate descent
    compiled = _plan(planned, monkeypatch, kernel=True)
    assert compiled == _plan(planned, monkeypatch, kernel=False)
    with monkeypatch.context() as m:
        m.setattr(sh, "_search_partition", _reference_search_partition)
        assert compiled == _plan(planned, m, kernel=False)


# Up to n + 10 ports per rank the reference search costs <= 0.4 s per request; beyond, a few
# requests (32 ranks, 3 meshes, 19 ports) cost it 3-5 s each, so the full range is a slow check.
@needs_kernel
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(planned=requests(spare_ports=10))
def test_forced_descent_equals_python_and_reference(planned, monkeypatch):
    _forced_descent_agrees(planned, monkeypatch)


@pytest.mark.slow
@needs_kernel
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(planned=requests())
def test_forced_descent_equals_python_and_reference_up_to_n_plus_14_ports(planned, monkeypatch):
    _forced_descent_agrees(planned, monkeypatch)


@needs_kernel
def test_descend_refuses_bad_arguments():
    def call(budget=8, option=b"\x01" + b"\x00" * 7, rows=None):
        rows = KERNEL.RowTable(1, 8) if rows is None else rows
        return KERNEL.descend(1, budget, 1, 1e-6, [1.0], [rows], [KERNEL.FullTable(1)], [KERNEL.TimeTable()],
                              [[option]], [[0]], [b"\x01" + b"\x00" * 7], [0], [], None, None)

    with pytest.raises(ValueError, match="bitset"):
        call(option=b"\x01")
    with pytest.raises(ValueError, match="RowTable"):
        call(budget=9)
    with pytest.raises(ValueError, match="RowTable"):
        call(rows=KERNEL.RowTable(2, 8))
    with pytest.raises(ValueError, match="nw"):
        KERNEL.RowTable(0, 8)
    with pytest.raises(TypeError):  # the time callback is called and is not callable
        call()
