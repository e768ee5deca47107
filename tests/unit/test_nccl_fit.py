"""pipelines.fit_nccl: the calibration file's rows and the in-place rewrite of fitted values."""

from __future__ import annotations

import pytest

from collectives.errors import SpecError
from pipelines import fit_nccl


def test_rows_convert_busbw_to_time_as_nccl_tests_defines_it():
    rows = fit_nccl.load_rows()
    first = next(r for r in rows if r.table == "h200_default")
    assert first.size_bytes == 32 * 1024 and first.gpus == 8
    assert first.time_s == pytest.approx(32768 * 2 * 7 / 8 / 3.20e9)  # "32K ≈ 17.9 µs"
    assert first.ran == "ring/ll"  # joined from the NCCL_DEBUG table
    gather = next(r for r in rows if r.table == "h200_16g_allgather")
    assert gather.time_s == pytest.approx(16 * 2**30 * 7 / 8 / 361.4e9)
    gb = next(r for r in rows if r.table == "gb300_64gpu" and r.size_bytes == 16 * 2**30)
    assert gb.time_s == pytest.approx(36350e-6) and gb.ran is None
    assert sum(r.time_s is not None for r in rows) == 100  # 99 nccl-tests rows (graph off) + the CUDA-graph row of NVIDIA/nccl #1259


def test_rewrite_touches_only_marked_lines_and_keeps_comments():
    text = ("generations:\n  g:\n    hop:\n      ll: 0.6us     # fitted (why)\n      simple: 3.4us  # NCCL\n"
            "    other: {ll: 1}\n")
    out = fit_nccl.rewrite_yaml(text, {("g", "hop", "ll"): "0.25us"})
    assert out == ("generations:\n  g:\n    hop:\n      ll: 0.25us    # fitted (why)\n      simple: 3.4us  # NCCL\n"
                   "    other: {ll: 1}\n")
    with pytest.raises(SpecError, match="no '# fitted' / '# tied' line for g.hop.simple"):
        fit_nccl.rewrite_yaml(text, {("g", "hop", "simple"): "1us"})
