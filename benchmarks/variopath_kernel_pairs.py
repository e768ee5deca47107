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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="git revision whose loop is compared with this tree's")
    ap.add_argument("--nodes", default="1,2", help="R5080-BF3 nodes (8 GPUs each)")
    ap.add_argument("--calls", type=int, default=800, help="calls of each loop, alternated")
    ap.add_argument("--preset", default="variopath")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        built = build_pair(args.before, Path(tmp))
        print(f"VarioPath loop, {args.preset} preset, R5080-BF3, the two builds called alternately {args.calls} times "
              "each on 1 GiB per source, Zipf s=0.6, seed 0 (C call only)")
        for nodes in (int(n) for n in args.nodes.split(",")):
            topo = channel_topology(pcie_cluster(_platform(), nodes))
            cat = build_catalog(topo)
            loops = [bound_loop(loop_of(so), topo, cat, args.preset) for _, so in built]
            demands = [zipf(topo.n_ranks, 2**30, s, seed).astype(np.float64) for s, seed in DEMANDS]
            digests = [plan_digest(b, dp, demands) for b, dp in loops]
            times = pairs(loops, demands[0], args.calls)
            base = np.array(times[0])
            for (name, _), t, (dig, acts) in zip(built, times, digests):
                ratio = statistics.median(np.array(t) / base)
                print(f"  {topo.n_ranks:>3} GPUs {name:>22}: median {statistics.median(t) * 1e6:7.1f} us, "
                      f"p10 {np.percentile(t, 10) * 1e6:7.1f} us, {acts} activations, per-pair ratio {ratio:.3f}, "
                      f"plans {dig}")
            print(f"  {topo.n_ranks:>3} GPUs same plans on {len(DEMANDS)} demands: {len({d for d, _ in digests}) == 1}")


if __name__ == "__main__":
    main()
