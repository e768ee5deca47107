"""collectives/alltoallv/kernel.py + variopath_kernel.c: the compiled decomposition loop (built by setup.py).

The C loop is a port of the numpy path (the reference): credits, scores and bindings are the
same float64 values in both, so the schedules must move the same bytes between the same pairs
activation for activation, and take the same time. (Exact ties in utility between equivalent
channels -- the same lanes in another order, or a non-bottleneck lane on another path of no
lower rate -- may be broken differently: numpy's pairwise sums and C's sequential sums round
differently, so lane order and such paths are not compared.)
"""

from pathlib import Path

import numpy as np
import pytest
import yaml

from collectives.alltoallv.catalog import build_catalog
from collectives.alltoallv.kernel import load_kernel
from collectives.alltoallv.validity import check_schedule
from collectives.alltoallv.variopath import VarioPathParams, VarioPathPlanner, _rows
from collectives.alltoallv.workloads import moe, zipf
from collectives.errors import SpecError
from fabrics.pcie.evaluator import evaluate
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster

CONF = Path(__file__).resolve().parents[2] / "conf" / "platform"
needs_cc = pytest.mark.skipif(load_kernel() is None, reason="the compiled loop is not built: the numpy path is used")


def topo(name, nodes):
    return channel_topology(pcie_cluster(yaml.safe_load((CONF / f"{name}.yaml").read_text()), nodes))


def lanes(s):
    return [sorted((l.src, l.dst, l.bytes) for l in a.lanes) for a in s.activations]


VARIANTS = [dict(), dict(shape_beam=1, n_start=1, aa_sweeps=3), dict(shape_beam=3, n_start=4, aa_sweeps=4),
            dict(coarse_rounds_per_rank=0, k_target_per_rank=3.0), dict(max_quanta=4),
            dict(rank_pressure=0.0, weighted_utility=False), dict(max_aa_rows=8), dict(overhead_s=1e-6),
            # the previous default (warm starts and shape candidates off), early stop of starts with
            # one sweep (the compiled loop sweeps start by start) and with two, more memory and a
            # short candidate list rescored often
            dict(n_start=10, aa_sweeps=1, warm_starts=0, shape_candidates=0), dict(start_patience=2, n_start=6, aa_sweeps=1),
            dict(start_patience=1, n_start=5), dict(warm_starts=3, n_start=5, shape_candidates=3, shape_rescore=2)]
# Fractional sums decide these (capped scores min(τ bw, D̂); long reuse chains compare weighted
# utilities against a floor), so rounding may pick another, near-equal shape or channel.
NEAR_VARIANTS = [dict(shape_score="capped"), dict(reuse=4, reuse_floor=0.5)]


@needs_cc
@pytest.mark.parametrize("name, nodes", [("r5080_bf3", 1), ("r5080_bf3", 2), ("r5080_cx8", 1), ("fig1", 1)])
@pytest.mark.parametrize("params", VARIANTS)
def test_compiled_loop_gives_the_numpy_schedule(name, nodes, params):
    t = topo(name, nodes)
    cat = build_catalog(t)
    c = VarioPathPlanner(t, cat, VarioPathParams(kernel="c", **params))
    n = VarioPathPlanner(t, cat, VarioPathParams(kernel="numpy", **params))
    for d in (zipf(t.n_ranks, 8 * 2**20, 0.7, 1), moe(t.n_ranks, 64, seed=5)):
        sc, sn = c.plan(d), n.plan(d)
        assert sc.meta["kernel"] == "c" and sn.meta["kernel"] == "numpy"
        assert lanes(sc) == lanes(sn)
        assert check_schedule(sc, t).valid
        assert evaluate(sc, t.capacity_Bps).completion_s == pytest.approx(evaluate(sn, t.capacity_Bps).completion_s, rel=1e-9)


@needs_cc
def test_sparse_demands_fall_back_to_numpy_for_stuck_steps_and_still_drain():
    t = topo("r5080_bf3", 2)
    p = VarioPathPlanner(t, build_catalog(t), VarioPathParams(kernel="c"))
    d = np.zeros((16, 16), dtype=np.int64)
    d[3, 12], d[12, 3], d[0, 1] = 123457, 99, 5 * 2**20
    s = p.plan(d)
    assert check_schedule(s, t).valid and s.meta["kernel"] == "c"


