"""collectives/alltoallv/catalog.py: Algorithm 1 (instances, PRUNE_PATHS, DFS, buckets, cache), stage by stage."""

import hashlib
import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from collectives.alltoallv.catalog import (PHASE_DFS, PHASE_LAYERS, Catalog, FamilyStore, Instance, block_orders,
                                           build_catalog, cap_shapes, cover_every_instance, cycle_family, dfs_order,
                                           enumerate_families, group_instances, layer_permutation, prune_families,
                                           search_families, search_space, seed_layer_families)
from collectives.alltoallv.channels import ChannelTopology, PathOption
from collectives.errors import SpecError
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


def tiny():
    # two groups of two; one exclusive resource per cross direction, a free path inside a group
    def opts(i, j):
        if i // 2 == j // 2:
            return (PathOption(src=i, dst=j, kind="PIX", resources=("x",), shared=(), rate_Bps=2.0),)
        fwd = "L01" if i < j else "L10"
        return (PathOption(src=i, dst=j, kind="PXB", resources=(fwd,), shared=(fwd,), rate_Bps=1.0),)
    return ChannelTopology(name="tiny", n_ranks=4, groups=((0, 1), (2, 3)),
                           paths={(i, j): opts(i, j) for i in range(4) for j in range(4) if i != j})


def test_exhaustive_enumeration_on_a_tiny_topology_matches_brute_force():
    cat = build_catalog(tiny())
    # admissible shapes [[2-k, k], [k, 2-k]]; one exclusive link per direction allows k <= 1
    assert sorted(int(s[0, 1]) for s in cat.shapes) == [0, 1]


def test_catalog_cache_roundtrip(tmp_path):
    from pipelines.catalog_cache import cached_catalog

    t = topo("r5080_bf3")
    first = cached_catalog(t, cache_dir=tmp_path)
    again = cached_catalog(t, cache_dir=tmp_path)
    assert again.stats["cache"] == "hit" and first.stats["cache"] == "miss"
    assert build_catalog(t).stats["cache"] == "off"  # the core builds in memory, reads and writes no file
    assert again.buckets == first.buckets and (again.shapes == first.shapes).all()
    assert again.instances == first.instances
    assert Catalog.from_json(first.to_json()).buckets == first.buckets


def test_a_broken_cache_file_is_rebuilt(tmp_path):
    from pipelines.catalog_cache import cached_catalog, catalog_path

    t = topo("r5080_bf3")
    path = catalog_path(tmp_path, t)
    path.write_text("{not json")
    assert cached_catalog(t, cache_dir=tmp_path).stats["cache"] == "miss"
    assert cached_catalog(t, cache_dir=tmp_path).stats["cache"] == "hit"


def test_catalog_key_names_the_topology_and_the_search_parameters():
    from collectives.alltoallv.catalog import catalog_key

    t = topo("r5080_bf3")
    assert catalog_key(t) == catalog_key(t, max_nodes=400_000) != catalog_key(t, max_nodes=2000)
    assert catalog_key(t).startswith(t.topology_hash())
    with pytest.raises(SpecError, match="unknown catalog parameter"):
        catalog_key(t, depth=3)


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
    from pipelines.catalog_cache import algorithm_version, cached_catalog

    t = topo("r5080_bf3")
    cached_catalog(t, cache_dir=tmp_path)
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1 and algorithm_version() in files[0].name
    stale = tmp_path / files[0].name.replace(algorithm_version(), "0" * 12)
    files[0].rename(stale)
    assert cached_catalog(t, cache_dir=tmp_path).stats["cache"] == "miss"


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


# -- the stages, one at a time ---------------------------------------------------------------



def is_valid_family(space, fam):
    out, inn, used = [0] * space.G, [0] * space.G, 0
    for r in fam:
        if space.masks[r] & used:
            return False
        used |= space.masks[r]
        out[space.src[r]] += 1
        inn[space.dst[r]] += 1
    return len(fam) == space.lanes and set(out) == {space.g} and set(inn) == {space.g}


def store_for(space, per_shape=64):
    return FamilyStore(pair_code=space.pair_code, max_per_shape=per_shape)


def all_families(store):
    return {f for b in store.families.values() for f in b}


def test_search_space_encodes_footprints_replicas_and_nodes():
    t = topo("r5080_bf3", 2)
    s = search_space(t)
    inst = s.instances
    for r, x in enumerate(inst):
        assert (s.masks[r] == 0) == (not x.shared)
        for q in range(r):
            assert bool(s.masks[r] & s.masks[q]) == bool(set(x.shared) & set(inst[q].shared))
        if s.prev_copy[r] >= 0:
            p = inst[s.prev_copy[r]]
            assert p.key == x.key and (p.a, p.d) == (x.a, x.d) and p.copy == x.copy - 1
    for a, reps in enumerate(s.free_reps):
        assert [inst[r].copy for r in reps] == list(range(t.g))
        assert all(inst[r].a == inst[r].d == a and not inst[r].shared for r in reps)
    assert len(s.node_groups) == 2 and sorted(sum(s.node_groups, ())) == list(range(s.G))
    assert s.pruned_paths == group_instances(t)[1] > 0


