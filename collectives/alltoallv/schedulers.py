"""The ``SCHEDULERS`` registry: Hydra option name -> factory ``(topology, params, catalogs) -> planner``.

Every planner has ``name``, ``plan(demand) -> AlltoallvSchedule`` and ``catalog`` (``None``
unless it uses VarioPath's offline catalog). Unknown parameters are a ``SpecError``.
``catalogs`` is where VarioPath's offline catalog comes from: a callable
``(topology, **catalog parameters) -> Catalog`` (pipelines/catalog_cache.py passes a file-cached
one) or None, ``build_catalog`` in memory.

| key | what |
|---|---|
| ``variopath`` | offline catalog + online channel-guided decomposition (Algorithms 1-2) |
| ``nccl`` | static pairwise stages, nearest path, whole volumes |
| ``fixed_peers`` | ablation: cyclic peer rotation + dynamic paths (Table 3) |
| ``fixed_paths`` | ablation: demand-aware peers + each pair's fixed nearest path (Table 3) |
| ``fixed_both`` | ablation: cyclic peer rotation + fixed nearest paths (Table 3, 2.84x in the paper) |
| ``greedy_joint`` | the ablations' unrestricted reference: demand-aware peers + dynamic paths, greedy |
| ``fast`` | FAST-like BvN of the node-level demand with intra-node rebalancing |
| ``deepep`` | DeepEP-like inter-node to the same-index GPU, then intra-node forward |
| ``milp`` | certified optimum of the channel model by column generation (small instances) |
"""

from __future__ import annotations

import dataclasses
from collectives.alltoallv.baselines import ChannelAblation, DeepEpLike, FastLike, NcclPairwise
from collectives.alltoallv.catalog import build_catalog
from collectives.alltoallv.channels import ChannelTopology
from collectives.alltoallv.milp import MilpOptimum
from collectives.alltoallv.variopath import VarioPathParams, VarioPathPlanner
from collectives.errors import SpecError
from collectives.registry import Registry

SCHEDULERS: Registry = Registry("AlltoAllv scheduler")

_CATALOG_KEYS = {"max_nodes", "max_families_per_shape", "max_shapes"}


def _check(name: str, params: dict, allowed: set[str]) -> dict:
    params = {k: v for k, v in dict(params or {}).items() if k != "name"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise SpecError(f"scheduler {name}: unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed)) or 'none'}")
    return params


def _variopath(topology: ChannelTopology, params: dict, catalogs, name: str) -> VarioPathPlanner:
    fields = {f.name for f in dataclasses.fields(VarioPathParams)}
    params = _check(name, params, fields | _CATALOG_KEYS)
    cat_kw = {k: int(params.pop(k)) for k in list(params) if k in _CATALOG_KEYS}
    catalog = (catalogs or build_catalog)(topology, **cat_kw)
    planner = VarioPathPlanner(topology, catalog, VarioPathParams(**params), name=name)
    planner.prepare()  # the per-catalog tables of the compiled loop: built with the catalog, not on the first plan
    return planner


@SCHEDULERS.register("variopath")
def make_variopath(topology, params=None, catalogs=None):
    return _variopath(topology, params, catalogs, "variopath")


def _ablation(name: str, peers: str, paths: str):
    def make(topology, params=None, catalogs=None):
        p = _check(name, params, {"k_target_per_rank", "rank_pressure"})
        r = ChannelAblation(topology, peers=peers, paths=paths, name=name, **p)
        r.catalog = None
        return r
    SCHEDULERS.add(name, make)
    return make


make_fixed_peers = _ablation("fixed_peers", "rotation", "dynamic")
make_fixed_paths = _ablation("fixed_paths", "demand", "nearest")
make_fixed_both = _ablation("fixed_both", "rotation", "nearest")
make_greedy_joint = _ablation("greedy_joint", "demand", "dynamic")


@SCHEDULERS.register("nccl")
def make_nccl(topology, params=None, catalogs=None):
    _check("nccl", params, set())
    r = NcclPairwise(topology)
    r.catalog = None
    return r


@SCHEDULERS.register("fast")
def make_fast(topology, params=None, catalogs=None):
    _check("fast", params, set())
    r = FastLike(topology)
    r.catalog = None
    return r


@SCHEDULERS.register("deepep")
def make_deepep(topology, params=None, catalogs=None):
    _check("deepep", params, set())
    r = DeepEpLike(topology)
    r.catalog = None
    return r


@SCHEDULERS.register("milp")
def make_milp(topology, params=None, catalogs=None):
    p = _check("milp", params, {"max_ranks", "max_iterations", "time_limit_s", "gap_tolerance", "warm_start"})
    warm = p.pop("warm_start", True)
    planner = MilpOptimum(topology, **p)
    if warm:
        vp = make_variopath(topology, {}, catalogs)
        planner.warm_start = vp.plan
    planner.catalog = None
    return planner


def make_scheduler(name: str, topology: ChannelTopology, params: dict | None = None, catalogs=None):
    return SCHEDULERS.get(name)(topology, params or {}, catalogs)
