"""A plan as plain data and back, exactly (paper 003, Appendix A.2: "a plan is a pure function of
its request and can be cached and reused" -- also across processes, through a store that
``pipelines`` owns).

``plan_record(plan)`` is JSON-able (ints, floats, strings, lists, None); ``plan_from_record``
rebuilds the identical frozen ``Plan`` (floats round-trip exactly through JSON's shortest repr).
A record that does not have this shape raises ``ValueError``: a store treats it as absent.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from fabrics.planner.shared_host import AxisPlan, Plan

RECORD_VERSION = 1
_AXIS_FIELDS = tuple(f.name for f in fields(AxisPlan))
_PLAN_FIELDS = tuple(f.name for f in fields(Plan) if f.name != "axes")


def _lists(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_lists(v) for v in value]
    return value


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def plan_record(plan: Plan) -> dict:
    """Every field of ``plan`` and its axes, tuples as lists."""
    return {"version": RECORD_VERSION,
            **{name: _lists(getattr(plan, name)) for name in _PLAN_FIELDS},
            "axes": [{name: _lists(getattr(a, name)) for name in _AXIS_FIELDS} for a in plan.axes]}


def plan_from_record(record: Any) -> Plan:
    """The ``Plan`` a ``plan_record`` describes; ``ValueError`` for anything else."""
    if not isinstance(record, dict) or record.get("version") != RECORD_VERSION:
        raise ValueError("not a plan record of this version")
    try:
        axes = tuple(AxisPlan(**{name: _tuples(a[name]) for name in _AXIS_FIELDS}) for a in record["axes"])
        kwargs = {name: _tuples(record[name]) for name in _PLAN_FIELDS}
        kwargs["meta"] = dict(record["meta"])
        return Plan(axes=axes, **kwargs)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed plan record: {exc}") from None
