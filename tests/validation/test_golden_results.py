"""Golden results.json of fixed configurations (tests/golden/): a refactoring must not move them.

The five scale-up fabrics' default decode step, paper 003's GPT-OSS-5.3T-like headline split on
all-OCS, EP decode on PCIe, ``gx collective`` on all-OCS, ``gx alltoallv`` with VarioPath on the
Figure 1 server and ``gx prefill`` on R5080-BF3 -- each equal to its golden file to 1e-9 relative,
except the wall-clock measurements listed in ``MEASURED_KEYS``.
"""

import importlib.util
import json
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("golden_cases", Path(__file__).resolve().parent.parent / "golden" / "cases.py")
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)


@pytest.mark.parametrize("name", list(golden.CASES))
def test_results_equal_their_golden_file(pipeline, name):
    pipeline_name, overrides = golden.CASES[name]
    proc, out = pipeline(pipeline_name, *overrides)
    assert proc.returncode == 0, proc.stderr[-3000:]
    actual = json.loads((out / "results.json").read_text())
    expected = json.loads((golden.GOLDEN_DIR / f"{name}.json").read_text())
    diffs = golden.differences(expected, actual)
    assert not diffs, f"{name}: {len(diffs)} difference(s), first: " + "; ".join(diffs[:5])


def test_differences_sees_a_moved_number_and_skips_measured_keys():
    base = {"a": 1.0, "b": [1, 2], "planning_s": 0.5, "c": {"d": "x"}}
    assert golden.differences(base, dict(base, planning_s=9.0)) == []
    assert golden.differences(base, dict(base, a=1.0 + 1e-12)) == []
    assert golden.differences(base, dict(base, a=1.0 + 1e-6)) == ["a: 1.0 != 1.000001"]
    assert golden.differences(base, dict(base, b=[1])) == ["b: length 2 != 1"]
    assert golden.differences(base, dict(base, c={"d": "y"})) == ["c.d: 'x' != 'y'"]
    assert golden.differences(base, {k: v for k, v in base.items() if k != "a"}) == ["a: only in golden"]