def test_search_space_labels_interchangeable_nic_ports_only_with_port_symmetry():
    t = topo("r5080_bf3", 2)
    sym, plain = search_space(t), search_space(t, port_symmetry=False)
    assert sym.n_port_classes > 0 and any(k > 0 for uses in sym.port_uses for _, k in uses)
    assert plain.n_port_classes == 0 and not any(plain.port_uses)
    higher = [r for r in range(sym.m) if any(k > 0 for _, k in sym.port_uses[r])]
    assert higher and not any(sym.must_cover(r) for r in higher)
    assert all(plain.must_cover(r) == (plain.instances[r].copy == 0) for r in range(plain.m))


def test_dfs_order_suffix_counts_what_is_left_to_choose():
    s = search_space(topo("r5080_bf3", 1))
    order = block_orders(s)[1]
    o = dfs_order(s, order)
    assert o.suffix_out[s.m] == [0] * s.G and o.suffix_in[s.m] == [0] * s.G
    for t in (0, s.m // 2):
        for a in range(s.G):
            assert o.suffix_out[t][a] == sum(1 for r in order[t:] if s.src[r] == a)
            assert o.suffix_in[t][a] == sum(1 for r in order[t:] if s.dst[r] == a)


def test_dfs_enumerates_exactly_the_admissible_families():
    s = search_space(tiny())
    store = store_for(s)
    nodes, stopped = enumerate_families(s, dfs_order(s, range(s.m)), store, phase=PHASE_DFS, nodes=0, budget_end=10**6)
    assert not stopped and nodes > 0 and not store.truncated
    # brute force: resource-disjoint, g lanes out of and into every group, replicas taken in order
    brute = {fam for fam in itertools.combinations(range(s.m), s.lanes) if is_valid_family(s, fam)
             and all(s.prev_copy[r] < 0 or s.prev_copy[r] in fam for r in fam)}
    assert all_families(store) == brute and len(brute) == 2


def test_dfs_stops_at_its_node_budget():
    s = search_space(topo("r5080_bf3", 2))
    nodes, stopped = enumerate_families(s, dfs_order(s, range(s.m)), store_for(s), phase=PHASE_DFS,
                                        nodes=100, budget_end=150)
    assert stopped and nodes == 151


def test_a_forced_dfs_run_finds_one_family_with_that_instance():
    s = search_space(topo("r5080_bf3", 2))
    r = next(r for r in range(s.m) if s.must_cover(r) and s.instances[r].kind not in ("PIX", "PXB"))  # via a NIC
    store = store_for(s)
    _, stopped = enumerate_families(s, dfs_order(s, block_orders(s)[0]), store, phase=PHASE_DFS, nodes=0,
                                    budget_end=10**6, forced=r)
    fams = all_families(store)
    assert stopped and len(fams) == 1 and r in next(iter(fams)) and is_valid_family(s, next(iter(fams)))


def test_family_store_dedupes_caps_buckets_and_lets_coverage_through():
    store = FamilyStore(pair_code=(0, 0, 1, 1, 0), max_per_shape=2)  # instance -> group-pair code
    store.record([0, 2], PHASE_LAYERS)
    store.record([2, 0], PHASE_DFS)  # the same family
    store.record([3, 1], PHASE_DFS)
    assert store.families == {(0, 1): [(0, 2), (1, 3)]} and store.shape_phase[(0, 1)] == PHASE_LAYERS
    assert not store.truncated and store.covered == {0, 1, 2, 3}
    store.record([0, 3], PHASE_DFS)  # same shape, bucket full
    assert store.truncated and len(store.families[(0, 1)]) == 2
    store.record([1, 2], PHASE_DFS, coverage=True)  # nothing new: dropped as well
    store.record([4, 2], PHASE_DFS, coverage=True)  # brings instance 4: kept despite the cap
    assert store.families[(0, 1)] == [(0, 2), (1, 3), (2, 4)] and store.covered == {0, 1, 2, 3, 4}


def test_block_orders_permute_the_instances_and_keep_replicas_in_order():
    s = search_space(topo("r5080_bf3", 2))
    orders = block_orders(s)
    assert len(orders) == 4 and len(set(orders)) == 4
    for o in orders:
        assert sorted(o) == list(range(s.m))
        pos = {r: i for i, r in enumerate(o)}
        assert all(pos[s.prev_copy[r]] == pos[r] - 1 for r in range(s.m) if s.prev_copy[r] >= 0)
    widths = [len(s.instances[r].shared) for r in orders[0]]
    assert widths == sorted(widths, reverse=True)


def test_layer_permutations_are_derangements_from_the_three_templates():
    s = search_space(topo("r5080_cx8", 4))
    node = {a: n for n, grp in enumerate(s.node_groups) for a in grp}
    rng = np.random.default_rng(3)
    shifts = inside = 0
    for _ in range(200):
        sigma = layer_permutation(rng, s.G, s.node_groups)
        assert sorted(sigma) == list(range(s.G)) and not (sigma == np.arange(s.G)).any()
        offsets = {(node[int(sigma[a])] - node[a]) % len(s.node_groups) for a in range(s.G)}
        shifts += len(offsets) == 1 and 0 not in offsets
        inside += offsets == {0}
    assert shifts > 20 and inside > 20


def test_layer_seeding_records_valid_families_rich_in_cross_lanes_and_is_seeded():
    s = search_space(topo("r5080_cx8", 2))
    a, b = store_for(s), store_for(s)
    seed_layer_families(s, a, rng_seed=1, attempts=60)
    seed_layer_families(s, b, rng_seed=1, attempts=60)
    fams = all_families(a)
    assert fams and fams == all_families(b) and set(a.shape_phase.values()) == {PHASE_LAYERS}
    assert all(is_valid_family(s, f) for f in fams)
    node = {x: n for n, grp in enumerate(s.node_groups) for x in grp}
    assert any(node[s.src[r]] != node[s.dst[r]] for f in fams for r in f)


def test_cycle_family_closes_an_instance_into_a_valid_family():
    s = search_space(topo("r5080_bf3", 2))
    built = 0
    for r in range(s.m):
        if not s.must_cover(r):
            continue
        fam = cycle_family(s, r)
        if fam is not None:
            built += 1
            assert r in fam and is_valid_family(s, fam)
    assert built > s.m // 4


def test_coverage_puts_every_instance_in_some_family():
    s = search_space(topo("r5080_bf3", 2))
    store = store_for(s)
    enumerate_families(s, dfs_order(s, range(s.m)), store, phase=PHASE_DFS, nodes=0, budget_end=300)
    must = {r for r in range(s.m) if s.must_cover(r)}
    assert must - store.covered  # the cut DFS left some out
    cover_every_instance(s, dfs_order(s, block_orders(s)[0]), store, nodes=300, run_budget=20_000)
    assert must <= store.covered and all(is_valid_family(s, f) for f in all_families(store))


def test_search_families_runs_the_later_stages_only_when_the_budget_cuts():
    s = search_space(topo("r5080_bf3", 1))
    store = store_for(s)
    assert search_families(s, store, max_nodes=400_000)[1] is False and set(store.shape_phase.values()) == {PHASE_DFS}
    s2 = search_space(topo("r5080_bf3", 2))
    store2 = store_for(s2)
    nodes, truncated = search_families(s2, store2, max_nodes=2000)
    assert truncated and nodes > 1000 and len(set(store2.shape_phase.values())) > 1


def test_shape_cap_keeps_later_stages_first_and_every_instance_covered():
    s = search_space(topo("r5080_bf3", 2))
    store = store_for(s)
    search_families(s, store, max_nodes=2000)
    assert cap_shapes(s, store, len(store.families)) == (store.families, 0)
    seeded = [k for k, p in store.shape_phase.items() if p >= PHASE_LAYERS]
    assert 0 < len(seeded) < len(store.families)
    kept, dropped = cap_shapes(s, store, len(seeded))
    assert set(seeded) <= set(kept) and dropped == len(store.families) - len(kept) > 0
    covered = {r for fams in kept.values() for f in fams for r in f}
    assert {r for r in range(s.m) if s.must_cover(r)} <= covered


def test_prune_families_drops_duplicates_and_rate_dominated_families():
    s = search_space(tiny())
    inst = (Instance(a=0, d=1, kind="A", shared=("x",), rate_Bps=1.0), Instance(a=0, d=1, kind="B", shared=("x",), rate_Bps=2.0),
            Instance(a=0, d=0, kind="PIX", shared=(), rate_Bps=5.0), Instance(a=0, d=0, kind="PIX", shared=(), rate_Bps=5.0, copy=1))
    s = replace(s, instances=inst)
    # (1, 3) is (1, 2) with the other replica; (0, 2) has the same footprints, a lower rate
    buckets, shapes, n_dup, n_dom = prune_families(s, {(0, 1): [(0, 2), (1, 2), (1, 3)]})
    assert buckets == [((1, 2),)] and (n_dup, n_dom) == (1, 1)
    assert shapes[0].tolist() == [[1, 1], [0, 0]]


# Canonical digests of catalogs built by the search before it was cut into stages: a refactoring
# must leave them equal; a deliberate change of the search updates them and says why.
GOLDEN = {("fig1", 1, ()): "1b9fe18ffd20fcc9", ("r5080_cx8", 1, ()): "616d2f8418b8f713",
          ("r5080_bf3", 2, (("max_nodes", 2000),)): "3694864b9ba46224",
          ("r5080_bf3", 2, (("max_nodes", 2000), ("max_shapes", 30))): "93c82d0bfd2fe945",
          ("r5080_bf3", 2, (("max_families_per_shape", 2), ("max_nodes", 3000), ("port_symmetry", False))): "e76ecf5d6fc918d5"}


@pytest.mark.parametrize("case", list(GOLDEN))
def test_catalog_equals_its_golden_digest(case):
    name, nodes, kw = case
    obj = build_catalog(topo(name, nodes), **dict(kw)).to_json()
    del obj["build_s"]
    obj["stats"] = {k: v for k, v in obj["stats"].items() if k != "cache"}
    assert hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16] == GOLDEN[case]
