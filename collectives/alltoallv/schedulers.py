"""The ``SCHEDULERS`` registry: Hydra option name -> factory ``(topology, params, cache_dir) -> planner``.

Every planner has ``name``, ``plan(demand) -> AlltoallvSchedule`` and ``catalog`` (``None``
unless it uses VarioPath's offline catalog). Unknown parameters are a ``SpecError``.

| key | what |
|---|---|
| ``variopath`` | offline catalog + online channel-guided decomposition (Algorithms 1-2) |
| ``nccl`` | static pairwise stages, nearest path, whole volumes |
| ``fixed_peers`` | ablation: cyclic peer rotation + dynamic paths (Table 3, row 1 col 1) |
| ``fixed_paths`` | ablation: demand-aware peers (VarioPath) + fixed nearest paths (Table 3) |
| ``fixed_both`` | ablation: cyclic peer rotation + fixed nearest paths (Table 3, 2.84x in the paper) |
| ``fast`` | FAST-like BvN of the node-level demand with intra-node rebalancing |
| ``deepep`` | DeepEP-like inter-node to the same-index GPU, then intra-node forward |
| ``milp`` | certified optimum of the channel model by column generation (small instances) |
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from collectives.alltoallv.baselines import DeepEpLike, FastLike, NcclPairwise, RotationAblation
from collectives.alltoallv.catalog import build_catalog
from collectives.alltoallv.channels import ChannelTopology
from collectives.alltoallv.milp import MilpOptimum
from collectives.alltoallv.variopath import VarioPathParams, VarioPathPlanner
from collectives.errors import SpecError
from collectives.registry import Registry

SCHEDULERS: Registry = Registry("AlltoAllv scheduler")

_CATALOG_KEYS = {"max_nodes", "max_families_per_shape"}


def _check(name: str, params: dict, allowed: set[str]) -> dict:
    params = {k: v for k, v in dict(params or {}).items() if k != "name"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise SpecError(f"scheduler {name}: unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed)) or 'none'}")
    return params


def _variopath(topology: ChannelTopology, params: dict, cache_dir, name: str) -> VarioPathPlanner:
    fields = {f.name for f in dataclasses.fields(VarioPathParams)}
    params = _check(name, params, fields | _CATALOG_KEYS)
    cat_kw = {k: int(params.pop(k)) for k in list(params) if k in _CATALOG_KEYS}
    catalog = build_catalog(topology, cache_dir=cache_dir, **cat_kw)
    return VarioPathPlanner(topology, catalog, VarioPathParams(**params), name=name)


@SCHEDULERS.register("variopath")
def make_variopath(topology, params=None, cache_dir: str | Path | None = None):
    return _variopath(topology, params, cache_dir, "variopath")


@SCHEDULERS.register("fixed_paths")
def make_fixed_paths(topology, params=None, cache_dir=None):
    return _variopath(topology.restricted_to_nearest(), params, cache_dir, "fixed_paths")


@SCHEDULERS.register("fixed_peers")
def make_fixed_peers(topology, params=None, cache_dir=None):
    p = _check("fixed_peers", params, {"k_target_per_rank"})
    r = RotationAblation(topology, dynamic_paths=True, name="fixed_peers", **p)
    r.catalog = None
    return r


@SCHEDULERS.register("fixed_both")
def make_fixed_both(topology, params=None, cache_dir=None):
    p = _check("fixed_both", params, {"k_target_per_rank"})
    r = RotationAblation(topology, dynamic_paths=False, name="fixed_both", **p)
    r.catalog = None
    return r


@SCHEDULERS.register("nccl")
def make_nccl(topology, params=None, cache_dir=None):
    _check("nccl", params, set())
    r = NcclPairwise(topology)
    r.catalog = None
    return r


@SCHEDULERS.register("fast")
def make_fast(topology, params=None, cache_dir=None):
    _check("fast", params, set())
    r = FastLike(topology)
    r.catalog = None
    return r


@SCHEDULERS.register("deepep")
def make_deepep(topology, params=None, cache_dir=None):
    _check("deepep", params, set())
    r = DeepEpLike(topology)
    r.catalog = None
    return r


@SCHEDULERS.register("milp")
def make_milp(topology, params=None, cache_dir=None):
    p = _check("milp", params, {"max_ranks", "max_iterations", "time_limit_s", "gap_tolerance", "warm_start"})
    warm = p.pop("warm_start", True)
    planner = MilpOptimum(topology, **p)
    if warm:
        vp = make_variopath(topology, {}, cache_dir)
        planner.warm_start = vp.plan
    planner.catalog = None
    return planner


def make_scheduler(name: str, topology: ChannelTopology, params: dict | None = None, cache_dir=None):
    return SCHEDULERS.get(name)(topology, params or {}, cache_dir)
