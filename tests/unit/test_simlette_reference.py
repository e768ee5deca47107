"""Simlette's outputs equal the reference data recorded before its speed work, exactly.

Both modes, on every scale-up fabric kind (single_eps, all_eps, single_ocs fixed and planned,
hybrid, all_ocs), unlimited and finite buffers, write responses on and off, concurrent calls and
the episode cache (``simlette_reference_cases.py``): completion times, the schedule, the last credit
return and every used link's bytes, busy and stall time (as a digest of their exact values) must
be bit-identical. The engine keeps SimPy's event order (time, priority, insertion count) and the
float expressions of every port step, so nothing may move by even one ulp. The event count is
not compared: reducing it is the point of the speed work. The 256-accelerator paper case is slow.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simlette_reference_cases import DATA, cases, multi_call_cases, multi_call_outputs, outputs  # noqa: E402

REFERENCE = json.loads(DATA.read_text())
NOT_COMPARED = ("events",)


def _same(got: dict, want: dict) -> None:
    for key in want:
        if key not in NOT_COMPARED:
            assert got[key] == want[key], key


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"], marks=[pytest.mark.slow] if c["slow"] else [])
                                  for c in cases()])
def test_outputs_equal_the_reference(case):
    _same(outputs(case), REFERENCE[case["name"]])


@pytest.mark.parametrize("name,mode,buffer_bytes", multi_call_cases())
def test_concurrent_calls_equal_the_reference(name, mode, buffer_bytes):
    _same(multi_call_outputs(mode, buffer_bytes), REFERENCE[name])
