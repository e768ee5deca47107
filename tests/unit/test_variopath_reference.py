"""VarioPath's plans equal the reference data recorded before its planning-speed work, exactly.

Every preset on the tuning and held-apart test seeds (tuning.py), the 1 GiB demands of
``gx alltoallv`` at 8, 16 and 32 GPUs and R5080-CX8 x 4 (the online-synthesized family): the
same activations, lane for lane -- sources, destinations, paths and bytes, as a digest
(``variopath_reference_cases.py``). Faster planning must not change a single plan, so the
MILP ratios, goldens and paper-number tests stay where they are.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from variopath_reference_cases import DATA, cases, outputs  # noqa: E402

from collectives.alltoallv.kernel import load_kernel  # noqa: E402

REFERENCE = json.loads(DATA.read_text())


@pytest.mark.skipif(load_kernel() is None, reason="the compiled loop is not built (the reference ran it)")
@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"], marks=[pytest.mark.slow] if c["slow"] else [])
                                  for c in cases()])
def test_plans_equal_the_reference(case):
    assert outputs(case) == REFERENCE[case["name"]]


def test_every_case_has_reference_data():
    assert {c["name"] for c in cases()} == set(REFERENCE)
