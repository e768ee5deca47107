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


def _build(flags: tuple[str, ...], out: Path) -> Path | None:
    """variopath_kernel.c compiled as setup.py does, plus ``flags``; None without a C compiler."""
    from pipelines.kernel_build import build_kernel

    return build_kernel(out, flags)


@pytest.mark.slow
@pytest.mark.parametrize("flags", [("-DVP_NO_AVX512",), ("-DVP_NO_AVX512", "-DVP_NO_AVX2"),
                                   ("-U__SSE2__", "-DVP_NO_AVX512", "-DVP_NO_AVX2"), ("-DVP_NO_LANE_TERMS",)],
                         ids=["avx2", "sse2", "generic-c", "no-lane-terms"])
def test_the_narrower_simd_paths_plan_the_same(flags, tmp_path, monkeypatch):
    # the loop picks AVX-512 / AVX2 / SSE2 variants at run time; builds kept off the wider ones
    # (and one without the SSE2 intrinsics, the path of other CPUs) must give the same digests;
    # so must a build whose EVALUATE never reads the lane-term tables (the direct lane terms)
    import ctypes

    from collectives.alltoallv import kernel as K
    from variopath_reference_cases import digest, planner
    from collectives.alltoallv.workloads import zipf

    so = _build(flags, tmp_path / "k.so")
    if so is None:
        pytest.skip("no C compiler for the variant build")
    lib = ctypes.CDLL(str(so))
    fn = lib.vp_plan_packed
    fn.restype, fn.argtypes = ctypes.c_int64, [ctypes.POINTER(ctypes.c_void_p)]
    monkeypatch.setitem(K._LOADED, K.MODULE, K.Kernel(fn))
    for case in (c for c in cases() if not c["slow"]):
        p = planner.__wrapped__(case["preset"], case["platform"], case["nodes"])  # a fresh planner: this build
        s = p.plan(zipf(p.N, case["bytes"], case["skew"], case["seed"]))
        assert digest(s) == REFERENCE[case["name"]]["digest"], case["name"]
