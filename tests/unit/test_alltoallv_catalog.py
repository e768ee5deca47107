"""collectives/alltoallv/catalog.py: Algorithm 1 (instances, PRUNE_PATHS, DFS, buckets, cache)."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from collectives.alltoallv.catalog import Catalog, build_catalog, group_instances
from collectives.alltoallv.channels import ChannelTopology, PathOption
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster

CONF = Path(__file__).resolve().parents[2] / "conf" / "platform"


def topo(name, nodes=1):
    return channel_topology(pcie_cluster(yaml.safe_load((CONF / f"{name}.yaml").read_text()), nodes))


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


def test_cache_key_carries_the_algorithm_version(tmp_path):
    # a catalog cached by another version of the search must never be reused (stale caches gave
    # 24/32-GPU clusters poor catalogs)
    from collectives.alltoallv.catalog import algorithm_version

    t = topo("r5080_bf3")
    build_catalog(t, cache_dir=tmp_path)
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1 and algorithm_version() in files[0].name
    stale = tmp_path / files[0].name.replace(algorithm_version(), "0" * 12)
    files[0].rename(stale)
    assert build_catalog(t, cache_dir=tmp_path).stats["cache"] == "miss"


def test_catalog_json_is_sparse_and_old_dense_files_still_load():
    t = topo("r5080_bf3", 2)
    cat = build_catalog(t)
    obj = cat.to_json()
    assert "shapes" not in obj and len(obj["shape_pairs"]) == cat.n_shapes
    again = Catalog.from_json(obj)
    assert (again.shapes == cat.shapes).all() and again.buckets == cat.buckets
    legacy = dict(obj, shapes=cat.shapes.tolist())
    del legacy["shape_pairs"]
    assert (Catalog.from_json(legacy).shapes == cat.shapes).all()


def test_shape_cap_keeps_every_instance_covered():
    t = topo("r5080_bf3", 3)
    cat = build_catalog(t, max_shapes=200)
    full = build_catalog(t)
    assert cat.n_shapes < full.n_shapes and cat.stats["dropped_shapes"] > 0
    assert cat.stats["uncovered_instances"] == 0
    covered = np.zeros((t.n_groups, t.n_groups), dtype=bool)
    for s in cat.shapes:
        covered |= s > 0
    assert covered.all()


def test_layer_templates_give_multi_node_catalogs_node_shift_layers():
    # a node-shift layer (group i of node n -> a group of node n + k) sends one NIC lane out of
    # every switch at once, all k nodes ahead: the layout that drains inter-node traffic at the
    # NIC rate. Random group derangements almost never produce it at 4 nodes x 4 switches (3 of
    # ~3900 shapes without the templates, over 1300 with them).
    t = topo("r5080_cx8", 4)
    cat = build_catalog(t)
    node = [t.nodes[g[0]] for g in t.groups]
    n_nodes = len(set(node))
    shifts = 0
    for shape in cat.shapes:
        inter = [(a, d) for a, d in zip(*np.nonzero(shape)) if node[a] != node[d] for _ in range(shape[a, d])]
        offsets = {(node[d] - node[a]) % n_nodes for a, d in inter}
        if len(inter) == t.n_groups and len({a for a, _ in inter}) == t.n_groups and len(offsets) == 1:
            shifts += 1
    assert shifts * 20 > cat.n_shapes  # at least 5 % of the catalog
