"""What moves when a shared host slows the VarioPath planning loop: simple probes beside it.

On the project's 2-core guests the compiled VarioPath loop (the 16-GPU case of ``gx alltoallv
platform=r5080_bf3 nodes=2 workload=zipf workload.bytes_per_rank=1GiB scheduler=variopath``)
runs ≈ 290 µs in one minute and 1.5-2x that in the next. This script calls the loop and a set of
small C probes in turn, in one process, for ``--seconds``, and compares the probes in the loop's
slowest quartile of calls with its fastest: a probe that slows as much as the loop shares its
cause. Probes: a latency-bound integer chain (the clock), eight independent float chains
(arithmetic throughput), a pointer chase through 1 MiB (L2 latency), unpredictable branches,
reads of 64 KiB / 1 MiB / 16 MiB and a 1 MiB write (bandwidth of each level).

``--sibling`` instead alternates runs of the loop alone with runs beside a busy process pinned
to the other CPU (an integer spin, or a 1 MiB / 16 MiB stream): whether our own second vCPU is
what slows it.

``--window`` measures how much of the core's out-of-order machinery this vCPU has, beside the
loop: two independent pointer chases through 64 MiB (cache misses) with N no-ops (or N stores)
after each load. While both misses fit in the reorder buffer (the store buffer) together they
overlap and an iteration costs about one miss; past its size they serialize and the cost jumps.
Intel cores split both buffers in half while the sibling hyperthread runs, so the knee moving
from N ≈ size to N ≈ size / 2 in the loop's slow rounds says another thread shares the physical
core. x86-64 only.

    .venv/bin/python benchmarks/host_state.py [--seconds 90]
    .venv/bin/python benchmarks/host_state.py --sibling [--rounds 8]
    .venv/bin/python benchmarks/host_state.py --window [--seconds 60]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import shlex
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

from collectives.alltoallv.catalog import build_catalog
from collectives.alltoallv.kernel import load_kernel
from collectives.alltoallv.workloads import zipf
from fabrics.pcie.paths import channel_topology
from pipelines.kernel_build import build_kernel
from pipelines.network import pcie_cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alltoallv_planning import _platform  # noqa: E402
from variopath_kernel_pairs import bound_loop, quartile_medians  # noqa: E402

PROBES_C = r"""
#include <stdint.h>
#include <stdlib.h>
uint64_t alu_chain(long n) { uint64_t x = 1; for (long i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL; return x; }
double float_chains(long n) { double a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (long i = 0; i < n; i++) for (int k = 0; k < 8; k++) a[k] = a[k] * 0.9999999 + 1e-9; return a[0] + a[7]; }
static uint64_t *ring = 0;
void chase_init(long bytes) { long n = bytes / 8; uint64_t *p = malloc(n * 8); ring = malloc(n * 8);
    for (long i = 0; i < n; i++) p[i] = i;
    srand(1); for (long i = n - 1; i > 0; i--) { long j = rand() % (i + 1); uint64_t t = p[i]; p[i] = p[j]; p[j] = t; }
    for (long i = 0; i < n; i++) ring[p[i]] = p[(i + 1) % n]; free(p); }
uint64_t chase(long n) { uint64_t c = 0; for (long i = 0; i < n; i++) c = ring[c]; return c; }
uint64_t branches(long n) { uint64_t x = 88172645463325252ULL, s = 0;
    for (long i = 0; i < n; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; if (x & 1) s += x; else s ^= x; } return s; }
double read_buf(const double *b, long n, int reps) { double s = 0; for (int r = 0; r < reps; r++) for (long i = 0; i < n; i++) s += b[i]; return s; }
void write_buf(double *b, long n) { for (long i = 0; i < n; i++) b[i] = i * 0.5; }
"""
# a busy process for --sibling: an integer spin, or a loop streaming through a buffer of argv[1] bytes
SIBLING_C = r"""
#include <stdlib.h>
int main(int argc, char **argv) { long n = argc > 1 ? atol(argv[1]) / 8 : 0;
    if (n == 0) { volatile unsigned long x = 1; for (;;) x = x * 6364136223846793005UL + 1; }
    volatile double *b = malloc(n * 8); for (long i = 0; i < n; i++) b[i] = i;
    double s = 0; for (;;) for (long i = 0; i < n; i += 8) { s += b[i]; b[i] = s; } }
"""


def planning_loop():
    """The compiled loop bound to the 16-GPU planner, and a call of it on the `gx alltoallv` demand."""
    kernel = load_kernel()
    if kernel is None:
        sys.exit("error: the compiled VarioPath loop is not built (pip install -e .)")
    topo = channel_topology(pcie_cluster(_platform(), 2))
    bound, dp = bound_loop(kernel, topo, build_catalog(topo), "variopath")
    demand = zipf(topo.n_ranks, 2**30, 0.6, 0).astype(np.float64)
    return lambda: bound(dp.copy(), demand.copy())


def timed_us(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1e6


def probes(tmp: Path, seconds: float) -> None:
    src = tmp / "probes.c"
    src.write_text(PROBES_C)
    so = build_kernel(tmp / "probes.so", source=src)
    if so is None:
        sys.exit("error: could not compile the probes (a C compiler is needed)")
    lib = ctypes.CDLL(str(so))
    lib.chase_init(ctypes.c_long(1 << 20))
    for name in ("read_buf", "write_buf"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_long] + ([ctypes.c_int] if name == "read_buf" else [])
    bufs = {k: np.ones(k // 8) for k in (64 << 10, 1 << 20, 16 << 20)}
    plan = planning_loop()
    tests = {
        "integer chain": lambda: lib.alu_chain(ctypes.c_long(100_000)),
        "8 float chains": lambda: lib.float_chains(ctypes.c_long(20_000)),
        "chase 1 MiB": lambda: lib.chase(ctypes.c_long(30_000)),
        "branches": lambda: lib.branches(ctypes.c_long(100_000)),
        "read 64 KiB x 20": lambda: lib.read_buf(bufs[64 << 10].ctypes.data, 8192, 20),
        "read 1 MiB x 2": lambda: lib.read_buf(bufs[1 << 20].ctypes.data, 131072, 2),
        "write 1 MiB": lambda: lib.write_buf(bufs[1 << 20].ctypes.data, 131072),
        "read 16 MiB": lambda: lib.read_buf(bufs[16 << 20].ctypes.data, 2 << 20, 1),
    }
    rows = []
    end = time.time() + seconds
    while time.time() < end:
        rows.append([timed_us(plan)] + [timed_us(t) for t in tests.values()])
    a = np.array(rows)
    fast, slow = quartile_medians(a[:, 0], a)
    print(f"{len(a)} rounds in {seconds:.0f} s; medians in the loop's fastest and slowest quartile of rounds (us)")
    print(f"{'':>20} {'fast':>9} {'slow':>9} {'slow/fast':>9}")
    for i, name in enumerate(["VarioPath loop", *tests]):
        print(f"{name:>20} {fast[i]:9.1f} {slow[i]:9.1f} {slow[i] / fast[i]:9.2f}")


def sibling(tmp: Path, rounds: int, seconds: float) -> None:
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        sys.exit("error: --sibling needs Linux and two CPUs")
    src = tmp / "busy.c"
    src.write_text(SIBLING_C)
    exe = tmp / "busy"
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if subprocess.run([*cc, "-O2", str(src), "-o", str(exe)], capture_output=True).returncode:
        sys.exit("error: could not compile the busy process (a C compiler is needed)")
    cpu, other = sorted(os.sched_getaffinity(0))[:2]
    os.sched_setaffinity(0, {cpu})
    plan = planning_loop()
    modes = {"alone": None, "integer spin": "0", "1 MiB stream": str(1 << 20), "16 MiB stream": str(16 << 20)}
    print(f"the loop on CPU {cpu}, the busy process on CPU {other}; median us of {seconds} s per run, "
          f"modes in turn, {rounds} rounds")
    print("round " + " ".join(f"{m:>14}" for m in modes))
    for r in range(rounds):
        row = []
        for arg in modes.values():
            busy = None
            if arg is not None:
                busy = subprocess.Popen([str(exe), arg], preexec_fn=lambda: os.sched_setaffinity(0, {other}))
                time.sleep(0.2)
            ts, end = [], time.time() + seconds
            while time.time() < end:
                ts.append(timed_us(plan))
            row.append(statistics.median(ts))
            if busy is not None:
                busy.kill()
                busy.wait()
        print(f"{r + 1:>5} " + " ".join(f"{v:14.0f}" for v in row), flush=True)


# --window: no-ops (reorder buffer entries) and stores (store buffer entries) after each of two
# independent missing loads; the sizes bracket Golden Cove's 512 / 114 entries and their halves
WINDOW_NOPS = (16, 48, 96, 144, 192, 240, 288, 336, 400, 480, 560)
WINDOW_STORES = (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 120)
WINDOW_ITERATIONS = 2000


def window_source() -> str:
    """C functions nops_N / stores_N: ns per iteration of the two chases with N fillers after each load."""
    head = ["#include <time.h>",
            "static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); "
            "return t.tv_sec * 1e9 + t.tv_nsec; }"]
    fillers = [("nops", n, "nop", "") for n in WINDOW_NOPS] + \
              [("stores", n, "movq %%rax, (%0)", ' :: "r"(buf) : "memory"') for n in WINDOW_STORES]
    body = []
    for kind, n, op, operands in fillers:
        fill = f'__asm__ volatile(".rept {n}\\n {op}\\n .endr"{operands});'
        body.append(f"double {kind}_{n}(void **pa, void **pb, long it, long *buf) {{ void *a = *pa, *b = *pb; "
                    f"(void)buf; double t0 = now(); for (long i = 0; i < it; i++) {{ a = *(void **)a; {fill} "
                    f"b = *(void **)b; {fill} }} *pa = a; *pb = b; return (now() - t0) / it; }}")
    return "\n".join(head + body) + "\n"


def chase_ring(nbytes: int, seed: int = 1) -> tuple[np.ndarray, int, int]:
    """A random cyclic pointer chain over ``nbytes``, one pointer per 64-byte line; two starts half a ring apart."""
    lines = nbytes // 64
    order = np.random.default_rng(seed).permutation(lines)
    ring = np.zeros(lines * 8, dtype=np.uint64)
    nxt = np.empty(lines, dtype=np.int64)
    nxt[order] = np.roll(order, -1)
    base = ring.ctypes.data
    ring[::8] = base + nxt.astype(np.uint64) * 64
    return ring, base + int(order[0]) * 64, base + int(order[lines // 2]) * 64


def knee(sizes, ns) -> str:
    """The first size whose iteration costs 1.5x the smallest size's, as 'between A and B'."""
    for k in range(1, len(sizes)):
        if ns[k] > 1.5 * ns[0]:
            return f"{sizes[k - 1]}-{sizes[k]}"
    return f"> {sizes[-1]}"


def window(tmp: Path, seconds: float) -> None:
    if platform.machine() not in ("x86_64", "AMD64"):
        sys.exit("error: --window needs an x86-64 CPU (its probes are x86 no-ops and stores)")
    src = tmp / "window.c"
    src.write_text(window_source())
    so = build_kernel(tmp / "window.so", source=src)
    if so is None:
        sys.exit("error: could not compile the window probes (a C compiler is needed)")
    lib = ctypes.CDLL(str(so))
    names = [f"nops_{n}" for n in WINDOW_NOPS] + [f"stores_{n}" for n in WINDOW_STORES]
    fns = [getattr(lib, name) for name in names]
    for fn in fns:
        fn.restype = ctypes.c_double
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p]
    ring, a0, b0 = chase_ring(64 << 20)
    pa, pb = ctypes.c_void_p(a0), ctypes.c_void_p(b0)
    scratch = np.zeros(8, dtype=np.int64)
    plan = planning_loop()
    rows, end = [], time.time() + seconds
    while time.time() < end:
        rows.append([timed_us(plan)] + [fn(ctypes.byref(pa), ctypes.byref(pb), WINDOW_ITERATIONS, scratch.ctypes.data)
                                        for fn in fns])
    a = np.array(rows)
    fast, slow = quartile_medians(a[:, 0], a)
    print(f"{len(a)} rounds in {seconds:.0f} s; the loop {fast[0]:.0f} us in its fastest quartile of rounds, "
          f"{slow[0]:.0f} us in its slowest; ns per iteration (two missing loads, N fillers after each):")
    print(f"{'fillers':>16} {'fast':>8} {'slow':>8}")
    for i, name in enumerate(names):
        print(f"{name.replace('_', ' x '):>16} {fast[i + 1]:8.1f} {slow[i + 1]:8.1f}")
    nops, stores = slice(1, 1 + len(WINDOW_NOPS)), slice(1 + len(WINDOW_NOPS), None)
    print(f"reorder buffer knee (no-ops): fast {knee(WINDOW_NOPS, fast[nops])}, slow {knee(WINDOW_NOPS, slow[nops])}")
    print(f"store buffer knee (stores):   fast {knee(WINDOW_STORES, fast[stores])}, "
          f"slow {knee(WINDOW_STORES, slow[stores])}")
    del ring  # the chains point into it until here


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=90.0, help="probe rounds for this long")
    ap.add_argument("--sibling", action="store_true", help="the loop alone and beside a busy process on the other CPU")
    ap.add_argument("--rounds", type=int, default=8, help="--sibling: rounds of the four modes")
    ap.add_argument("--window", action="store_true", help="the reorder and store buffers this vCPU has, beside the loop")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.sibling:
            sibling(Path(tmp), args.rounds, 1.2)
        elif args.window:
            window(Path(tmp), args.seconds)
        else:
            probes(Path(tmp), args.seconds)


if __name__ == "__main__":
    main()
