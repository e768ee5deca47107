"""VarioPath offline analyzer: the channel-family catalog tree (paper 000, Section 4.1, Algorithm 1).

1. Group-level path instances R_ad: for each ordered pair of switch-local rank groups, the
   distinct shared-resource footprints L(r) (endpoint attachments omitted) with their rates. An
   instance with an empty footprint (e.g. PIX) can carry several lanes at once, so it is
   replicated g times (copies are taken in order, which removes symmetric duplicates).
2. PRUNE_PATHS drops r when another r' of the same pair has L(r') ⊆ L(r) and bw(r') >= bw(r),
   one of them strict.
3. A pruned binary DFS over the ordered instances: CANADD (footprint disjoint from the partial
   family, group out/in degrees below g), SUFFIXOK (the remaining instances can still fill every
   group's g outgoing and g incoming slots), COMPLETE (every group has g of each). A complete
   family B gives its shape M_ad = |B ∩ R_ad| and goes to bucket B[M].
4. PRUNE_FAMILIES removes duplicates and families dominated within their shape (same footprints
   pairwise, no lower rates, one strictly higher).

Stages (each a function, tested on its own): ``search_space`` (the instance: R_ad after
PRUNE_PATHS, footprints as bit masks, replica and NIC-port symmetry labels); ``enumerate_families``
(the DFS over one ``dfs_order``; complete families go to a ``FamilyStore``); when the DFS budget
cuts the search (ours), ``block_orders`` (the rest of the budget on other instance orders),
``seed_layer_families`` (families built as layers of group permutations) and
``cover_every_instance`` (every instance in some family); ``search_families`` runs these in turn.
Then ``cap_shapes`` (at most ``max_shapes``) and ``prune_families`` (PRUNE_FAMILIES).

The catalog depends only on the topology and the search parameters: ``catalog_key`` names it
(topology hash and parameters) and ``Catalog.to_json`` / ``from_json`` turn it into plain data and
back. This module reads and writes no files; the on-disk cache lives in
``pipelines/catalog_cache.py``, which adds the version of this module's source to the key.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import numpy as np

from collectives.alltoallv.channels import ChannelTopology
from collectives.errors import SpecError

CATALOG_FORMAT = "gxnet.variopath.catalog/1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """A group-level path instance r in R_ad."""

    a: int
    d: int
    kind: str
    shared: tuple[str, ...]
    rate_Bps: float
    copy: int = 0  # replica index of an empty-footprint instance

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return (self.kind, self.shared)


@dataclass(frozen=True, slots=True, kw_only=True)
class Catalog:
    topology_hash: str
    n_groups: int
    g: int
    instances: tuple[Instance, ...]
    shapes: np.ndarray = field(compare=False)  # (J, G, G) lane counts, one per realizable shape
    buckets: tuple[tuple[tuple[int, ...], ...], ...]  # per shape: families as sorted instance indices
    build_s: float
    complete: bool  # False when the DFS budget stopped the enumeration early
    stats: dict = field(default_factory=dict, compare=False)

    @property
    def n_shapes(self) -> int:
        return len(self.buckets)

    @property
    def n_families(self) -> int:
        return sum(len(b) for b in self.buckets)

    def summary(self) -> dict:
        return {"shapes": self.n_shapes, "families": self.n_families, "build_s": self.build_s,
                "complete": self.complete, **{k: v for k, v in self.stats.items() if k != "cache"},
                "cache": self.stats.get("cache", "off")}

    def to_json(self) -> dict:
        return {"format": CATALOG_FORMAT, "topology_hash": self.topology_hash, "n_groups": self.n_groups, "g": self.g,
                "instances": [[r.a, r.d, r.kind, list(r.shared), r.rate_Bps, r.copy] for r in self.instances],
                # sparse: a dense J x G x G list is ~35 M numbers at 256 GPUs
                "shape_pairs": [[[int(c), int(v)] for c, v in zip(np.flatnonzero(s), s.ravel()[np.flatnonzero(s)])]
                                for s in self.shapes],
                "buckets": [[list(f) for f in b] for b in self.buckets],
                "build_s": self.build_s, "complete": self.complete, "stats": self.stats}

    @staticmethod
    def from_json(obj: dict) -> "Catalog":
        if obj.get("format") != CATALOG_FORMAT:
            raise ValueError("not a catalog file of this format")
        G = obj["n_groups"]
        if "shape_pairs" in obj:
            shapes = np.zeros((len(obj["shape_pairs"]), G * G), dtype=np.int16)
            for j, pairs in enumerate(obj["shape_pairs"]):
                for c, v in pairs:
                    shapes[j, c] = v
        else:  # files written before the sparse form
            shapes = np.asarray(obj["shapes"], dtype=np.int16)
        return Catalog(topology_hash=obj["topology_hash"], n_groups=obj["n_groups"], g=obj["g"],
                       instances=tuple(Instance(a=a, d=d, kind=k, shared=tuple(s), rate_Bps=r, copy=c)
                                       for a, d, k, s, r, c in obj["instances"]),
                       shapes=shapes.reshape(-1, G, G),
                       buckets=tuple(tuple(tuple(f) for f in b) for b in obj["buckets"]),
                       build_s=obj["build_s"], complete=obj["complete"], stats=dict(obj.get("stats", {})))


def group_instances(topology: ChannelTopology) -> tuple[list[Instance], int]:
    """R_ad for every ordered group pair, after PRUNE_PATHS; returns (instances, pruned count)."""
    g = topology.g
    out: list[Instance] = []
    pruned = 0
    for a, va in enumerate(topology.groups):
        for d, vd in enumerate(topology.groups):
            if a == d and g < 2:
                continue
            i = va[0]
            j = vd[0] if a != d else va[1]
            best: dict[tuple, float] = {}
            for p in topology.options(i, j):
                best[p.key] = max(best.get(p.key, 0.0), p.rate_Bps)
            cands = list(best.items())
            kept = []
            for (kind, shared), rate in cands:
                fs = set(shared)
                dominated = any(
                    set(s2) <= fs and r2 >= rate and (set(s2) != fs or r2 > rate)
                    for (k2, s2), r2 in cands if (k2, s2) != (kind, shared))
                if dominated:
                    pruned += 1
                else:
                    kept.append(((kind, shared), rate))
            for (kind, shared), rate in sorted(kept, key=lambda kv: (-kv[1], kv[0])):
                copies = g if not shared else 1
                out.extend(Instance(a=a, d=d, kind=kind, shared=shared, rate_Bps=rate, copy=c) for c in range(copies))
    return out, pruned


# -- stage 1: the instance (problem set-up) ----------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """The ordered path instances r_1..r_m of Algorithm 1 and, per instance, what CANADD and the
    family builders test. Instance indices below are positions in ``instances``."""

    G: int  # switch-local rank groups
    g: int  # ranks per group = lanes each group sends and receives in a family
    instances: tuple[Instance, ...]  # by pair, fastest first, then kind, footprint, copy
    pruned_paths: int  # instances PRUNE_PATHS dropped
    masks: tuple[int, ...]  # footprint L(r) as a bit set over the shared resources
    src: tuple[int, ...]
    dst: tuple[int, ...]
    pair_code: tuple[int, ...]  # a * G + d: the sparse shape key of a lane
    prev_copy: tuple[int, ...]  # previous replica of an empty-footprint instance, or -1
    port_uses: tuple[tuple[tuple[int, int], ...], ...]  # (port class, port index) per NIC port used
    n_port_classes: int
    by_pair: dict[tuple[int, int], tuple[int, ...]]  # first copies (and intra-group replicas) per pair
    node_groups: tuple[tuple[int, ...], ...]  # the groups of each node (node-level symmetry)
    free_reps: tuple[tuple[int, ...], ...]  # empty-footprint intra-group replicas per group, copy order

    @property
    def m(self) -> int:
        return len(self.instances)

    @property
    def lanes(self) -> int:
        """Lanes of a complete family: every group has g outgoing and g incoming."""
        return self.G * self.g

    def must_cover(self, r: int) -> bool:
        """Replicas and higher NIC ports are covered up to relabelling by their first copy / port 0."""
        return self.instances[r].copy == 0 and not any(k > 0 for _, k in self.port_uses[r])


def search_space(topology: ChannelTopology, *, port_symmetry: bool = True) -> SearchSpace:
    """R_ad after PRUNE_PATHS in the search order, with footprints as bit masks. With
    ``port_symmetry`` (ours), interchangeable NIC ports get (class, index) labels: the k-th use of
    a port class must take port k, so families equal up to relabelling ports are built once."""
    G, g = topology.n_groups, topology.g
    inst, pruned = group_instances(topology)
    inst.sort(key=lambda r: (r.a, r.d, -r.rate_Bps, r.kind, r.shared, r.copy))
    m = len(inst)
    res_index: dict[str, int] = {}
    masks = []
    for r in inst:
        mask = 0
        for s in r.shared:
            mask |= 1 << res_index.setdefault(s, len(res_index))
        masks.append(mask)
    cls_index: dict[str, int] = {}
    port_class = topology.port_class if port_symmetry else {}
    port_uses = tuple(tuple((cls_index.setdefault(c, len(cls_index)), k)
                            for r_id in r.shared if r_id in port_class
                            for c, k in [port_class[r_id]]) for r in inst)
    by_pair: dict[tuple[int, int], list[int]] = {}
    for t, r in enumerate(inst):
        if r.copy == 0 or r.a == r.d:
            by_pair.setdefault((r.a, r.d), []).append(t)
    free_reps = tuple(tuple(sorted((t for t, r in enumerate(inst) if r.a == a and r.d == a and masks[t] == 0),
                                   key=lambda t: inst[t].copy)) for a in range(G))
    return SearchSpace(G=G, g=g, instances=tuple(inst), pruned_paths=pruned, masks=tuple(masks),
                       src=tuple(r.a for r in inst), dst=tuple(r.d for r in inst),
                       pair_code=tuple(r.a * G + r.d for r in inst),
                       prev_copy=tuple(t - 1 if inst[t].copy > 0 else -1 for t in range(m)),
                       port_uses=port_uses, n_port_classes=len(cls_index),
                       by_pair={k: tuple(v) for k, v in by_pair.items()},
                       node_groups=node_groups(topology), free_reps=free_reps)


def node_groups(topology: ChannelTopology) -> tuple[tuple[int, ...], ...]:
    """The groups of each node, by node; all groups as one node when nodes differ in size (then
    the layer templates have no node shift)."""
    G = topology.n_groups
    node_of_group = [topology.nodes[grp[0]] if topology.nodes else 0 for grp in topology.groups]
    out = tuple(tuple(a for a in range(G) if node_of_group[a] == n) for n in sorted(set(node_of_group)))
    if len({len(x) for x in out}) != 1:
        return (tuple(range(G)),)
    return out


# -- the families found so far ---------------------------------------------------------------

# Which stage found a shape first (the shape cap keeps later stages' shapes first).
PHASE_DFS, PHASE_REORDERED, PHASE_LAYERS, PHASE_COVERAGE = 0, 1, 2, 3


@dataclass(slots=True, kw_only=True)
class FamilyStore:
    """Complete families by shape. Shapes are keyed sparsely by the sorted group-pair codes
    a * G + d of their lanes: a dense G x G key costs O(G^2) memory per shape and exhausted
    memory at 128 GPUs."""

    pair_code: tuple[int, ...]
    max_per_shape: int
    families: dict[tuple, list[tuple[int, ...]]] = field(default_factory=dict)
    shape_phase: dict[tuple, int] = field(default_factory=dict)
    covered: set[int] = field(default_factory=set)  # instances in at least one kept family
    truncated: bool = False  # a family was dropped because its shape's bucket was full

    def record(self, lanes, phase: int, *, coverage: bool = False) -> None:
        """Add a complete family (instance indices) unless it is known; a full bucket drops it,
        except for a coverage family that brings an instance not yet covered."""
        key = tuple(sorted(self.pair_code[k] for k in lanes))
        bucket = self.families.get(key)
        if bucket is None:
            bucket = self.families[key] = []
            self.shape_phase[key] = phase
        fam = tuple(sorted(lanes))
        if fam in bucket:
            return
        if len(bucket) < self.max_per_shape or (coverage and not set(fam) <= self.covered):
            bucket.append(fam)
            self.covered.update(fam)
        else:
            self.truncated = True


# -- stage 2: the pruned DFS -------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class DfsOrder:
    """An instance order r_1..r_m for the DFS; suffix_out[t][a] counts positions >= t leaving
    group a, suffix_in[t][a] those entering it (SUFFIXOK)."""

    order: tuple[int, ...]
    suffix_out: list[list[int]]
    suffix_in: list[list[int]]


def dfs_order(space: SearchSpace, order) -> DfsOrder:
    order = tuple(order)
    m = len(order)
    suffix_out = [[0] * space.G for _ in range(m + 1)]
    suffix_in = [[0] * space.G for _ in range(m + 1)]
    for t in range(m - 1, -1, -1):
        suffix_out[t] = suffix_out[t + 1][:]
        suffix_in[t] = suffix_in[t + 1][:]
        suffix_out[t][space.src[order[t]]] += 1
        suffix_in[t][space.dst[order[t]]] += 1
    return DfsOrder(order, suffix_out, suffix_in)


def enumerate_families(space: SearchSpace, order: DfsOrder, store: FamilyStore, *, phase: int, nodes: int,
                       budget_end: int, forced: int = -1) -> tuple[int, bool]:
    """Algorithm 1's pruned binary DFS over ``order``; complete families go to ``store``.

    ``nodes`` counts DFS nodes over all runs; this run stops once it passes ``budget_end``. A
    ``forced`` instance (coverage) is pre-selected and the run stops at its first complete family.
    Returns (nodes, stopped early)."""
    G, g, total = space.G, space.g, space.lanes
    masks, src, dst, prev_copy, port_uses = space.masks, space.src, space.dst, space.prev_copy, space.port_uses
    seq, suffix_out, suffix_in = order.order, order.suffix_out, order.suffix_in
    m = len(seq)
    out_deg, in_deg = [0] * G, [0] * G
    chosen: list[int] = []
    selected = [False] * space.m
    cls_count = [0] * space.n_port_classes
    stop = False

    def take(r: int, step: int) -> None:
        for c, _ in port_uses[r]:
            cls_count[c] += step
        out_deg[src[r]] += step
        in_deg[dst[r]] += step
        selected[r] = step > 0

    def explore(t: int, used: int) -> None:
        nonlocal nodes, stop
        nodes += 1
        if nodes > budget_end:
            stop = True
            return
        if len(chosen) == total:  # COMPLETE: every group has g outgoing and g incoming lanes
            store.record(chosen, phase, coverage=forced >= 0)
            if forced >= 0:
                stop = True  # coverage runs need one family only
            return
        if t >= m:
            return
        so, si = suffix_out[t], suffix_in[t]
        for a in range(G):  # SUFFIXOK
            if out_deg[a] + so[a] < g or in_deg[a] + si[a] < g:
                return
        r = seq[t]
        if r == forced:
            explore(t + 1, used)
            return
        # CANADD: resource-disjoint, degrees below g, replicas taken in order, NIC ports in
        # order. (We try the include branch first: the enumerated set is the same, but a
        # budget-cut search has then already found complete families instead of exhausting
        # exclude-branches.)
        if ((masks[r] & used) == 0 and out_deg[src[r]] < g and in_deg[dst[r]] < g
                and (prev_copy[r] < 0 or selected[prev_copy[r]])
                and all(cls_count[c] == k for c, k in port_uses[r])):
            take(r, 1)
            chosen.append(r)
            explore(t + 1, used | masks[r])
            chosen.pop()
            take(r, -1)
            if stop:
                return
        explore(t + 1, used)  # exclude r_t

    used0 = 0
    if forced >= 0:
        take(forced, 1)
        chosen.append(forced)
        used0 = masks[forced]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, m + 1000))
    try:
        explore(0, used0)
    finally:
        sys.setrecursionlimit(limit)
    return nodes, stop


def block_orders(space: SearchSpace) -> list[tuple[int, ...]]:
    """Other orders of the same instances for a budget-cut search (ours): widest footprints
    (inter-node NIC lanes) first, then three seeded shuffles. Replicas stay contiguous and in
    copy order."""
    inst = space.instances
    base: dict[tuple, list[int]] = {}
    for t, r in enumerate(inst):
        base.setdefault((r.a, r.d, r.kind, r.shared), []).append(t)
    blocks = list(base.values())
    orders = [sorted(blocks, key=lambda b: (-len(inst[b[0]].shared), inst[b[0]].a, inst[b[0]].d))]
    rng = np.random.default_rng(0)
    for _ in range(3):
        orders.append([blocks[k] for k in rng.permutation(len(blocks))])
    return [tuple(t for b in blks for t in b) for blks in orders]


# -- stage 3: seeding (layers of group permutations) ----------------------------------------

def _derange(rng: np.random.Generator, grp) -> np.ndarray:
    grp = np.asarray(grp)
    perm = grp[rng.permutation(len(grp))]
    if (perm == grp).any():
        perm = np.roll(grp, int(rng.integers(1, len(grp))))
    return perm


def layer_permutation(rng: np.random.Generator, G: int, node_groups: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """σ for one layer, from three group-level templates that follow the cluster's symmetry: any
    derangement; a node shift (group i of node n -> a group of node n + k, slots permuted:
    inter-node NIC layers); and a derangement inside every node (intra-node cross-switch layers)."""
    n_nodes = len(node_groups)
    kind = int(rng.integers(3)) if n_nodes > 1 else 0
    if kind == 1:  # node shift
        k = int(rng.integers(1, n_nodes))
        sigma = np.empty(G, dtype=np.int64)
        for n, grp in enumerate(node_groups):
            tgt = node_groups[(n + k) % n_nodes]
            sigma[list(grp)] = np.asarray(tgt)[rng.permutation(len(tgt))]
        return sigma
    if kind == 2:  # inside every node
        sigma = np.arange(G)
        for grp in node_groups:
            if len(grp) > 1:
                sigma[list(grp)] = _derange(rng, grp)
        return sigma
    sigma = rng.permutation(G)
    if G > 1 and (sigma == np.arange(G)).any():
        sigma = np.roll(np.arange(G), int(rng.integers(1, G)))
    return sigma


def seed_layer_families(space: SearchSpace, store: FamilyStore, *, rng_seed: int, attempts: int) -> None:
    """Budget-cut catalogs (ours): random families built as layers of group permutations.

    Each layer adds one lane a -> σ(a) for every group a, so out- and in-degrees stay balanced;
    layers that do not fit the free resources are dropped, and the rest of every group is filled
    with its intra-group (empty-footprint) replicas. This yields families rich in cross-group
    lanes that an order-bound DFS reaches only late."""
    rng = np.random.default_rng(rng_seed)
    G, g, masks = space.G, space.g, space.masks
    for _ in range(attempts):
        fam: list[int] = []
        infam: set[int] = set()
        used = 0
        out = [0] * G
        for _layer in range(int(rng.integers(1, g + 1))):
            sigma = layer_permutation(rng, G, space.node_groups)
            picks, mask = [], used
            for a in range(G):
                opts = [r for r in space.by_pair.get((a, int(sigma[a])), ()) if masks[r] & mask == 0 and r not in infam]
                if not opts or out[a] >= g:
                    picks = None
                    break
                r = opts[int(rng.integers(len(opts)))]
                picks.append(r)
                mask |= masks[r]
            if picks is None:
                continue
            fam.extend(picks)
            infam.update(picks)
            used = mask
            for a in range(G):
                out[a] += 1
        fam = _fill_with_free_replicas(space, fam, out)
        if fam is not None and len(fam) == space.lanes:
            store.record(fam, PHASE_LAYERS)


def _fill_with_free_replicas(space: SearchSpace, fam: list[int], out: list[int]) -> list[int] | None:
    """``fam`` plus, for every group b, g - out[b] of its empty-footprint intra-group replicas;
    None when a group has too few."""
    filled = list(fam)
    for b in range(space.G):
        need = space.g - out[b]
        if need > len(space.free_reps[b]):
            return None
        filled.extend(space.free_reps[b][:need])
    return filled


# -- stage 4: coverage -------------------------------------------------------------------------

def cycle_family(space: SearchSpace, r: int) -> list[int] | None:
    """Coverage by construction (ours): r, closed into a cycle a -> d -> a (or a -> d -> e -> a)
    with resource-disjoint instances, every other slot an empty-footprint intra-group replica.
    O(paths) instead of a DFS per instance; None when no such family exists."""
    a, d, G = space.src[r], space.dst[r], space.G
    masks, port_uses, by_pair = space.masks, space.port_uses, space.by_pair
    cycles = [[]] if a == d else [[x] for x in by_pair.get((d, a), ())]
    if a != d and G > 2:
        cycles += [[y, z] for e in range(G) if e not in (a, d)
                   for y in by_pair.get((d, e), ()) for z in by_pair.get((e, a), ())][:64]
    for rest in cycles:
        fam, used, ok = [r], masks[r], True
        for x in rest:
            if masks[x] & used or port_uses[x] and any(k > 0 for _, k in port_uses[x]):
                ok = False
                break
            fam.append(x)
            used |= masks[x]
        if not ok:
            continue
        out = [0] * G
        for x in fam:
            out[space.src[x]] += 1
        filled = _fill_with_free_replicas(space, fam, out)
        if filled is not None:
            return filled
    return None


def cover_every_instance(space: SearchSpace, order: DfsOrder, store: FamilyStore, *, nodes: int,
                         run_budget: int) -> int:
    """Coverage (ours, only when the budget cut the DFS): every path instance appears in at least
    one family, so every group pair with demand has a shape that serves it. A cycle family first;
    else a DFS with the instance pre-selected, the rest filled in ``order`` (widest footprint
    first: as many cross lanes as fit). Returns the DFS node count."""
    for r in range(space.m):
        if r in store.covered or not space.must_cover(r):
            continue
        fam = cycle_family(space, r)
        if fam is not None and len(fam) == space.lanes:
            store.record(fam, PHASE_COVERAGE, coverage=True)
            if r in store.covered:
                continue
        nodes, _ = enumerate_families(space, order, store, phase=PHASE_COVERAGE, nodes=nodes,
                                      budget_end=nodes + run_budget, forced=r)
    return nodes


def search_families(space: SearchSpace, store: FamilyStore, *, max_nodes: int) -> tuple[int, bool]:
    """Stages 2-4: the DFS in the natural order on half the budget; when the budget (or a full
    bucket) cut it, the rest of the budget on other orders, then layer seeding and coverage.
    Returns (DFS nodes, truncated)."""
    natural = dfs_order(space, range(space.m))
    nodes, stopped = enumerate_families(space, natural, store, phase=PHASE_DFS, nodes=0, budget_end=max_nodes // 2)
    if not (stopped or store.truncated):
        return nodes, False
    # Budget-cut (ours): the include-first DFS in the natural order finds families near its start
    # (mostly intra-group lanes); other orders give families rich in cross-group lanes.
    orders = [dfs_order(space, o) for o in block_orders(space)]
    share = max(1, (max_nodes - nodes) // len(orders))
    for order in orders:
        nodes, _ = enumerate_families(space, order, store, phase=PHASE_REORDERED, nodes=nodes, budget_end=nodes + share)
    seed_layer_families(space, store, rng_seed=1, attempts=min(max(200, 20 * space.G * space.G), 4000))
    nodes = cover_every_instance(space, orders[0], store, nodes=nodes,
                                 run_budget=max(20_000, max_nodes // max(1, 4 * space.m)))
    return nodes, True


# -- stage 5: pruning --------------------------------------------------------------------------

def cap_shapes(space: SearchSpace, store: FamilyStore, max_shapes: int) -> tuple[dict, int]:
    """Bounded catalog (ours; online scoring is linear in the number of shapes): keep coverage
    shapes, then layer-seeded ones, then the DFS's by cross-group lanes (an order-bound DFS finds
    intra-group-heavy shapes first); add back any shape needed to keep every instance covered.
    Returns (families by shape, shapes dropped)."""
    families, G = store.families, space.G
    if len(families) <= max_shapes:
        return families, 0
    must_cover = {r for r in range(space.m) if space.must_cover(r)}
    rank = sorted(families, key=lambda k: (-store.shape_phase[k], -sum(1 for c in k if c // G != c % G), k))
    kept = set(rank[:max_shapes])
    have: set[int] = set()
    for k in kept:
        for fam in families[k]:
            have.update(fam)
    for k in rank[max_shapes:]:
        if any(r not in have and r in must_cover for fam in families[k] for r in fam):
            kept.add(k)
            for fam in families[k]:
                have.update(fam)
    return {k: v for k, v in families.items() if k in kept}, len(rank) - len(kept)


def uncovered_instances(space: SearchSpace, families: dict) -> int:
    covered = {r for fams in families.values() for fam in fams for r in fam}
    return sum(1 for r in range(space.m) if r not in covered and space.must_cover(r))


def shape_matrix(key: tuple, G: int) -> np.ndarray:
    """The dense G x G lane counts M_ad of a sparse shape key."""
    shape = np.zeros(G * G, dtype=np.int16)
    np.add.at(shape, np.asarray(key, dtype=np.int64), 1)
    return shape.reshape(G, G)


def prune_families(space: SearchSpace, families: dict) -> tuple[list[tuple], list[np.ndarray], int, int]:
    """PRUNE_FAMILIES: exact duplicates (replicas collapse) and rate-dominated families per shape
    (same footprints pairwise, no lower rates, one strictly higher). Shapes with the most
    intra-group lanes first. Returns (buckets, shapes, duplicates, dominated)."""
    inst, G = space.instances, space.G
    keys = sorted(families, key=lambda k: (-sum(1 for c in k if c // G == c % G), k))
    buckets, shapes = [], []
    n_dup = n_dom = 0
    for k in keys:
        seen: dict[tuple, tuple[int, ...]] = {}
        for fam in families[k]:
            canon = tuple(sorted((inst[t].a, inst[t].d, inst[t].kind, inst[t].shared) for t in fam))
            if canon in seen:
                n_dup += 1
                continue
            seen[canon] = fam
        kept = []
        for canon, fam in seen.items():
            rates = sorted(inst[t].rate_Bps for t in fam)
            fp1 = sorted((x[0], x[1], x[3]) for x in canon)
            dom = any(canon2 != canon and sorted((x[0], x[1], x[3]) for x in canon2) == fp1
                      and all(r2 >= r1 for r1, r2 in zip(rates, rates2)) and rates2 != rates
                      for canon2, fam2 in seen.items() for rates2 in [sorted(inst[t].rate_Bps for t in fam2)])
            if dom:
                n_dom += 1
            else:
                kept.append(fam)
        buckets.append(tuple(kept))
        shapes.append(shape_matrix(k, G))
    return buckets, shapes, n_dup, n_dom


# -- the catalog -------------------------------------------------------------------------------

CATALOG_DEFAULTS = {"max_nodes": 400_000, "max_families_per_shape": 64, "port_symmetry": True, "max_shapes": 4096}


def catalog_key(topology: ChannelTopology, **params) -> str:
    """The name of the catalog ``build_catalog(topology, **params)`` returns: the topology hash and
    the search parameters (defaults filled in), for a cache keyed by content."""
    p = {**CATALOG_DEFAULTS, **params}
    unknown = sorted(set(p) - set(CATALOG_DEFAULTS))
    if unknown:
        raise SpecError(f"unknown catalog parameter(s) {', '.join(unknown)}; allowed: {', '.join(CATALOG_DEFAULTS)}")
    return (f"{topology.topology_hash()}-{p['max_nodes']}-{p['max_families_per_shape']}-"
            f"{int(p['port_symmetry'])}-{p['max_shapes']}")


def build_catalog(topology: ChannelTopology, *, max_nodes: int = 400_000, max_families_per_shape: int = 64,
                  port_symmetry: bool = True, max_shapes: int = 4096) -> Catalog:
    """Algorithm 1 (with an explicit DFS budget). Pure: a cache of the result (``catalog_key``,
    ``Catalog.to_json``) is the caller's (pipelines/catalog_cache.py)."""
    thash = topology.topology_hash()
    t0 = time.perf_counter()
    space = search_space(topology, port_symmetry=port_symmetry)
    store = FamilyStore(pair_code=space.pair_code, max_per_shape=max_families_per_shape)
    nodes, truncated = search_families(space, store, max_nodes=max_nodes)
    truncated = truncated or len(store.families) > max_shapes
    families, dropped = cap_shapes(space, store, max_shapes)
    uncovered = uncovered_instances(space, families)
    buckets, shapes, n_dup, n_dom = prune_families(space, families)
    G = space.G
    cat = Catalog(topology_hash=thash, n_groups=G, g=space.g, instances=space.instances,
                  shapes=np.asarray(shapes, dtype=np.int16).reshape(-1, G, G), buckets=tuple(buckets),
                  build_s=time.perf_counter() - t0, complete=not truncated,
                  stats={"instances": space.m, "pruned_paths": space.pruned_paths, "dfs_nodes": nodes,
                         "uncovered_instances": uncovered, "dropped_shapes": dropped,
                         "duplicate_families": n_dup, "dominated_families": n_dom, "cache": "off"})
    if not buckets:
        raise SpecError(f"topology {topology.name} has no realizable channel shape; check that every group can reach the others")
    return cat
