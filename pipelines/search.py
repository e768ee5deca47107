"""``python -m pipelines.search``: best Helix split per cell (paper 003, Appendix B.6).

A cell is (model, world, context, batch, fabric). Every feasible split is timed with the
analytical network model; with ``search.resimulate=true`` and ``network=simlette`` available,
the splits whose analytical interactivity is within ``search.within`` (7 %) of the best are
re-timed with Simlette and the best of those is kept. Sweep cells with ``-m`` (Ray + MLflow):

    gx search -m batch=1,2,4,8,16 context=32K,5M fabric=all_eps,hybrid,all_ocs

results.json: the cell, ``count`` (splits tried), ``feasible``, ``best`` ({parallel,
decode_step_s, interactivity_tok_s_user, throughput_tok_s, breakdown_s, ...}), and ``splits``
(one row per split: parallel, feasible, reason or timings). Artifact: ``splits.png``.
"""

from __future__ import annotations

import time

from collectives.errors import SpecError
from pipelines.app import gx_main
from pipelines.budgets import preflight
from pipelines.decode import evaluate
from pipelines.network import build_network, network_name
from pipelines.plots import splits_png
from pipelines.specs import deployment_factory, deployment_spec, model_spec, plain, positive_int


def time_splits(cfg, network_cfg=None) -> list[dict]:
    """One row per Helix split of the cell. The splits share one network model (its schedule and
    price caches; ``cell_network``) and are executed without a trace (nothing here reads it)."""
    from gxnet.executor import execute
    from gxnet.parallel import ParallelSpec
    from gxnet.plan import build_plan
    from gxnet.splits import helix_splits

    model = model_spec(cfg)
    world = positive_int(cfg["world"], "world")
    rows: list[dict] = []
    network = None
    deployment = deployment_factory(cfg)  # the cell's specs once; a deployment per split
    for split in helix_splits(model, world):
        par = ParallelSpec(scheme="helix", kvp=split.kvp, tpa=split.tpa, ep=split.ep, tpe=split.tpe)
        row = {"parallel": {"kvp": split.kvp, "tpa": split.tpa, "ep": split.ep, "tpe": split.tpe}}
        try:
            dep = deployment(par)
        except SpecError as exc:  # e.g. the batch does not fit this split's memory
            rows.append({**row, "feasible": False, "reason": str(exc)})
            continue
        if network is None:
            network = cell_network(network_cfg or cfg, dep.accelerator, dep.world)
        step = execute(build_plan(dep), network, trace=False)
        rows.append({**row, "feasible": True, "decode_step_s": step.decode_step_s,  # as in decode's results_of
                     "interactivity_tok_s_user": step.interactivity_tok_s_user,
                     "throughput_tok_s": step.throughput_tok_s, "breakdown_s": dict(step.breakdown_s),
                     "memory_bytes_per_rank": step.memory_bytes_per_rank})
    return rows


# config -> network model: cells a process runs that differ only in batch and context share it
# (its prepared fabrics and prices are keyed by demand, so sharing gives the same numbers).
# Explicit and keyed; clear_cell_networks() is always safe.
_CELL_NETWORKS: dict = {}
_CELL_NETWORKS_KEEP = 2
_NOT_NETWORK_KEYS = ("batch", "context", "search", "hydra", "ray", "tracking", "sweep")


def _cell_key(cfg, *extra) -> str:
    """What a cell's network model and power depend on: its config without batch, context and
    the sweep's own keys."""
    import json

    rest = {k: v for k, v in plain(cfg).items() if k not in _NOT_NETWORK_KEYS}
    return json.dumps([rest, *extra], sort_keys=True, default=str)


def cell_network(cfg, accelerator, world: int):
    key = _cell_key(cfg, repr(accelerator), world)
    network = _CELL_NETWORKS.pop(key, None)
    if network is None:
        network = build_network(cfg, accelerator, world)
    _CELL_NETWORKS[key] = network  # most recent last
    while len(_CELL_NETWORKS) > _CELL_NETWORKS_KEEP:
        _CELL_NETWORKS.pop(next(iter(_CELL_NETWORKS)))
    return network


