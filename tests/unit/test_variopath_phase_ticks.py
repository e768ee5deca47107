"""The phase probes of the compiled VarioPath loop (``-DVP_PHASE_TICKS``, read by
``benchmarks/variopath_kernel_pairs.py --phases``): they count every activation once, in the
phase that made it, and change no plan."""

from __future__ import annotations

import ctypes
import platform
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from variopath_reference_cases import topology  # noqa: E402

from collectives.alltoallv.catalog import build_catalog  # noqa: E402
from collectives.alltoallv.kernel import Kernel, load_kernel  # noqa: E402
from collectives.alltoallv.variopath import VarioPathParams, VarioPathPlanner  # noqa: E402
from collectives.alltoallv.workloads import zipf  # noqa: E402
from pipelines.kernel_build import build_kernel  # noqa: E402

PHASES = 10  # VP_PHASES of variopath_kernel.c
AA, REUSED, WEIGHTS, EVALUATE = 4, 7, 1, 5


def _bound(fn, planner: VarioPathPlanner):
    planner._kernel = (Kernel(fn), planner._kernel_arrays())
    ip, dp = planner._kernel_params(0.0)
    return planner._kernel[0].bind(ip, planner._kernel[1]), dp


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or load_kernel() is None,
                    reason="the probes read x86-64's time-stamp counter; the default loop must be built")
def test_phase_probes_count_every_activation_and_plan_the_same(tmp_path):
    so = build_kernel(tmp_path / "ticks.so", ("-DVP_PHASE_TICKS",))
    if so is None:
        pytest.skip("no C compiler for the probe build")
    lib = ctypes.CDLL(str(so))
    fn = lib.vp_plan_packed
    fn.restype, fn.argtypes = ctypes.c_int64, [ctypes.POINTER(ctypes.c_void_p)]
    topo = topology("r5080_bf3", 1)
    cat = build_catalog(topo)
    demand = zipf(topo.n_ranks, 2**30, 0.6, 0).astype(np.float64)
    probed, dp = _bound(fn, VarioPathPlanner(topo, cat, VarioPathParams()))
    plain_loop, dp0 = _bound(load_kernel().fn, VarioPathPlanner(topo, cat, VarioPathParams()))

    out = (ctypes.c_ulonglong * (2 * PHASES))()
    lib.vp_phase_ticks(out)  # nothing counted yet in this process's copy; reset anyway
    n, status = probed(dp.copy(), demand.copy())
    lib.vp_phase_ticks(out)
    ticks, counts = list(out[:PHASES]), list(out[PHASES:])
    assert status == 1 and n > 0
    # every activation comes from an AA run or a reused channel, counted once
    assert counts[AA] + counts[REUSED] == n
    assert counts[AA] == counts[WEIGHTS] == counts[EVALUATE] > 0 and ticks[AA] > 0
    # the probes only read the counter: the same activations as the default build
    m, _ = plain_loop(dp0.copy(), demand.copy())
    assert m == n
    for name in ("out_x", "out_src", "out_dst", "out_fam"):
        assert np.array_equal(getattr(probed, name)[:n], getattr(plain_loop, name)[:n]), name
