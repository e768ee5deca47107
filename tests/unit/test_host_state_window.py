"""The buffer-size probes of ``benchmarks/host_state.py --window``: the pointer ring is one cycle
through every line, the knee is the first doubling, and the generated C runs."""

from __future__ import annotations

import ctypes
import platform
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import host_state  # noqa: E402

from pipelines.kernel_build import build_kernel  # noqa: E402


def test_the_chase_ring_is_one_cycle_through_every_line_and_the_two_starts_are_half_a_ring_apart():
    ring, a, b = host_state.chase_ring(64 << 10, seed=3)
    base, lines = ring.ctypes.data, (64 << 10) // 64
    seen, p, steps_to_b = set(), a, None
    for step in range(lines):
        offset = p - base
        assert offset % 64 == 0 and 0 <= offset < lines * 64
        seen.add(offset // 64)
        if p == b:
            steps_to_b = step
        p = int(ring[offset // 8])
    assert p == a and len(seen) == lines  # back at the start after visiting every line once
    assert steps_to_b == lines // 2


def test_the_knee_is_the_first_size_that_costs_half_again_the_smallest():
    assert host_state.knee((16, 48, 96, 144), [100.0, 120.0, 149.0, 210.0]) == "96-144"
    assert host_state.knee((16, 48, 96), [100.0, 110.0, 140.0]) == "> 96"


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the probes are x86-64 assembly")
def test_the_generated_probes_compile_and_chase_the_ring(tmp_path):
    src = tmp_path / "window.c"
    src.write_text(host_state.window_source())
    so = build_kernel(tmp_path / "window.so", source=src)
    if so is None:
        pytest.skip("no C compiler")
    lib = ctypes.CDLL(str(so))
    ring, a, b = host_state.chase_ring(64 << 10)
    scratch = np.zeros(8, dtype=np.int64)
    for name in (f"nops_{host_state.WINDOW_NOPS[0]}", f"stores_{host_state.WINDOW_STORES[-1]}"):
        fn = getattr(lib, name)
        fn.restype = ctypes.c_double
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p]
        pa, pb = ctypes.c_void_p(a), ctypes.c_void_p(b)
        assert fn(ctypes.byref(pa), ctypes.byref(pb), 1024, scratch.ctypes.data) > 0
        # 1024 steps along the 1024-line ring: both chains are back where they started
        assert (pa.value, pb.value) == (a, b)
