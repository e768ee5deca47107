"""Variant builds of the VarioPath loop use the install's compiler flags and load like it."""

from __future__ import annotations

import ast
import ctypes
from pathlib import Path

import pytest

from collectives.alltoallv.kernel import ABI
from pipelines.kernel_build import FLAGS, build_kernel

ROOT = Path(__file__).resolve().parents[2]


def test_variant_flags_are_the_installs():
    # setup.py's UNIX_FLAGS decide the float64 operations of the installed loop; a variant built
    # with other flags (FMA contraction, say) could plan differently and compare unlike with like
    tree = ast.parse((ROOT / "setup.py").read_text())
    flags = next(ast.literal_eval(node.value) for node in ast.walk(tree)
                 if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "UNIX_FLAGS" for t in node.targets))
    assert tuple(flags) == FLAGS


@pytest.mark.slow  # compiles the whole loop at -O3 (~6 s); the SIMD-variant reference tests build it too
def test_a_variant_build_loads_with_the_sources_interface(tmp_path):
    so = build_kernel(tmp_path / "k.so")
    if so is None:
        pytest.skip("no C compiler for the variant build")
    lib = ctypes.CDLL(str(so))
    lib.vp_abi.restype = ctypes.c_int64
    assert lib.vp_abi() == ABI


def test_a_source_that_does_not_compile_gives_none(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("this is not C\n")
    assert build_kernel(tmp_path / "bad.so", source=bad) is None
