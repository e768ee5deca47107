"""Every scheduler's schedule passes the validity checker on hypothesis-generated demands, and
for contention-free channel schedules the flow-level evaluator agrees with Eq. 2 exactly."""

from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectives.alltoallv.schedulers import make_scheduler
from collectives.alltoallv.validity import check_schedule
from fabrics.pcie.evaluator import evaluate
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster

CONF = Path(__file__).resolve().parents[2] / "conf" / "platform"


def topo(name, nodes):
    return channel_topology(pcie_cluster(yaml.safe_load((CONF / f"{name}.yaml").read_text()), nodes))


TOPOS = {"fig1": topo("fig1", 1), "bf3x2": topo("r5080_bf3", 2), "cx8": topo("r5080_cx8", 1)}
PLANNERS = {(t, s): make_scheduler(s, TOPOS[t]) for t in TOPOS
            for s in ("variopath", "nccl", "fixed_peers", "fixed_paths", "fixed_both", "greedy_joint", "fast", "deepep")}


@st.composite
def demands(draw, n):
    density = draw(st.sampled_from([0.05, 0.3, 1.0]))
    seed = draw(st.integers(0, 2**31 - 1))
    scale = draw(st.sampled_from([1, 1000, 2**24]))
    rng = np.random.default_rng(seed)
    d = rng.integers(0, scale + 1, size=(n, n)) * (rng.random((n, n)) < density)
    np.fill_diagonal(d, 0)
    if not d.any():
        d[0, n - 1] = 1
    return d


@pytest.mark.parametrize("tname", list(TOPOS))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_scheduler_is_valid_on_generated_demands(tname, data):
    t = TOPOS[tname]
    d = data.draw(demands(t.n_ranks))
    for (tn, name), planner in PLANNERS.items():
        if tn != tname:
            continue
        s = planner.plan(d)
        report = check_schedule(s, t)
        assert report.valid, (name, report.problems)
        ev = evaluate(s, t.capacity_Bps)
        assert ev.completion_s > 0
        if s.channels:
            # contention-free channels run every lane at bw(p): evaluator == Eq. 2 (λ = 0)
            eq2 = sum(max(l.bytes / l.path.rate_Bps for l in a.lanes) for a in s.activations)
            assert ev.completion_s == pytest.approx(eq2, rel=1e-9)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_milp_is_valid_and_never_slower_than_variopath(seed):
    t = TOPOS["fig1"]
    rng = np.random.default_rng(seed)
    d = rng.integers(0, 2**22, size=(6, 6))
    np.fill_diagonal(d, 0)
    m = make_scheduler("milp", t).plan(d)
    assert check_schedule(m, t).valid and m.meta["certificate"]["status"] == "optimal"
    tm = evaluate(m, t.capacity_Bps).completion_s
    tv = evaluate(PLANNERS[("fig1", "variopath")].plan(d), t.capacity_Bps).completion_s
    assert tm <= tv * (1 + 1e-6)