def clear_cell_networks() -> None:
    _CELL_NETWORKS.clear()
    _CELL_POWER.clear()


def analytical_view(cfg):
    """The same cell with the analytical network model: every split is first timed with it (B.6)."""
    from omegaconf import OmegaConf

    if network_name(cfg) == "analytical":
        return cfg
    view = OmegaConf.create(plain(cfg))
    view.network = {"name": "analytical"}
    return view


def task(cfg):
    from pipelines.plan_store import attach_default_plan_store

    preflight("search", cfg)
    t0 = time.perf_counter()
    attach_default_plan_store()  # OCS plans shared by the sweep's processes and later runs
    rows = time_splits(analytical_view(cfg))
    feasible = [r for r in rows if r["feasible"]]
    if not feasible:
        raise SpecError(
            f"no feasible Helix split for {plain(cfg['model'])['name']} at world={cfg['world']}, "
            f"batch={cfg['batch']}, context={cfg['context']}: {rows[0]['reason'] if rows else 'no splits'}"
        )
    power_W = cell_power_W(cfg)
    for r in feasible:  # system power depends on the fabric and world, not on the split (D.4)
        r["tokens_per_s_per_MW"] = None if power_W is None else r["throughput_tok_s"] / power_W * 1e6
    best = max(feasible, key=lambda r: (r["interactivity_tok_s_user"], -r["parallel"]["kvp"]))
    search = plain(cfg.get("search") or {})
    within = float(search.get("within", 0.07))
    near = [r for r in feasible if r["interactivity_tok_s_user"] >= (1 - within) * best["interactivity_tok_s_user"]]
    resimulated = False
    if search.get("resimulate") and network_name(cfg) != "analytical":
        resimulated = True
        from gxnet.parallel import ParallelSpec

        for r in near:
            dep = deployment_spec(cfg, parallel=ParallelSpec(scheme="helix", **r["parallel"]))
            _, step = evaluate(cfg, dep)
            r["resimulated_decode_step_s"] = step.decode_step_s
        best = min(near, key=lambda r: r["resimulated_decode_step_s"])
        if power_W is not None:
            best["tokens_per_s_per_MW"] = cfg["batch"] / best["resimulated_decode_step_s"] / power_W * 1e6
    fabric = plain(cfg["fabric"]).get("name")
    results = {
        "model": plain(cfg["model"])["name"],
        "world": cfg["world"],
        "batch": cfg["batch"],
        "context": cfg["context"],
        "fabric": fabric,
        "count": len(rows),
        "feasible": len(feasible),
        "near_best": len(near),
        "resimulated": resimulated,
        "system_power_W": power_W,
        "best": best,
        "splits": rows,
    }
    timings = {"search_wall_s": time.perf_counter() - t0}  # measured: timings.json, never results.json
    print(f"{results['model']} batch {cfg['batch']} context {cfg['context']} on {fabric}: "
          f"{len(feasible)}/{len(rows)} feasible splits; best {best['parallel']} -> "
          f"{best['interactivity_tok_s_user']:.1f} tok/s/user ({timings['search_wall_s']:.2f} s)")
    return results, {"splits.png": splits_png(rows, model=results["model"], batch=cfg["batch"],
                                              context=cfg["context"], fabric=fabric),
                     "timings.json": timings}


# cell config (as for the network) -> system power: the cells of a sweep on one fabric share it
# (building the fabric to count its switches and optics costs ~0.3 s). Keyed; always safe to clear.
_CELL_POWER: dict = {}


def cell_power_W(cfg) -> float | None:
    """System power of the cell (pipelines/power.py): the fabric's on scale-up fabrics (Table 12),
    what the deployment uses on GPU fabrics; None without a power figure."""
    from pipelines.power import fabric_power
    from pipelines.specs import accelerator_spec

    key = _cell_key(cfg)
    if key not in _CELL_POWER:
        power = fabric_power(cfg, accelerator_spec(cfg), positive_int(cfg["world"], "world"))
        if len(_CELL_POWER) >= 16:
            _CELL_POWER.clear()
        _CELL_POWER[key] = None if power is None else power["system_power_W"]
    return _CELL_POWER[key]


main = gx_main("search")(task)

if __name__ == "__main__":
    main()
