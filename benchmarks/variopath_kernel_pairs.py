"""The compiled VarioPath loop of two revisions, call by call in one process: plans and speed.

A 2-core guest's speed drifts by up to 2x within minutes (docs/benchmarks.md), more than a change
to the planning loop moves it, so timings taken in separate processes, or even in alternating
blocks, compare host states as much as code. Here both loops -- this tree's
``collectives/alltoallv/variopath_kernel.c`` and the one at ``--before REV`` -- are compiled with
setup.py's flags (pipelines.kernel_build), bound to the same planner tables, checked to give the
same activations on several demands (Zipf s = 0.6 and 1.0, three seeds each: a digest per loop),
and then called alternately on the issue's demand (1 GiB per source, Zipf s = 0.6, seed 0): each
pair of calls sees the same host state, and the median of the per-pair ratios is the change's
effect. Only the C call is timed (no Python lane objects). The absolute medians are a little
above a steady ``gx alltoallv`` plan's kernel time, since two loops share the caches.

    .venv/bin/python benchmarks/variopath_kernel_pairs.py --before HEAD~1 [--nodes 1,2] [--calls 800]

``--variant NAME=FLAGS`` (repeatable; FLAGS comma-separated) compares builds of this tree's loop
with extra compiler flags against the default build the same way, e.g. the SIMD widths
(``avx2=-DVP_NO_AVX512``, ``sse2=-DVP_NO_AVX512,-DVP_NO_AVX2``) or ``native=-march=native``;
``--windows K`` also prints the medians of every K consecutive pairs (how a slow state of the
host moves each build). ``--phases`` builds the loop with ``-DVP_PHASE_TICKS`` and prints where a
plan's time-stamp-counter ticks go, phase by phase, and how each phase differs between the
fastest and the slowest quartile of plans:

    .venv/bin/python benchmarks/variopath_kernel_pairs.py --variant avx2=-DVP_NO_AVX512 --nodes 2 --windows 300
    .venv/bin/python benchmarks/variopath_kernel_pairs.py --phases --nodes 2
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from collectives.alltoallv.catalog import build_catalog
from collectives.alltoallv.kernel import Kernel
from collectives.alltoallv.variopath import VarioPathParams, VarioPathPlanner
from collectives.alltoallv.workloads import zipf
from fabrics.pcie.paths import channel_topology
from pipelines.kernel_build import SOURCE, build_kernel
from pipelines.network import pcie_cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alltoallv_planning import _platform, preset  # noqa: E402

DEMANDS = [(s, seed) for s in (0.6, 1.0) for seed in range(3)]  # the plans compared


def loop_of(so: Path) -> Kernel:
    fn = ctypes.CDLL(str(so)).vp_plan_packed
    fn.restype, fn.argtypes = ctypes.c_int64, [ctypes.POINTER(ctypes.c_void_p)]
    return Kernel(fn)


def bound_loop(kernel: Kernel, topo, cat, preset_name: str):
    """The loop bound to a fresh planner's tables, and its float parameters."""
    p = VarioPathPlanner(topo, cat, VarioPathParams(**preset(preset_name)))
    p._kernel = (kernel, p._kernel_arrays())
    ip, dp = p._kernel_params(0.0)
    return kernel.bind(ip, p._kernel[1]), dp


def plan_digest(bound, dp, demands) -> tuple[str, int]:
    """A digest of every activation the loop writes for each demand, and the first one's count."""
    h, first = hashlib.sha256(), None
    for d in demands:
        n, status = bound(dp.copy(), d.copy())
        first = n if first is None else first
        for a in (bound.out_x[:n], bound.out_src[:n], bound.out_dst[:n], bound.out_fam[:n]):
            h.update(a.tobytes())
        h.update(f"{n} {status}".encode())
    return h.hexdigest()[:16], first


