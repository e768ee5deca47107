"""The compiled VarioPath decomposition loop (``variopath_kernel.c``), built when gxnet is installed.

Python/numpy costs ~0.1 ms of call overhead per activation of Algorithm 2 (paper 000,
Section 4.2), which alone misses the planning target (<= 5 % of communication at 16 GPUs); the
same loop in C costs microseconds. ``setup.py`` builds the C file into the extension module
``collectives.alltoallv._variopath_kernel`` (``pip install``, ``pip install -e``, or
``python setup.py build_ext --inplace``) with -O3 and no FMA contraction. The module holds no
Python-level functions: importing it finds the built file, and its C function ``vp_plan`` is
called through ctypes (as ``vp_plan_packed``: its arguments in one array of pointers, filled once
per binding). ctypes passes raw pointers, so this wrapper checks the dtype, size,
C-contiguity and writability of every array before the call; a mismatch raises
``KernelArgumentError`` instead of reading or writing past a buffer.

Without the build, ``load_kernel()`` warns once per process and returns None, and the planner
runs its numpy path, which is the reference implementation (tests check that both give the same
activations).
"""

from __future__ import annotations

import ctypes
import importlib
import warnings
from dataclasses import dataclass

import numpy as np

MODULE = "collectives.alltoallv._variopath_kernel"
ABI = 7  # VP_ABI of variopath_kernel.c: the argument list below
I64, F64, F32 = np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.float32)
_LOADED: dict[str, object] = {}  # explicit keyed cache: module name -> Kernel (or None: not built)

# Integer and float parameter slots, in the order of the I_* and D_* enums of variopath_kernel.c.
INT_PARAMS = ("N", "G", "g", "J", "P", "S", "sweeps", "beam", "reuse", "max_quanta", "weighted", "capped",
              "max_acts", "max_rows", "rank_pressure_on", "dense", "row_budget", "R", "synth", "F", "n_res",
              "pressure_power", "weighted_scores", "K", "warm_starts", "start_patience",
              "shape_candidates", "shape_rescore")
FLOAT_PARAMS = ("tau0", "coarse", "max_rate", "rank_pressure", "pair_pressure", "overhead", "reuse_floor", "node_pressure",
                "k_rounds")  # tau0 <= 0: the loop computes τ (variopath.quantum_s) and writes it back
# The read-only catalog arrays of vp_plan, in its argument order (after ip and dp).
CATALOG_ARRAYS = ("groups", "gof", "col_ptr", "col_shape", "col_val", "col_rate", "dense_val", "dense_rate",
                  "fam_off", "fam_rid", "rates_u", "fam_rate", "fam_in", "start_dst", "perms",
                  "cap_out", "cap_in", "pi_ptr", "pi", "ir_ptr", "ir", "intra_rep", "inst_rate", "inst_rid",
                  "node_of", "node_cap_out", "node_cap_in")
# Catalog rows the loop writes its online-synthesized family into (row F): passed a second time.
WRITTEN_ARRAYS = ("fam_rate", "fam_in", "fam_rid")
N_ARGS = 2 + len(CATALOG_ARRAYS) + len(WRITTEN_ARRAYS) + 2 + 6  # ip, dp, ..., syn/out_inst, rem, outputs


class KernelArgumentError(ValueError):
    """An array handed to the compiled loop has the wrong dtype, size or memory layout."""


def check_array(name: str, a, dtype: np.dtype, size: int, *, exact: bool = True, writable: bool = False) -> None:
    """``a`` must be a C-contiguous numpy array of ``dtype`` with ``size`` elements (at least
    ``size`` unless ``exact``), writable when the loop writes it."""
    if not isinstance(a, np.ndarray):
        raise KernelArgumentError(f"vp_plan argument {name!r} is a {type(a).__name__}; it must be a numpy array")
    if a.dtype != dtype:
        raise KernelArgumentError(f"vp_plan argument {name!r} has dtype {a.dtype}; it must be {dtype}")
    if not a.flags.c_contiguous:
        raise KernelArgumentError(f"vp_plan argument {name!r} (shape {a.shape}) is not C-contiguous; "
                                  "pass np.ascontiguousarray(...)")
    if (a.size != size) if exact else (a.size < size):
        want = f"{size}" if exact else f"at least {size}"
        raise KernelArgumentError(f"vp_plan argument {name!r} has {a.size} elements (shape {a.shape}); "
                                  f"the loop reads {want}")
    if writable and not a.flags.writeable:
        raise KernelArgumentError(f"vp_plan argument {name!r} is read-only; the loop writes it")


