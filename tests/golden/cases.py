"""The fixed configurations whose results.json is kept as a golden file in tests/golden/.

Every number these pipelines report is modelled; a refactoring of the network seam, the fabrics
or the executor must leave them equal (to 1e-9 relative). Keys listed in ``MEASURED_KEYS`` are
wall-clock measurements of this machine (planning time of a Python scheduler) and are not
compared. ``python tests/golden/regenerate.py`` rewrites the files -- only when a change is meant
to move a number, with the reason in the commit message.
"""

from __future__ import annotations

import math
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parent

# name -> (pipeline, overrides)
CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "decode_single_eps": ("decode", ("fabric=single_eps",)),
    "decode_single_ocs": ("decode", ("fabric=single_ocs",)),
    "decode_all_eps": ("decode", ("fabric=all_eps",)),
    "decode_hybrid": ("decode", ("fabric=hybrid",)),
    "decode_all_ocs": ("decode", ("fabric=all_ocs",)),
    # paper 003's headline split for the GPT-OSS-5.3T-like model on all-OCS
    "decode_gpt_oss_5p3_all_ocs": ("decode", ("model=gpt_oss_5p3_like", "fabric=all_ocs", "parallel.kvp=32",
                                              "parallel.tpa=16", "parallel.ep=4", "parallel.tpe=128")),
    "decode_pcie_ep16": ("decode", ("fabric=pcie", "model=qwen3_30b_a3b", "accelerator=rtx5080",
                                    "platform=r5080_bf3", "nodes=2", "ep=16", "context=4096", "model.layers=2",
                                    "scheduler=variopath", "batch=32")),
    "collective_all_ocs": ("collective", ("fabric=all_ocs",)),
    "alltoallv_variopath_fig1": ("alltoallv", ("platform=fig1", "scheduler=variopath")),
    "prefill_r5080_bf3": ("prefill", ("platform=r5080_bf3",)),
}

# Measured on the machine that runs the pipeline (not modelled), or which implementation of the same
# algorithm ran there (the compiled VarioPath loop or its numpy reference): never compared.
MEASURED_KEYS = frozenset({"planning_s", "planning_s_per_activation", "planning_over_communication",
                           "planning_cpu_s", "cache", "sim_wall_s", "wall_s", "build_s", "planning_kernel"})


def differences(golden, actual, path: str = "", rel: float = 1e-9) -> list[str]:
    """Paths where ``actual`` differs from ``golden`` (numbers to ``rel``; measured keys skipped)."""
    if isinstance(golden, dict) and isinstance(actual, dict):
        out = []
        for key in sorted(set(golden) | set(actual)):
            if key in MEASURED_KEYS:
                continue
            where = f"{path}.{key}" if path else str(key)
            if key not in golden or key not in actual:
                out.append(f"{where}: only in {'golden' if key in golden else 'actual'}")
                continue
            out += differences(golden[key], actual[key], where, rel)
        return out
    if isinstance(golden, list) and isinstance(actual, list):
        if len(golden) != len(actual):
            return [f"{path}: length {len(golden)} != {len(actual)}"]
        return [d for i, (g, a) in enumerate(zip(golden, actual)) for d in differences(g, a, f"{path}[{i}]", rel)]
    numbers = (int, float)
    if isinstance(golden, numbers) and isinstance(actual, numbers) and not isinstance(golden, bool):
        if math.isclose(golden, actual, rel_tol=rel, abs_tol=1e-300):
            return []
        return [f"{path}: {golden!r} != {actual!r}"]
    return [] if golden == actual else [f"{path}: {golden!r} != {actual!r}"]