def pairs(loops, demand, calls: int) -> list[list[float]]:
    """Seconds per call of each loop, the loops called in turn ``calls`` times."""
    times = [[] for _ in loops]
    for _ in range(calls):
        for t, (bound, dp) in zip(times, loops):
            rem, dpp = demand.copy(), dp.copy()
            t0 = time.perf_counter()
            bound(dpp, rem)
            t.append(time.perf_counter() - t0)
    return times


def quartile_medians(key: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column medians of ``rows`` over the rows whose ``key`` (a time) lies in its fastest quartile,
    and over those in its slowest: what a host's slow state moves beside the timed thing."""
    fast_cut, slow_cut = np.quantile(key, [0.25, 0.75])
    return np.median(rows[key <= fast_cut], axis=0), np.median(rows[key >= slow_cut], axis=0)


# vp_plan's phases under -DVP_PHASE_TICKS (VP_TICK(k) in variopath_kernel.c), in k order
PHASES = ("reuse attempt failed or none", "weights and credits", "shape scores and beam", "rows' starts",
          "Alternating Algorithm", "EVALUATE", "draining, bookkeeping", "reused activation", "tau",
          "pressure terms")


def build_pair(before: str, tmp: Path) -> list[tuple[str, Path]]:
    old_src = tmp / "before.c"
    rel = SOURCE.relative_to(SOURCE.parents[2])
    old_src.write_bytes(subprocess.run(["git", "show", f"{before}:{rel.as_posix()}"], cwd=SOURCE.parents[2],
                                       check=True, capture_output=True).stdout)
    built = []
    for name, src in ((f"before ({before})", old_src), ("this tree", SOURCE)):
        so = build_kernel(tmp / f"{len(built)}.so", source=src)
        if so is None:
            sys.exit(f"error: could not compile {src} (a C compiler and Python headers are needed)")
        built.append((name, so))
    return built


def build_variants(variants: list[str], tmp: Path) -> list[tuple[str, Path]]:
    """This tree's loop: the default build, then one per ``NAME=FLAG[,FLAG...]``."""
    built = []
    for name, flags in [("default", "")] + [v.split("=", 1) if "=" in v else (v, v) for v in variants]:
        so = build_kernel(tmp / f"{len(built)}.so", flags=tuple(f for f in flags.split(",") if f))
        if so is None:
            sys.exit(f"error: could not compile {SOURCE} with {flags!r} (a C compiler and Python headers are needed)")
        built.append((name, so))
    return built


def phase_ticks(tmp: Path, topo, cat, preset_name: str, demand, calls: int) -> None:
    """Where the loop's ticks go: the -DVP_PHASE_TICKS build, ``calls`` plans of ``demand``, read
    plan by plan; each phase also in the fastest and the slowest quartile of plans (by wall time),
    which says what a slow state of the host moves."""
    so = build_kernel(tmp / "ticks.so", flags=("-DVP_PHASE_TICKS",))
    if so is None:
        sys.exit(f"error: could not compile {SOURCE} with -DVP_PHASE_TICKS")
    lib = ctypes.CDLL(str(so))
    if not hasattr(lib, "vp_phase_ticks"):
        sys.exit("error: this host's build has no phase probes (they need x86-64's time-stamp counter)")
    n = len(PHASES)
    out = (ctypes.c_ulonglong * (2 * n))()
    bound, dp = bound_loop(loop_of(so), topo, cat, preset_name)
    bound(dp.copy(), demand.copy())
    lib.vp_phase_ticks(out)  # reset after a warm-up plan
    ticks, counts, wall = np.zeros((calls, n)), np.zeros(n), np.zeros(calls)
    for c in range(calls):
        d, rem = dp.copy(), demand.copy()
        t0 = time.perf_counter()
        bound(d, rem)
        wall[c] = time.perf_counter() - t0
        lib.vp_phase_ticks(out)
        ticks[c] = out[:n]
        counts += out[n:]
    total = ticks.sum(axis=1)
    fast, slow = quartile_medians(wall, ticks)
    wall_fast, wall_slow = quartile_medians(wall, wall)
    extra = slow.sum() - fast.sum()
    print(f"  {topo.n_ranks} GPUs: {total.mean() / 1e3:.1f} k ticks per plan ({calls} plans); by phase, and the "
          f"medians of the fastest / slowest quartile of plans ({wall_fast * 1e6:.0f} / {wall_slow * 1e6:.0f} us):")
    print(f"    {'phase':<28} {'share':>7} {'per plan':>8} {'ticks each':>10} {'fast k':>7} {'slow k':>7} "
          f"{'slow/fast':>9} {'of the gap':>10}")
    for k in sorted(range(n), key=lambda k: -ticks[:, k].sum()):
        gap = f"{(slow[k] - fast[k]) / extra * 100:9.1f}%" if extra > 0 else f"{'-':>10}"
        print(f"    {PHASES[k]:<28} {ticks[:, k].sum() / total.sum() * 100:6.1f}% {counts[k] / calls:8.1f} "
              f"{ticks[:, k].sum() / max(1, counts[k]):10.0f} {fast[k] / 1e3:7.1f} {slow[k] / 1e3:7.1f} "
              f"{slow[k] / max(fast[k], 1.0):9.2f} {gap}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="git revision whose loop is compared with this tree's")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=FLAGS",
                    help="this tree's loop built with extra compiler flags (comma-separated), against the default build")
    ap.add_argument("--phases", action="store_true", help="ticks per phase of the loop (a -DVP_PHASE_TICKS build)")
    ap.add_argument("--nodes", default="1,2", help="R5080-BF3 nodes (8 GPUs each)")
    ap.add_argument("--calls", type=int, default=800, help="calls of each loop, alternated")
    ap.add_argument("--windows", type=int, default=0, metavar="K", help="also the medians of every K pairs")
    ap.add_argument("--preset", default="variopath")
    args = ap.parse_args()
    if not (args.before or args.variant or args.phases):
        ap.error("give --before REV, --variant NAME=FLAGS or --phases")
    with tempfile.TemporaryDirectory() as tmp:
        built = []
        if args.before:
            built = build_pair(args.before, Path(tmp))
        elif args.variant:
            built = build_variants(args.variant, Path(tmp))
        print(f"VarioPath loop, {args.preset} preset, R5080-BF3, 1 GiB per source, Zipf s=0.6, seed 0 (C call only)"
              + (f"; the builds called alternately {args.calls} times each" if built else ""))
        for nodes in (int(n) for n in args.nodes.split(",")):
            topo = channel_topology(pcie_cluster(_platform(), nodes))
            cat = build_catalog(topo)
            demands = [zipf(topo.n_ranks, 2**30, s, seed).astype(np.float64) for s, seed in DEMANDS]
            if args.phases:
                phase_ticks(Path(tmp), topo, cat, args.preset, demands[0], args.calls)
            if built:
                compare(built, topo, cat, args.preset, demands, args.calls, args.windows)


def compare(built, topo, cat, preset_name: str, demands, calls: int, windows: int) -> None:
    loops = [bound_loop(loop_of(so), topo, cat, preset_name) for _, so in built]
    digests = [plan_digest(b, dp, demands) for b, dp in loops]
    times = pairs(loops, demands[0], calls)
    base = np.array(times[0])
    for (name, _), t, (dig, acts) in zip(built, times, digests):
        ratio = statistics.median(np.array(t) / base)
        print(f"  {topo.n_ranks:>3} GPUs {name:>22}: median {statistics.median(t) * 1e6:7.1f} us, "
              f"p10 {np.percentile(t, 10) * 1e6:7.1f} us, {acts} activations, per-pair ratio {ratio:.3f}, "
              f"plans {dig}")
    print(f"  {topo.n_ranks:>3} GPUs same plans on {len(DEMANDS)} demands: {len({d for d, _ in digests}) == 1}")
    if windows:
        print(f"  medians of every {windows} pairs (us): " + " | ".join(name for name, _ in built))
        for w in range(0, calls - windows + 1, windows):
            print("    " + " ".join(f"{statistics.median(t[w:w + windows]) * 1e6:7.0f}" for t in times))


if __name__ == "__main__":
    main()