@needs_cc
def test_compiled_loop_is_much_cheaper_per_activation():
    t = topo("r5080_bf3", 2)
    cat = build_catalog(t)
    d = zipf(16, 2**30, 0.6, 0)
    cpu = {}
    for k in ("c", "numpy"):
        p = VarioPathPlanner(t, cat, VarioPathParams(kernel=k))
        p.plan(d)  # build the flat arrays / warm numpy
        cpu[k] = min(p.plan(d).meta["planning_cpu_s"] for _ in range(3))
    assert cpu["c"] * 3 < cpu["numpy"], cpu


def test_kernel_c_requires_enumerable_groups():
    t = topo("r5080_bf3", 1)
    p = VarioPathPlanner(t, build_catalog(t), VarioPathParams(kernel="c", assignment="lsa"))
    with pytest.raises(SpecError, match="kernel=c"):
        p.plan(zipf(8, 2**20, 0.6, 0))
    with pytest.raises(SpecError, match="kernel"):
        VarioPathParams(kernel="fortran")


def test_a_missing_build_warns_once_and_returns_none(monkeypatch):
    import collectives.alltoallv.kernel as k

    monkeypatch.setattr(k, "_LOADED", {})
    with pytest.warns(RuntimeWarning, match="not built.*numpy") as record:
        assert k.load_kernel("collectives.alltoallv._no_such_kernel") is None
        assert k.load_kernel("collectives.alltoallv._no_such_kernel") is None
    assert len(record) == 1


@needs_cc
def test_the_numpy_fallback_gives_the_compiled_schedule(monkeypatch):
    import collectives.alltoallv.kernel as k

    t = topo("r5080_bf3", 2)
    cat = build_catalog(t)
    d = zipf(t.n_ranks, 8 * 2**20, 0.7, 1)
    compiled = VarioPathPlanner(t, cat, VarioPathParams(kernel="c")).plan(d)
    monkeypatch.setitem(k._LOADED, k.MODULE, None)  # as if the extension had not been built
    fallback = VarioPathPlanner(t, cat, VarioPathParams(kernel="auto")).plan(d)
    assert compiled.meta["kernel"] == "c" and fallback.meta["kernel"] == "numpy"
    assert lanes(fallback) == lanes(compiled)
    assert evaluate(fallback, t.capacity_Bps).completion_s == pytest.approx(evaluate(compiled, t.capacity_Bps).completion_s, rel=1e-9)
    with pytest.raises(SpecError, match="kernel=c but the compiled loop .* is not built"):
        VarioPathPlanner(t, cat, VarioPathParams(kernel="c")).plan(d)


def bound_inputs():
    t = topo("r5080_bf3", 1)
    p = VarioPathPlanner(t, build_catalog(t), VarioPathParams(kernel="c"))
    kernel = p._kernel_fn()
    ip, dp = p._kernel_params(1e-6)
    return kernel, ip, dp, dict(p._kernel[1]), zipf(8, 2**20, 0.6, 0).astype(np.float64)


@needs_cc
def test_the_checked_call_plans_with_well_formed_arrays():
    kernel, ip, dp, arrays, rem = bound_inputs()
    n, status = kernel.bind(ip, arrays)(dp, rem)
    assert n > 0 and status == 1 and not rem.any()  # drained in place


@needs_cc
@pytest.mark.parametrize("name, bad, match", [
    ("gof", lambda a: a.astype(np.int32), "'gof' has dtype int32; it must be int64"),
    ("cap_out", lambda a: a.astype(np.float32), "'cap_out' has dtype float32"),
    ("fam_rate", lambda a: np.asfortranarray(a), "'fam_rate' .* is not C-contiguous"),
    ("start_dst", lambda a: np.concatenate([a, a])[::2], "'start_dst' .* is not C-contiguous"),
    ("cap_in", lambda a: a[:-1].copy(), "'cap_in' has 1 elements .* the loop reads 2"),
    ("col_shape", lambda a: a[:-1].copy(), "'col_shape' has .* elements"),
    ("pi", lambda a: a[:1].copy(), "'pi' has 1 elements .* at least"),
    ("col_ptr", lambda a: a[::-1].copy(), "'col_ptr' must start at 0 and never decrease"),
    ("fam_in", lambda a: _read_only(a), "'fam_in' is read-only"),
    ("groups", lambda a: a.tolist(), "'groups' is a list; it must be a numpy array"),
])
def test_a_malformed_catalog_array_is_refused_before_the_call(name, bad, match):
    from collectives.alltoallv.kernel import KernelArgumentError

    kernel, ip, dp, arrays, _ = bound_inputs()
    arrays[name] = bad(arrays[name])
    with pytest.raises(KernelArgumentError, match=match):
        kernel.bind(ip, arrays)


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


