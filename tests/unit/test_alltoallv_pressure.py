"""VarioPath's pressure weights (ours; collectives/alltoallv/variopath.py): rank loads as a power,
node (NIC) pressure, and Eq. 6 on the pressure-weighted D̂ summed in the compiled loop's order."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from collectives.alltoallv.catalog import build_catalog
from collectives.alltoallv.variopath import VarioPathParams, VarioPathPlanner
from collectives.alltoallv.workloads import zipf
from collectives.errors import SpecError
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster

BF3 = yaml.safe_load((Path(__file__).resolve().parents[2] / "conf" / "platform" / "r5080_bf3.yaml").read_text())


@pytest.fixture(scope="module")
def two_nodes():
    t = channel_topology(pcie_cluster(BF3, 2))
    return t, build_catalog(t)


def cross_lanes(t, act) -> int:
    return sum(1 for lane in act.lanes if t.nodes[lane.src] != t.nodes[lane.dst])


def test_node_weights_are_zero_inside_a_node_and_at_most_one_across(two_nodes):
    t, cat = two_nodes
    p = VarioPathPlanner(t, cat, VarioPathParams(kernel="numpy"))
    d = zipf(16, 2**20, 0.8, 6).astype(np.float64)
    w = p._node_weights(d, max(d.sum(axis=1).max(), d.sum(axis=0).max()) / p.max_rate_Bps)
    same = np.array(t.nodes)[:, None] == np.array(t.nodes)[None, :]
    assert (w[same] == 0).all() and (w[~same] > 0).all() and w.max() <= 1.0
    assert (p._node_weights(np.zeros((16, 16)), 0.0) == 0).all()


def test_node_pressure_keeps_every_nic_lane_busy_in_the_first_activations(two_nodes):
    """Two nodes: the NICs bound the completion, so an idle NIC lane early is lost time. With node
    pressure the first four activations use all 8 cross-node lanes (4 NICs per node, each way) on
    every demand; without it, some start with 2-4."""
    t, cat = two_nodes
    with_np = VarioPathPlanner(t, cat, VarioPathParams())
    without = VarioPathPlanner(t, cat, VarioPathParams(node_pressure=0.0))
    fewest_with, fewest_without = [], []
    for seed in range(5, 11):
        d = zipf(16, 32 * 2**20, 0.6, seed)
        fewest_with.append(min(cross_lanes(t, a) for a in with_np.plan(d).activations[:4]))
        fewest_without.append(min(cross_lanes(t, a) for a in without.plan(d).activations[:4]))
    assert fewest_with == [8] * 6, fewest_with
    assert min(fewest_without) < 8, fewest_without


def test_node_pressure_does_nothing_on_one_node():
    t = channel_topology(pcie_cluster(BF3, 1))
    cat = build_catalog(t)
    d = zipf(8, 8 * 2**20, 0.7, 5)
    a = VarioPathPlanner(t, cat, VarioPathParams(node_pressure=8.0)).plan(d)
    b = VarioPathPlanner(t, cat, VarioPathParams(node_pressure=0.0)).plan(d)
    assert [[(l.src, l.dst, l.bytes) for l in x.lanes] for x in a.activations] == \
           [[(l.src, l.dst, l.bytes) for l in x.lanes] for x in b.activations]


def test_weighted_scores_are_eq6_on_the_weighted_group_demand(two_nodes):
    t, cat = two_nodes
    p = VarioPathPlanner(t, cat, VarioPathParams(kernel="numpy"))
    rng = np.random.default_rng(3)
    weighted = rng.random((16, 16)) * 1e6
    dg = (p.onehot.T @ weighted @ p.onehot).ravel()
    reference = np.add.reduceat(p.shape_val * dg[p.shape_idx], p.shape_ptr[:-1])
    assert p._weighted_scores(weighted) == pytest.approx(reference, rel=1e-12)


def test_rank_weights_as_a_power_favour_only_the_nearly_critical_ranks(two_nodes):
    t, cat = two_nodes
    ls = np.array([1.0, 0.5] + [0.25] * 14)
    lin = VarioPathPlanner(t, cat, VarioPathParams(pressure_power=1, rank_pressure=8.0))._rank_weights(ls, ls)
    p4 = VarioPathPlanner(t, cat, VarioPathParams(pressure_power=4, rank_pressure=8.0))._rank_weights(ls, ls)
    assert lin[0, 0] == p4[0, 0] == 9.0  # the busiest rank weighs 1 + β either way
    assert p4[1, 1] == pytest.approx(1 + 8 * 0.5**4) and lin[1, 1] == pytest.approx(1 + 8 * 0.5)


@pytest.mark.parametrize("bad", [dict(pressure_power=0), dict(pressure_power=1.5), dict(node_pressure=-1.0),
                                 dict(shape_score="weighed")])
def test_bad_pressure_parameters_are_refused(bad):
    with pytest.raises(SpecError, match=next(iter(bad))):
        VarioPathParams(**bad)