def _check_offsets(name: str, ptr: np.ndarray) -> int:
    """A CSR offset array (0, ascending); returns its last entry (the entries it spans)."""
    if ptr[0] != 0 or (np.diff(ptr) < 0).any():
        raise KernelArgumentError(f"vp_plan argument {name!r} must start at 0 and never decrease (CSR offsets)")
    return int(ptr[-1])


def catalog_sizes(ip: dict[str, int], arrays: dict[str, np.ndarray]) -> dict[str, tuple[np.dtype, int, bool]]:
    """(dtype, element count, exact) of every catalog array, as variopath_kernel.c indexes them."""
    N, G, g, J, F = ip["N"], ip["G"], ip["g"], ip["J"], ip["F"]
    GG = G * G
    # the CSR offsets first: the sizes of the arrays they index follow from them
    check_array("col_ptr", arrays["col_ptr"], I64, GG + 1)
    check_array("pi_ptr", arrays["pi_ptr"], I64, GG + 1)
    check_array("fam_off", arrays["fam_off"], I64, J + 1)
    check_array("ir_ptr", arrays["ir_ptr"], I64, 1, exact=False)
    nnz, n_pi = _check_offsets("col_ptr", arrays["col_ptr"]), _check_offsets("pi_ptr", arrays["pi_ptr"])
    n_ir, n_inst = _check_offsets("ir_ptr", arrays["ir_ptr"]), len(arrays["ir_ptr"]) - 1
    if _check_offsets("fam_off", arrays["fam_off"]) != F:
        raise KernelArgumentError(f"vp_plan argument 'fam_off' ends at {arrays['fam_off'][-1]}; the catalog has F = {F} families")
    dense = GG * J if ip["dense"] else 1
    rows = (F + 1) * N  # one extra row: the synthesized family
    return {"groups": (I64, N, True), "gof": (I64, N, True), "col_ptr": (I64, GG + 1, True),
            "col_shape": (I64, nnz, True), "col_val": (F64, nnz, True), "col_rate": (F64, nnz, True),
            "dense_val": (F32, dense, True), "dense_rate": (F64, dense, True), "fam_off": (I64, J + 1, True),
            "fam_rid": (I64, rows, True), "rates_u": (F64, ip["R"], True), "fam_rate": (F64, rows, True),
            "fam_in": (I64, rows, True), "start_dst": (I64, F * ip["S"] * N, True), "perms": (I64, ip["P"] * g, True),
            "cap_out": (F64, G, True), "cap_in": (F64, G, True), "pi_ptr": (I64, GG + 1, True),
            "pi": (I64, n_pi, False), "ir_ptr": (I64, n_inst + 1, True), "ir": (I64, n_ir, False),
            "intra_rep": (I64, G, True), "inst_rate": (F64, n_inst, True), "inst_rid": (I64, n_inst, True),
            "node_of": (I64, N, True), "node_cap_out": (F64, ip["K"], True), "node_cap_in": (F64, ip["K"], True)}


@dataclass(frozen=True, slots=True)
class Kernel:
    """The loaded ``vp_plan``; ``bind`` checks a planner's catalog arrays once."""

    fn: object

    def bind(self, ip: np.ndarray, arrays: dict[str, np.ndarray]) -> "BoundKernel":
        check_array("ip", ip, I64, len(INT_PARAMS))
        params = dict(zip(INT_PARAMS, (int(x) for x in ip)))
        if params["N"] != params["G"] * params["g"] or min(params["N"], params["max_acts"], params["max_rows"]) < 1:
            raise KernelArgumentError(f"vp_plan parameters N={params['N']}, G={params['G']}, g={params['g']}, "
                                      f"max_acts={params['max_acts']}, max_rows={params['max_rows']}: need N = G g "
                                      "and positive buffer sizes")
        missing = set(CATALOG_ARRAYS) - set(arrays)
        if missing:
            raise KernelArgumentError(f"vp_plan is missing catalog arrays {sorted(missing)}")
        for name, (dtype, size, exact) in catalog_sizes(params, arrays).items():
            check_array(name, arrays[name], dtype, size, exact=exact, writable=name in WRITTEN_ARRAYS)
        node_of = arrays["node_of"]
        if params["K"] < 1 or node_of.min() < 0 or node_of.max() >= params["K"]:
            raise KernelArgumentError(f"vp_plan argument 'node_of' must hold node indices 0..K-1 (K = {params['K']})")
        return BoundKernel(self.fn, ip.copy(), params, {k: arrays[k] for k in CATALOG_ARRAYS})


