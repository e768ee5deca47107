"""Measured kernel durations in place of the roofline (gxnet.calibration, paper 003 D.3)."""

import pytest

from collectives.errors import SpecError
from gxnet import testing as T
from gxnet.calibration import (CalibrationTable, apply_calibration, deployment_key, measured_over_roofline)
from gxnet.executor import execute
from gxnet.plan import build_plan


def _table(d, scale=3.0, drop=None, **over):
    plan = build_plan(d)
    kernels = [{"section": s.name, "name": e.name, "kernel": e.kernel, "track": t, "measured_s": dur * scale,
                "scaled": e.kernel == "flash_decode"}
               for s in plan.sections for e in s.entries if hasattr(e, "kernel")
               for t, dur in enumerate(e.durations_s) if (e.name, t) != drop]
    return {"format": "gxnet.calibration/1", "deployment": {**deployment_key(d), **over},
            "device": {"type": "cpu", "name": "test"}, "dtype": "float32", "kernels": kernels}


def test_measured_plan_replaces_compute_durations_only():
    d = T.deployment(batch=4)
    roof = build_plan(d)
    table = CalibrationTable.from_dict(_table(d, scale=3.0))
    meas = apply_calibration(roof, table)
    assert meas is not roof and build_plan(d) is roof  # the cached plan is untouched
    r1, r3 = execute(roof, T.FixedLatencyNetwork()), execute(meas, T.FixedLatencyNetwork())
    for key in ("attention", "ffn", "other"):
        assert r3.breakdown_s[key] == pytest.approx(3 * r1.breakdown_s[key], rel=1e-9)
    assert r3.breakdown_s["communication"] == pytest.approx(r1.breakdown_s["communication"])
    assert r3.breakdown_s["fixed"] == pytest.approx(r1.breakdown_s["fixed"])
    ratios = measured_over_roofline(roof, meas)
    assert ratios and all(v == pytest.approx(3.0) for v in ratios.values())
    assert "decoder_block/L0.flash_decode/flash_decode" in ratios
    assert table.scaled and all(k[1] == "L0.flash_decode" for k in table.scaled)


def test_table_of_another_deployment_or_incomplete_is_refused():
    d = T.deployment()
    with pytest.raises(SpecError, match="another deployment: batch=4"):
        apply_calibration(build_plan(d), CalibrationTable.from_dict(_table(d, batch=4)))
    with pytest.raises(SpecError, match="no entry for kernel L0.experts"):
        apply_calibration(build_plan(d), CalibrationTable.from_dict(_table(d, drop=("L0.experts", 1))))
    with pytest.raises(SpecError, match="format"):
        CalibrationTable.from_dict({"format": "x"})
    bad = _table(d)
    bad["kernels"][0]["measured_s"] = -1.0
    with pytest.raises(SpecError, match="seconds >= 0"):
        CalibrationTable.from_dict(bad)
