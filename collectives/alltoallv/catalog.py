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

The catalog depends only on the topology and is cached on disk under its topology hash.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from collectives.alltoallv.channels import ChannelTopology
from collectives.errors import SpecError

CATALOG_FORMAT = "gxnet.variopath.catalog/1"


def algorithm_version() -> str:
    """Hash of this module's source: part of the cache key, so a catalog cached by an earlier
    version of the search is never reused (stale caches once gave 24/32-GPU clusters catalogs
    without the layer-seeded families, and VarioPath then emitted hundreds of tiny activations)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


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


def build_catalog(topology: ChannelTopology, *, cache_dir: str | Path | None = None,
                  max_nodes: int = 400_000, max_families_per_shape: int = 64, port_symmetry: bool = True,
                  max_shapes: int = 4096) -> Catalog:
    """Algorithm 1 (with an explicit DFS budget), cached under ``cache_dir/<topology hash>.json``."""
    thash = topology.topology_hash()
    if cache_dir is not None:
        path = Path(cache_dir) / (f"{thash}-{algorithm_version()}-{max_nodes}-{max_families_per_shape}-"
                                  f"{int(port_symmetry)}-{max_shapes}.json")
        if path.exists():
            try:
                cat = Catalog.from_json(json.loads(path.read_text()))
                cat.stats["cache"] = "hit"
                return cat
            except (ValueError, KeyError, json.JSONDecodeError):
                pass  # a stale or foreign file: rebuild and overwrite
    t0 = time.perf_counter()
    G, g = topology.n_groups, topology.g
    inst, pruned_paths = group_instances(topology)
    inst.sort(key=lambda r: (r.a, r.d, -r.rate_Bps, r.kind, r.shared, r.copy))
    m = len(inst)
    res_index: dict[str, int] = {}
    masks = []
    for r in inst:
        mask = 0
        for s in r.shared:
            mask |= 1 << res_index.setdefault(s, len(res_index))
        masks.append(mask)
    src = [r.a for r in inst]
    dst = [r.d for r in inst]
    pair_code = [r.a * G + r.d for r in inst]
    prev_copy = [(t - 1 if inst[t].copy > 0 else -1) for t in range(m)]
    # Symmetry breaking over interchangeable NIC ports: the k-th use (in instance order) of a
    # port class must take port k, so families equal up to relabelling ports are built once.
    cls_index: dict[str, int] = {}
    port_class = topology.port_class if port_symmetry else {}
    port_uses = [tuple((cls_index.setdefault(c, len(cls_index)), k)
                       for r_id in r.shared if r_id in port_class
                       for c, k in [port_class[r_id]]) for r in inst]
    cls_count = [0] * len(cls_index)
    order: list[int] = []
    suffix_out: list[list[int]] = []
    suffix_in: list[list[int]] = []

    def set_order(new: list[int]) -> None:
        """Fix the instance order r_1..r_m; suffix_out[t][a] counts positions >= t leaving a (SUFFIXOK)."""
        order[:] = new
        suffix_out[:] = [[0] * G for _ in range(m + 1)]
        suffix_in[:] = [[0] * G for _ in range(m + 1)]
        for t in range(m - 1, -1, -1):
            suffix_out[t] = suffix_out[t + 1][:]
            suffix_in[t] = suffix_in[t + 1][:]
            suffix_out[t][src[order[t]]] += 1
            suffix_in[t][dst[order[t]]] += 1

    out_deg = [0] * G
    in_deg = [0] * G
    chosen: list[int] = []
    selected = [False] * m
    # shapes keyed sparsely (sorted group-pair codes a * G + d of the lanes): a dense G x G key
    # costs O(G^2) memory per shape and exhausted memory at 128 GPUs
    families: dict[tuple, list[tuple[int, ...]]] = {}
    shape_phase: dict[tuple, int] = {}  # 0 DFS (natural order), 1 DFS (other orders), 2 layer seeding, 3 coverage
    phase = [0]
    counters = {"nodes": 0, "complete_families": 0, "truncated": False, "stop": False}
    total_needed = G * g

    def suffix_ok(t: int) -> bool:
        so, si = suffix_out[t], suffix_in[t]
        for a in range(G):
            if out_deg[a] + so[a] < g or in_deg[a] + si[a] < g:
                return False
        return True

    forced = [-1]  # coverage phase: the instance pre-selected in this run (never re-decided)

    def record() -> None:
        key = tuple(sorted(pair_code[k] for k in chosen))
        counters["complete_families"] += 1
        bucket = families.get(key)
        if bucket is None:
            bucket = families[key] = []
            shape_phase[key] = phase[0]
        fam = tuple(sorted(chosen))
        if fam in bucket:
            return
        if len(bucket) < max_families_per_shape or (forced[0] >= 0 and not set(fam) <= covered):
            bucket.append(fam)
            covered.update(fam)
        else:
            counters["truncated"] = True

    def explore(t: int, used: int) -> None:
        counters["nodes"] += 1
        if counters["nodes"] > budget[0]:
            counters["stop"] = True
            return
        if len(chosen) == total_needed:  # COMPLETE: every group has g outgoing and g incoming lanes
            record()
            if forced[0] >= 0:
                counters["stop"] = True  # coverage runs need one family only
            return
        if t >= m or not suffix_ok(t):
            return
        r = order[t]
        if r == forced[0]:
            explore(t + 1, used)
            return
        a, d = src[r], dst[r]
        # CANADD: resource-disjoint, degrees below g, replicas taken in order. (We try the include
        # branch first: the enumerated set is the same, but a budget-cut search has then already
        # found complete families instead of exhausting exclude-branches.)
        if ((masks[r] & used) == 0 and out_deg[a] < g and in_deg[d] < g
                and (prev_copy[r] < 0 or selected[prev_copy[r]])
                and all(cls_count[c] == k for c, k in port_uses[r])):
            for c, _ in port_uses[r]:
                cls_count[c] += 1
            chosen.append(r)
            selected[r] = True
            out_deg[a] += 1
            in_deg[d] += 1
            explore(t + 1, used | masks[r])
            out_deg[a] -= 1
            in_deg[d] -= 1
            selected[r] = False
            chosen.pop()
            for c, _ in port_uses[r]:
                cls_count[c] -= 1
            if counters["stop"]:
                return
        explore(t + 1, used)  # exclude r_t

    by_pair: dict[tuple[int, int], list[int]] = {}
    for r in range(m):
        if inst[r].copy == 0 or inst[r].a == inst[r].d:
            by_pair.setdefault((src[r], dst[r]), []).append(r)

    def layer_seeding(rng_seed: int, attempts: int) -> None:
        """Budget-cut catalogs (ours): random families built as layers of group permutations.

        Each layer adds one lane a -> σ(a) for every group a, so out- and in-degrees stay
        balanced; layers that do not fit the free resources are dropped, and the rest of every
        group is filled with its intra-group (empty-footprint) replicas. This yields families rich
        in cross-group lanes that an order-bound DFS reaches only late. σ is drawn from three
        group-level templates that follow the cluster's symmetry: any derangement; a node shift
        (group i of node n -> a group of node n + k, slots permuted: inter-node NIC layers); and a
        derangement inside every node (intra-node cross-switch layers).
        """
        rng = np.random.default_rng(rng_seed)
        n_nodes = len(node_groups)

        def draw_sigma() -> np.ndarray:
            kind = int(rng.integers(3)) if n_nodes > 1 else 0
            if kind == 1:  # node shift
                k = int(rng.integers(1, n_nodes))
                sigma = np.empty(G, dtype=np.int64)
                for n, grp in enumerate(node_groups):
                    tgt = node_groups[(n + k) % n_nodes]
                    sigma[grp] = np.asarray(tgt)[rng.permutation(len(tgt))]
                return sigma
            if kind == 2:  # inside every node
                sigma = np.arange(G)
                for grp in node_groups:
                    if len(grp) > 1:
                        sigma[grp] = _derange(grp)
                return sigma
            sigma = rng.permutation(G)
            if G > 1 and (sigma == np.arange(G)).any():
                sigma = np.roll(np.arange(G), int(rng.integers(1, G)))
            return sigma

        def _derange(grp: list[int]) -> np.ndarray:
            perm = np.asarray(grp)[rng.permutation(len(grp))]
            if (perm == np.asarray(grp)).any():
                perm = np.roll(np.asarray(grp), int(rng.integers(1, len(grp))))
            return perm

        for _ in range(attempts):
            fam: list[int] = []
            infam: set[int] = set()
            used = 0
            out = [0] * G
            for _layer in range(int(rng.integers(1, g + 1))):
                sigma = draw_sigma()
                picks, mask = [], used
                for a in range(G):
                    opts = [r for r in by_pair.get((a, int(sigma[a])), []) if masks[r] & mask == 0 and r not in infam]
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
            for a in range(G):
                reps = free_reps[a]
                need = g - out[a]
                if need > len(reps):
                    fam = []
                    break
                fam.extend(reps[:need])
            if len(fam) == total_needed:
                chosen[:] = fam
                record()
                chosen.clear()

    # groups of each node (the cluster's node-level symmetry, used by the layer templates)
    node_of_group = [topology.nodes[grp[0]] if topology.nodes else 0 for grp in topology.groups]
    node_groups = [[a for a in range(G) if node_of_group[a] == n] for n in sorted(set(node_of_group))]
    if len({len(x) for x in node_groups}) != 1:
        node_groups = [list(range(G))]  # heterogeneous nodes: no node-shift template
    # empty-footprint intra-group replicas of each group, in copy order (fill lanes)
    free_reps = [sorted((r for r in range(m) if src[r] == a and dst[r] == a and masks[r] == 0),
                        key=lambda r: inst[r].copy) for a in range(G)]

    def cycle_family(r: int) -> list[int] | None:
        """Coverage by construction (ours): r, closed into a cycle a -> d -> a (or a -> d -> e -> a)
        with resource-disjoint instances, every other slot an empty-footprint intra-group replica.
        O(paths) instead of a DFS per instance; None when no such family exists."""
        a, d = src[r], dst[r]
        cycles = [[]] if a == d else [[x] for x in by_pair.get((d, a), [])]
        if a != d and G > 2:
            cycles += [[y, z] for e in range(G) if e not in (a, d)
                       for y in by_pair.get((d, e), []) for z in by_pair.get((e, a), [])][:64]
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
                out[src[x]] += 1
            filled = []
            for b in range(G):
                need = g - out[b]
                if need > len(free_reps[b]):
                    ok = False
                    break
                filled.extend(free_reps[b][:need])
            if ok:
                return fam + filled
        return None

    covered: set[int] = set()
    budget = [max_nodes]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, m + 1000))
    natural = list(range(m))
    try:
        counters["stop"] = False
        set_order(natural)
        budget[0] = max_nodes // 2
        explore(0, 0)
        truncated = counters["stop"] or counters["truncated"]
        if truncated:
            # Budget-cut (ours): the include-first DFS in the natural order finds families near
            # its start (mostly intra-group lanes). Spend the rest of the budget on other orders
            # of the same instances: widest footprints (inter-node NIC lanes) first, then seeded
            # shuffles, so the catalog also holds families rich in cross-group lanes.
            base = {}
            for r in range(m):
                base.setdefault((inst[r].a, inst[r].d, inst[r].kind, inst[r].shared), []).append(r)
            blocks = list(base.values())  # replicas stay contiguous and in copy order
            orders = [sorted(blocks, key=lambda b: (-len(inst[b[0]].shared), inst[b[0]].a, inst[b[0]].d))]
            rng = np.random.default_rng(0)
            for _ in range(3):
                orders.append([blocks[k] for k in rng.permutation(len(blocks))])
            share = max(1, (max_nodes - counters["nodes"]) // len(orders))
            phase[0] = 1
            for blks in orders:
                set_order([r for b in blks for r in b])
                counters["stop"] = False
                budget[0] = counters["nodes"] + share
                explore(0, 0)
        if truncated:
            phase[0] = 2
            layer_seeding(rng_seed=1, attempts=min(max(200, 20 * G * G), 4000))
            phase[0] = 3
        # Coverage (ours, only when the budget cut the DFS): make sure every path instance appears
        # in at least one family, so every group pair with demand has a shape that serves it; the
        # rest of each such family is filled widest-footprint first (as many cross lanes as fit).
        if truncated:
            set_order([r for b in orders[0] for r in b])
            for r in range(m):
                if r in covered or inst[r].copy > 0 or any(k > 0 for _, k in port_uses[r]):
                    continue  # replicas and higher NIC ports are covered up to relabelling
                forced[0] = r
                fam = cycle_family(r)
                if fam is not None and len(fam) == total_needed:
                    chosen[:] = fam
                    record()
                    chosen.clear()
                    if r in covered:
                        continue
                forced[0] = r
                counters["stop"] = False
                budget[0] = counters["nodes"] + max(20_000, max_nodes // max(1, 4 * m))
                a, d = src[r], dst[r]
                chosen.append(r)
                selected[r] = True
                out_deg[a] += 1
                in_deg[d] += 1
                for c, _ in port_uses[r]:
                    cls_count[c] += 1
                explore(0, masks[r])
                for c, _ in port_uses[r]:
                    cls_count[c] -= 1
                out_deg[a] -= 1
                in_deg[d] -= 1
                selected[r] = False
                chosen.pop()
            forced[0] = -1
            set_order(natural)
    finally:
        sys.setrecursionlimit(limit)
    counters["truncated"] = truncated

    # Bounded catalog (ours; online scoring is linear in the number of shapes): keep coverage
    # shapes, then layer-seeded ones, then the DFS's by cross-group lanes (an order-bound DFS finds
    # intra-group-heavy shapes first); add back any shape needed to keep every instance covered.
    if len(families) > max_shapes:
        counters["truncated"] = True
        must_cover = {r for r in range(m) if inst[r].copy == 0 and not any(k > 0 for _, k in port_uses[r])}
        rank = sorted(families, key=lambda k: (-shape_phase[k], -sum(1 for c in k if c // G != c % G), k))
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
        families = {k: v for k, v in families.items() if k in kept}
        counters["dropped_shapes"] = len(rank) - len(kept)
    covered = {r for fams in families.values() for fam in fams for r in fam}
    counters["uncovered"] = sum(1 for r in range(m) if r not in covered and inst[r].copy == 0
                                and not any(k > 0 for _, k in port_uses[r]))

    # PRUNE_FAMILIES: exact duplicates (replicas collapse) and rate-dominated families per shape.
    def dense(key: tuple) -> np.ndarray:
        shape = np.zeros(G * G, dtype=np.int16)
        np.add.at(shape, np.asarray(key, dtype=np.int64), 1)
        return shape.reshape(G, G)

    keys = sorted(families, key=lambda k: (-sum(1 for c in k if c // G == c % G), k))
    buckets = []
    shapes = []
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
            dom = False
            for canon2, fam2 in seen.items():
                if canon2 == canon:
                    continue
                fp1 = sorted((x[0], x[1], x[3]) for x in canon)
                fp2 = sorted((x[0], x[1], x[3]) for x in canon2)
                rates2 = sorted(inst[t].rate_Bps for t in fam2)
                if fp1 == fp2 and all(r2 >= r1 for r1, r2 in zip(rates, rates2)) and rates2 != rates:
                    dom = True
                    break
            if dom:
                n_dom += 1
            else:
                kept.append(fam)
        buckets.append(tuple(kept))
        shapes.append(dense(k))
    build_s = time.perf_counter() - t0
    cat = Catalog(topology_hash=thash, n_groups=G, g=g, instances=tuple(inst),
                  shapes=np.asarray(shapes, dtype=np.int16).reshape(-1, G, G), buckets=tuple(buckets),
                  build_s=build_s, complete=not counters["truncated"],
                  stats={"instances": m, "pruned_paths": pruned_paths, "dfs_nodes": counters["nodes"],
                         "uncovered_instances": counters["uncovered"], "dropped_shapes": counters.get("dropped_shapes", 0),
                         "duplicate_families": n_dup, "dominated_families": n_dom, "cache": "miss" if cache_dir else "off"})
    if not buckets:
        raise SpecError(f"topology {topology.name} has no realizable channel shape; check that every group can reach the others")
    if cache_dir is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cat.to_json()))
        tmp.replace(path)
    return cat
