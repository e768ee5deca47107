"""The compiled VarioPath decomposition loop (``variopath_kernel.c``), built on first use.

Python/numpy costs ~0.1 ms of call overhead per activation of Algorithm 2 (paper 000,
Section 4.2), which alone misses the issue's planning target (<= 5 % of communication at 16
GPUs); the same loop in C costs microseconds. The shared object is compiled once with the
system C compiler (``cc``/``gcc``, ``FLAGS``) into a cache folder keyed by the hash of the source
and flags (``$GXNET_KERNEL_CACHE``, default ``~/.cache/gxnet``; safe to delete) and loaded with ctypes.
Without a compiler, ``load_kernel()`` returns None and the planner uses its numpy path, which is
the reference implementation (tests check that both give the same activations).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("variopath_kernel.c")
_LOADED: dict[str, object] = {}  # explicit keyed cache: source hash -> loaded library (or None)
FLAGS = ("-O3", "-ffp-contract=off", "-shared", "-fPIC")  # no FMA contraction: same values as numpy


def cache_dir() -> Path:
    return Path(os.environ.get("GXNET_KERNEL_CACHE", Path.home() / ".cache" / "gxnet"))


def load_kernel():
    """The ctypes function ``vp_plan`` or None when no C compiler is available."""
    src = SOURCE.read_bytes()
    key = hashlib.sha256(src + " ".join(FLAGS).encode()).hexdigest()[:16]
    if key in _LOADED:
        return _LOADED[key]
    fn = None
    try:
        out = cache_dir() / f"variopath_kernel-{key}.so"
        if not out.exists():
            cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
            if cc is None:
                raise OSError("no C compiler")
            out.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
                obj = Path(tmp) / out.name
                subprocess.run([cc, *FLAGS, "-o", str(obj), str(SOURCE), "-lm"],
                               check=True, capture_output=True, timeout=120)
                os.replace(obj, out)  # atomic: concurrent builders never load a half-written file
        lib = ctypes.CDLL(str(out))
        fn = lib.vp_plan
        fn.restype = ctypes.c_int64
        fn.argtypes = [ctypes.c_void_p] * 38
    except (OSError, subprocess.SubprocessError):
        fn = None
    _LOADED[key] = fn
    return fn
