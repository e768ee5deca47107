"""collectives/alltoallv/baselines.py: NCCL-like, ablations, FAST-like (BvN), DeepEP-like."""

from pathlib import Path

import numpy as np
import yaml

from collectives.alltoallv.baselines import birkhoff_von_neumann
from collectives.alltoallv.schedulers import SCHEDULERS, make_scheduler
from collectives.alltoallv.validity import check_schedule
from collectives.alltoallv.workloads import zipf
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster

CONF = Path(__file__).resolve().parents[2] / "conf" / "platform"
TOPO = channel_topology(pcie_cluster(yaml.safe_load((CONF / "r5080_bf3.yaml").read_text()), 2))
D = zipf(16, 4 * 2**20, 0.6, 0)


def test_registry_names():
    assert {"variopath", "nccl", "fixed_peers", "fixed_paths", "fixed_both", "fast", "deepep", "milp"} <= set(SCHEDULERS.names())


def test_nccl_is_n_minus_1_rotation_stages_on_nearest_paths():
    s = make_scheduler("nccl", TOPO).plan(D)
    assert s.n_activations == 15 and not s.channels
    for k, act in enumerate(s.activations, start=1):
        assert all(l.dst == (l.src + k) % 16 and l.path == TOPO.nearest(l.src, l.dst) for l in act.lanes)
    assert check_schedule(s, TOPO).valid


def test_ablations_respect_their_restrictions():
    peers = make_scheduler("fixed_peers", TOPO).plan(D)
    for act in peers.activations:
        assert len({(l.dst - l.src) % 16 for l in act.lanes}) == 1  # one rotation per activation
    paths = make_scheduler("fixed_paths", TOPO).plan(D)
    assert all(l.path == TOPO.nearest(l.src, l.dst) for a in paths.activations for l in a.lanes)
    for s in (peers, paths, make_scheduler("fixed_both", TOPO).plan(D)):
        r = check_schedule(s, TOPO)
        assert r.valid and r.contention_free and r.endpoint_disjoint


def test_bvn_decomposition_covers_the_matrix():
    m = np.array([[0, 5, 2], [3, 0, 4], [1, 6, 0]])
    parts = birkhoff_von_neumann(m)
    total = np.zeros((3, 3))
    for perm, wgt in parts:
        assert sorted(perm) == [0, 1, 2]
        total[np.arange(3), perm] += wgt
    assert (total >= m).all()
    assert total.sum(axis=1).max() == max(m.sum(axis=1).max(), m.sum(axis=0).max())


def test_fast_and_deepep_relay_through_other_gpus_and_stay_valid():
    for name in ("fast", "deepep"):
        s = make_scheduler(name, TOPO).plan(D)
        r = check_schedule(s, TOPO)
        assert r.valid and r.causal, r.problems
        relays = [l for a in s.activations for l in a.lanes if l.commodity != (l.src, l.dst)]
        assert relays  # inter-node data is forwarded
    deepep = make_scheduler("deepep", TOPO).plan(D)
    for l in deepep.activations[0].lanes:
        if TOPO.nodes[l.src] != TOPO.nodes[l.dst]:
            assert l.dst % 8 == l.src % 8  # same-index GPU on the destination node
