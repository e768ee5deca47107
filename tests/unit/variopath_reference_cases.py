"""Reference cases of VarioPath's online planner: the plans it must keep giving while it gets faster.

``digest(schedule)`` is a SHA-256 over every activation's lanes in order -- source, destination,
path kind and resources, bytes -- so two planners agree on a case only when they emit the same
activations lane for lane. The reference data in ``tests/data/variopath_reference.json`` was
written by this module from the planner *before* its planning-speed work (commit 38a5390:
``python tests/unit/variopath_reference_cases.py --write``), and ``test_variopath_reference.py``
compares the current planner's digests with it exactly. The default preset's entries were recorded
again when that preset changed (warm AA starts and shape candidates); ``variopath_previous`` holds
the earlier default's entries (that preset with the new fields off), which the planner must still give. Cases: every preset on the tuning and the
held-apart test seeds of ``collectives/alltoallv/tuning.py`` (one and two R5080-BF3 nodes, Zipf
s = 0.6 ... 1.2, 32 MiB per source), the ``gx alltoallv ... workload.bytes_per_rank=1GiB`` demand
at 8, 16 and 32 GPUs, and R5080-CX8 x 4 (16 rank groups: the online-synthesized family). The
default suite runs a few (``fast``); the rest are ``slow``. ``--write`` rewrites every entry from
the planner at hand, so run it only from the revision the data came from, never to make a changed
planner pass.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "variopath_reference.json"
PRESETS = ("variopath", "variopath_fast", "variopath_quality", "variopath_previous")
# the default preset before shape candidates (and warm AA starts; both off): its
# entries are the default preset's from before that change, so the new fields switched off must
# keep every earlier plan
DERIVED = {"variopath_previous": ("variopath", {"warm_starts": 0, "shape_candidates": 0})}
_CATALOG_KEYS = {"name", "max_nodes", "max_families_per_shape", "max_shapes"}
# (platform, nodes, bytes per source, skew, seed) beyond the tuning / test grid
_LARGE = [("r5080_bf3", 1, 2**30, 0.6, 0), ("r5080_bf3", 2, 2**30, 0.6, 0), ("r5080_bf3", 4, 2**30, 0.6, 0),
          ("r5080_cx8", 4, 2**30, 0.6, 0)]
# the default suite: the 16-GPU case and one test-split instance per node count
_FAST = {"variopath/r5080_bf3x2/1024MiB/s0.6/seed0", "variopath/r5080_bf3x1/32MiB/s1.0/seed200",
         "variopath/r5080_bf3x2/32MiB/s0.8/seed203", "variopath_fast/r5080_bf3x2/32MiB/s1.2/seed201",
         "variopath_previous/r5080_bf3x2/1024MiB/s0.6/seed0"}


def cases() -> list[dict]:
    from collectives.alltoallv import tuning

    grid = [("r5080_bf3", n, tuning.BYTES_PER_RANK, s, seed) for n in tuning.NODES for s in tuning.SKEWS
            for seed in tuning.TUNING_SEEDS + tuning.TEST_SEEDS]
    out = []
    for preset in PRESETS:
        for platform, nodes, size, skew, seed in grid + _LARGE:
            if preset == "variopath_quality" and (platform, nodes, size) == ("r5080_cx8", 4, 2**30):
                continue  # minutes of planning; the other presets cover the synthesized family
            name = f"{preset}/{platform}x{nodes}/{size >> 20}MiB/s{skew}/seed{seed}"
            out.append({"name": name, "preset": preset, "platform": platform, "nodes": nodes, "bytes": size,
                        "skew": skew, "seed": seed, "slow": name not in _FAST})
    return out


@functools.lru_cache(maxsize=None)
def topology(platform: str, nodes: int):
    from fabrics.pcie.paths import channel_topology
    from pipelines.network import pcie_cluster

    return channel_topology(pcie_cluster(yaml.safe_load((ROOT / "conf" / "platform" / f"{platform}.yaml").read_text()), nodes))


@functools.lru_cache(maxsize=None)
def planner(preset: str, platform: str, nodes: int):
    from collectives.alltoallv.catalog import build_catalog
    from collectives.alltoallv.variopath import VarioPathParams, VarioPathPlanner

    base, over = DERIVED.get(preset, (preset, {}))
    p = {**yaml.safe_load((ROOT / "conf" / "scheduler" / f"{base}.yaml").read_text()), **over}
    t = topology(platform, nodes)
    cat = build_catalog(t, **{k: p[k] for k in ("max_nodes", "max_families_per_shape", "max_shapes") if k in p})
    return VarioPathPlanner(t, cat, VarioPathParams(**{k: v for k, v in p.items() if k not in _CATALOG_KEYS}))


def digest(schedule) -> str:
    h = hashlib.sha256()
    for act in schedule.activations:
        h.update(b"|")
        for lane in act.lanes:
            h.update(repr((lane.src, lane.dst, lane.path.kind, tuple(lane.path.resources), int(lane.bytes))).encode())
    return h.hexdigest()


def outputs(case: dict) -> dict:
    from collectives.alltoallv.workloads import zipf

    p = planner(case["preset"], case["platform"], case["nodes"])
    s = p.plan(zipf(p.N, case["bytes"], case["skew"], case["seed"]))
    return {"activations": s.n_activations, "lanes": sum(len(a.lanes) for a in s.activations), "digest": digest(s),
            "kernel": s.meta["kernel"]}


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/unit/variopath_reference_cases.py --write   (from the reference revision only)")
    ref = {}
    for c in cases():
        ref[c["name"]] = outputs(c)
        print(c["name"], ref[c["name"]]["activations"], flush=True)
    DATA.write_text(json.dumps(ref, indent=1, sort_keys=True) + "\n")
