"""collectives/alltoallv/kernel.py + variopath_kernel.c: the compiled decomposition loop.

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
from collectives.alltoallv.variopath import VarioPathParams, VarioPathPlanner
from collectives.alltoallv.workloads import moe, zipf
from collectives.errors import SpecError
from fabrics.pcie.evaluator import evaluate
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster

CONF = Path(__file__).resolve().parents[2] / "conf" / "platform"
needs_cc = pytest.mark.skipif(load_kernel() is None, reason="no C compiler: the numpy path is used")


def topo(name, nodes):
    return channel_topology(pcie_cluster(yaml.safe_load((CONF / f"{name}.yaml").read_text()), nodes))


def lanes(s):
    return [sorted((l.src, l.dst, l.bytes) for l in a.lanes) for a in s.activations]


VARIANTS = [dict(), dict(shape_beam=1, n_start=1, aa_sweeps=3), dict(shape_beam=3, n_start=4, aa_sweeps=4),
            dict(coarse_rounds_per_rank=0, k_target_per_rank=3.0), dict(max_quanta=4),
            dict(rank_pressure=0.0, weighted_utility=False), dict(max_aa_rows=8), dict(overhead_s=1e-6)]
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


def test_kernel_cache_is_keyed_by_source(tmp_path, monkeypatch):
    import collectives.alltoallv.kernel as k

    monkeypatch.setenv("GXNET_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(k, "_LOADED", {})
    fn = k.load_kernel()
    if fn is None:
        pytest.skip("no C compiler")
    built = list(tmp_path.glob("variopath_kernel-*.so"))
    assert len(built) == 1 and k.SOURCE.exists()


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
    on._decompose_kernel(on._kernel_fn(), d.astype(np.float64), s_on.meta["tau_s"], raw, 10**6)
    assert any(tuple(sorted(int(x) for x in fam)) not in catalog_families for *_, fam in raw)
    assert evaluate(s_on, t.capacity_Bps).completion_s < evaluate(s_off, t.capacity_Bps).completion_s


@needs_cc
def test_a_full_output_block_resumes_and_still_drains(monkeypatch):
    t = topo("r5080_bf3", 2)
    p = VarioPathPlanner(t, build_catalog(t), VarioPathParams(kernel="c"))
    monkeypatch.setattr(p, "KERNEL_BLOCK", 7)
    s = p.plan(zipf(16, 8 * 2**20, 0.6, 2))
    assert s.n_activations > 7 and check_schedule(s, t).valid
