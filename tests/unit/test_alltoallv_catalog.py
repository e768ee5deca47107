"""collectives/alltoallv/catalog.py: Algorithm 1 (instances, PRUNE_PATHS, DFS, buckets, cache)."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from collectives.alltoallv.catalog import Catalog, build_catalog, group_instances
from collectives.alltoallv.channels import ChannelTopology, PathOption
from fabrics.pcie.paths import channel_topology
from fabrics.pcie.platform import build_cluster
from pipelines.units import parse_rate

CONF = Path(__file__).resolve().parents[2] / "conf" / "platform"


def topo(name, nodes=1):
    return channel_topology(build_cluster(yaml.safe_load((CONF / f"{name}.yaml").read_text()), nodes, parse_rate))


def test_fig1_catalog_shapes_and_families():
    cat = build_catalog(topo("fig1"))
    # cross lanes k per direction in {0, 1, 2}; k = 1 has PXB or NIC each way
    assert cat.complete and (cat.n_shapes, cat.n_families) == (3, 6)
    ks = sorted(int(s[0, 1]) for s in cat.shapes)
    assert ks == [0, 1, 2]


@pytest.mark.parametrize("name, nodes", [("fig1", 1), ("r5080_bf3", 1), ("r5080_cx8", 1), ("r5080_bf3", 2)])
def test_every_family_realises_its_shape_and_is_resource_disjoint(name, nodes):
    t = topo(name, nodes)
    cat = build_catalog(t)
    g = t.g
    for shape, bucket in zip(cat.shapes, cat.buckets):
        assert (shape.sum(axis=0) == g).all() and (shape.sum(axis=1) == g).all()  # Eq. 3
        for fam in bucket:
            m = np.zeros_like(shape)
            seen = []
            for t_ in fam:
                r = cat.instances[t_]
                m[r.a, r.d] += 1
                seen.extend(r.shared)
            assert (m == shape).all()  # Eq. 4, first constraint
            assert len(seen) == len(set(seen))  # Eq. 4, second constraint


def test_prune_paths_removes_dominated_instances():
    # same switch pair: a NIC hairpin (superset footprint, slower) is dominated by PIX
    inst, pruned = group_instances(topo("r5080_bf3"))
    intra = [r for r in inst if r.a == r.d]
    assert {r.kind for r in intra} == {"PIX"} and pruned > 0


def test_exhaustive_enumeration_on_a_tiny_topology_matches_brute_force():
    # two groups of two; cross links: one exclusive resource per direction plus a free path
    def opts(i, j):
        if i // 2 == j // 2:
            return (PathOption(src=i, dst=j, kind="PIX", resources=("x",), shared=(), rate_Bps=2.0),)
        fwd = "L01" if i < j else "L10"
        return (PathOption(src=i, dst=j, kind="PXB", resources=(fwd,), shared=(fwd,), rate_Bps=1.0),)
    paths = {(i, j): opts(i, j) for i in range(4) for j in range(4) if i != j}
    t = ChannelTopology(name="tiny", n_ranks=4, groups=((0, 1), (2, 3)), paths=paths)
    cat = build_catalog(t)
    # admissible shapes [[2-k, k], [k, 2-k]]; one exclusive link per direction allows k <= 1
    assert sorted(int(s[0, 1]) for s in cat.shapes) == [0, 1]


def test_catalog_cache_roundtrip(tmp_path):
    t = topo("r5080_bf3")
    first = build_catalog(t, cache_dir=tmp_path)
    again = build_catalog(t, cache_dir=tmp_path)
    assert again.stats["cache"] == "hit" and first.stats["cache"] == "miss"
    assert again.buckets == first.buckets and (again.shapes == first.shapes).all()
    assert again.instances == first.instances
    assert Catalog.from_json(first.to_json()).buckets == first.buckets


def test_budget_cut_catalog_still_covers_every_group_pair():
    t = topo("r5080_bf3", 2)
    cat = build_catalog(t, max_nodes=2000)
    assert not cat.complete
    assert cat.stats["uncovered_instances"] == 0
    covered = np.zeros((t.n_groups, t.n_groups), dtype=bool)
    for s in cat.shapes:
        covered |= s > 0
    assert covered.all()
