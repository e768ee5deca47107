"""Compiles one of the project's C loops outside the install, with the install's compiler flags.

The install builds each optional extension once (setup.py); tests and benchmarks also build
variants -- the VarioPath loop (``variopath_kernel.c``, the default source) with narrower SIMD
paths (``-DVP_NO_AVX512``), an older revision's loop for a before/after in one process, or the
Simlette loop of an extracted tree -- with the same flags, so that a variant computes exactly as
an installed build of its source would.
"""

from __future__ import annotations

import shlex
import subprocess
import sysconfig
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "collectives" / "alltoallv" / "variopath_kernel.c"
# setup.py's UNIX_FLAGS: no FMA contraction, so every build computes the same float64 values
FLAGS = ("-O3", "-ffp-contract=off")


def build_kernel(out: Path, flags: tuple[str, ...] = (), source: Path = SOURCE, timeout_s: float = 120) -> Path | None:
    """``source`` compiled into the shared library ``out`` with setup.py's flags plus ``flags``;
    None where no C compiler (or no Python headers) can build it."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    cmd = [*cc, *FLAGS, "-fPIC", "-shared", f"-I{sysconfig.get_paths()['include']}", *flags, str(source),
           "-o", str(out), "-lm"]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out if done.returncode == 0 else None