class BoundKernel:
    """``vp_plan`` with checked catalog arrays and its own output buffers (``max_acts`` rows):
    each call checks what changes between calls (the float parameters and the demand)."""

    def __init__(self, fn, ip: np.ndarray, params: dict[str, int], arrays: dict[str, np.ndarray]):
        N, cap = params["N"], params["max_acts"]
        self.fn, self.ip, self.N, self.arrays = fn, ip, N, arrays  # the arrays stay referenced: pointers stay valid
        self.syn_inst = np.zeros(N, dtype=np.int64)
        self.out_inst = np.empty((cap, N), dtype=np.int64)
        self.out_x = np.empty((cap, N))
        self.out_src = np.empty((cap, N), dtype=np.int64)
        self.out_dst = np.empty((cap, N), dtype=np.int64)
        self.out_fam = np.empty(cap, dtype=np.int64)
        self.status = np.zeros(1, dtype=np.int64)
        ptr = lambda a: a.ctypes.data  # noqa: E731
        self._head = [ptr(self.ip)]
        self._tail = ([ptr(arrays[k]) for k in CATALOG_ARRAYS] + [ptr(arrays[k]) for k in WRITTEN_ARRAYS]
                      + [ptr(self.syn_inst), ptr(self.out_inst)])
        self._out = [ptr(a) for a in (self.out_x, self.out_src, self.out_dst, self.out_fam, self.status)]
        assert len(self._head) + 1 + len(self._tail) + 1 + len(self._out) == N_ARGS
        # vp_plan_packed takes the arguments as one array of pointers: filled once, only the dp and
        # rem slots change between calls (one argument for ctypes to convert instead of N_ARGS)
        self._dp_slot, self._rem_slot = len(self._head), len(self._head) + 1 + len(self._tail)
        self._args = (ctypes.c_void_p * N_ARGS)(*self._head, 0, *self._tail, 0, *self._out)

    def __call__(self, dp: np.ndarray, rem: np.ndarray) -> tuple[int, int]:
        """Runs the loop on the remaining demand ``rem`` (N x N float64, drained in place) with the
        float parameters ``dp`` (a τ0 <= 0 is computed by the loop and written back into dp[0]);
        returns (activations written to the out_* buffers, status: 1 drained, 0 no candidate,
        2 buffers full)."""
        check_array("dp", dp, F64, len(FLOAT_PARAMS), writable=True)
        check_array("rem", rem, F64, self.N * self.N, writable=True)
        self._args[self._dp_slot], self._args[self._rem_slot] = dp.ctypes.data, rem.ctypes.data
        n = self.fn(self._args)
        return int(n), int(self.status[0])


def load_kernel(module: str = MODULE) -> Kernel | None:
    """The compiled loop, or None (one warning per process) when the extension was not built."""
    if module in _LOADED:
        return _LOADED[module]
    try:
        lib = ctypes.CDLL(importlib.import_module(module).__file__)
        lib.vp_abi.restype = ctypes.c_int64
        if lib.vp_abi() != ABI:  # built from older sources: another argument list
            raise ImportError(f"stale build (interface {lib.vp_abi()}, the sources need {ABI}); rebuild it")
        fn = lib.vp_plan_packed  # vp_plan's N_ARGS arguments as one array of pointers
        fn.restype = ctypes.c_int64
        fn.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        kernel = Kernel(fn)
    except (ImportError, OSError, AttributeError) as e:
        warnings.warn(f"the compiled VarioPath planning loop ({module}) is not built ({e}); planning runs the "
                      "numpy loop (~10x slower per activation). Build it with `pip install -e .` or "
                      "`python setup.py build_ext --inplace` (needs a C compiler and Python headers).",
                      RuntimeWarning, stacklevel=2)
        kernel = None
    _LOADED[module] = kernel
    return kernel