@needs_cc
def test_malformed_parameters_and_demand_are_refused():
    from collectives.alltoallv.kernel import KernelArgumentError

    kernel, ip, dp, arrays, rem = bound_inputs()
    with pytest.raises(KernelArgumentError, match="'ip' has dtype float64"):
        kernel.bind(ip.astype(np.float64), arrays)
    with pytest.raises(KernelArgumentError, match=f"'ip' has {len(ip) - 1} elements"):
        kernel.bind(ip[:-1].copy(), arrays)
    wrong_n = ip.copy()
    wrong_n[0] = 9
    with pytest.raises(KernelArgumentError, match="need N = G g"):
        kernel.bind(wrong_n, arrays)
    with pytest.raises(KernelArgumentError, match="missing catalog arrays \\['perms'\\]"):
        kernel.bind(ip, {k: v for k, v in arrays.items() if k != "perms"})
    call = kernel.bind(ip, arrays)
    for bad, match in [(rem.astype(np.int64), "'rem' has dtype int64"), (rem[:7, :7].copy(), "'rem' has 49 elements"),
                       (np.asfortranarray(rem), "'rem' .* is not C-contiguous"), (_read_only(rem), "'rem' is read-only")]:
        with pytest.raises(KernelArgumentError, match=match):
            call(dp, bad)
    with pytest.raises(KernelArgumentError, match="'dp' has dtype float32"):
        call(dp.astype(np.float32), rem)
    assert rem.any()  # nothing ran


@needs_cc
@pytest.mark.parametrize("name, nodes", [("r5080_bf3", 2), ("r5080_cx8", 1), ("fig1", 1)])
@pytest.mark.parametrize("params", NEAR_VARIANTS)
def test_compiled_loop_matches_numpy_quality_where_rounding_decides(name, nodes, params):
    t = topo(name, nodes)
    cat = build_catalog(t)
    c = VarioPathPlanner(t, cat, VarioPathParams(kernel="c", **params))
    n = VarioPathPlanner(t, cat, VarioPathParams(kernel="numpy", **params))
    d = zipf(t.n_ranks, 8 * 2**20, 0.7, 1)
    sc, sn = c.plan(d), n.plan(d)
    assert check_schedule(sc, t).valid
    assert evaluate(sc, t.capacity_Bps).completion_s == pytest.approx(evaluate(sn, t.capacity_Bps).completion_s, rel=0.03)


@needs_cc
def test_online_synthesized_families_are_valid_and_help_many_groups():
    # R5080-CX8 x4: 16 switch groups of 2 GPUs; a budget-cut catalog pins group pairs whose demand
    # is drained, a family synthesized from the remaining group demand does not
    t = topo("r5080_cx8", 4)
    cat = build_catalog(t)
    d = zipf(32, 64 * 2**20, 0.6, 0)
    on = VarioPathPlanner(t, cat, VarioPathParams(kernel="c", synth_min_groups=16))
    off = VarioPathPlanner(t, cat, VarioPathParams(kernel="c", synth_min_groups=0))
    s_on, s_off = on.plan(d), off.plan(d)
    assert check_schedule(s_on, t).valid
    catalog_families = {f for b in cat.buckets for f in b}
    raw = []
    on._decompose_kernel(on._kernel_fn(), d.astype(np.float64), raw, 10**6)
    assert any(tuple(sorted(fam)) not in catalog_families for *_, fam in _rows(raw))
    assert evaluate(s_on, t.capacity_Bps).completion_s < evaluate(s_off, t.capacity_Bps).completion_s


@needs_cc
def test_a_full_output_block_resumes_and_still_drains(monkeypatch):
    t = topo("r5080_bf3", 2)
    p = VarioPathPlanner(t, build_catalog(t), VarioPathParams(kernel="c"))
    monkeypatch.setattr(p, "KERNEL_BLOCK", 7)
    s = p.plan(zipf(16, 8 * 2**20, 0.6, 2))
    assert s.n_activations > 7 and check_schedule(s, t).valid
