"""``python -m pipelines.alltoallv`` / ``gx alltoallv``: AlltoAllv scheduling on PCIe clusters (paper 000).

platform + nodes -> PCIe cluster model -> channel topology; workload -> demand matrix;
scheduler(s) -> schedule(s); every schedule passes the validity checker; the flow-level
evaluator times it. Writes ``results.json`` and ``schedule.json`` (one scheduler) or
``schedule_<name>.json`` per scheduler plus ``bandwidth_by_scheduler.png`` (a sweep).

``run(config_dict)`` is the pure task (plain dict in, ``(results, artifacts)`` out) for reuse by
sweeps; ``task(cfg)`` adapts Hydra's config.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from collectives.alltoallv import workloads
from collectives.alltoallv.schedulers import SCHEDULERS, make_scheduler
from collectives.alltoallv.validity import check_schedule
from collectives.errors import SpecError
from fabrics.pcie.evaluator import evaluate
from fabrics.pcie.paths import channel_topology
from pipelines.network import pcie_cluster
from pipelines.app import CONF_DIR, gx_main
from pipelines.catalog_cache import catalog_source
from pipelines.budgets import preflight
from pipelines.units import parse_bytes, parse_count, parse_time


def build_topology(platform: dict, nodes):
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise SpecError(f"nodes={nodes!r} must be a whole number >= 1")
    return channel_topology(pcie_cluster(platform, nodes))


def make_demand(workload: dict, n: int):
    name = workload.get("name")
    if name == "zipf":
        skew = workload.get("skew", 0.6)
        if isinstance(skew, bool) or not isinstance(skew, (int, float)) or skew < 0:
            raise SpecError(f"workload.skew={skew!r} must be a non-negative number (paper: 0.4 ... 0.8)")
        return workloads.zipf(n, parse_bytes(workload["bytes_per_rank"], "workload.bytes_per_rank"), float(skew),
                              int(workload.get("seed", 0)))
    if name == "uniform":
        return workloads.uniform(n, parse_bytes(workload["bytes_per_rank"], "workload.bytes_per_rank"))
    if name == "moe":
        return workloads.moe(n, parse_count(workload["tokens_per_rank"], "workload.tokens_per_rank"),
                             experts=int(workload.get("experts", 256)), top_k=int(workload.get("top_k", 8)),
                             hidden=int(workload.get("hidden", 7168)), dtype_bytes=int(workload.get("dtype_bytes", 2)),
                             seed=int(workload.get("seed", 0)))
    if name == "file":
        path = workload.get("path")
        if not path or path == "???":
            raise SpecError("workload=file needs workload.path=<matrix .npy/.csv/.json>")
        from pipelines.file_checks import read_array

        return workloads.demand_matrix(read_array(path, "workload.path"), n, f"demand file {Path(path).name}")
    raise SpecError(f"unknown workload {name!r}; choose one of: file, moe, uniform, zipf")


def _scheduler_params(option: str) -> dict:
    """conf/scheduler/<option>.yaml (its ``name`` is the registry key; presets share one key)."""
    path = Path(CONF_DIR) / "scheduler" / f"{option}.yaml"
    if not path.exists():
        SCHEDULERS.get(option)  # raises the one-line "unknown scheduler" error if not a key either
        return {"name": option}
    from omegaconf import OmegaConf

    params = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    params.setdefault("name", option)
    return params


def planning_figures(planner, demand, first, completion_s: float, repeats: int, name: str) -> dict:
    """Measured planning figures: the steady state (median of ``repeats`` plans of the same demand
    after one warm-up plan) and the first, cold call of this process (``first``'s meta).

    The cold call pays what is left of the one-time costs once the planner is built (first touch
    of its buffers, numpy dispatch; the catalog and the compiled loop's flat tables are built with
    the planner and timed as ``planner_setup_s``); what a long-lived planner pays per AlltoAllv
    is the steady state, so that one is
    ``planning_over_communication`` (paper 000, Section 6.4: planning time over communication
    time). The MILP is not repeated (seconds per plan; certification, not online planning).
    """
    cold = first.meta.get("planning_s")
    out = {"planning_cold_s": cold,
           "planning_over_communication_cold": cold / completion_s if cold is not None and completion_s else None}
    if "planning_cpu_s" in first.meta:
        out["planning_cpu_cold_s"] = first.meta["planning_cpu_s"]
    metas = [first.meta]
    if repeats > 0 and name != "milp" and cold is not None:
        planner.plan(demand)  # warm-up
        metas = [planner.plan(demand).meta for _ in range(repeats)]
    wall = statistics.median(m["planning_s"] for m in metas) if cold is not None else None
    out.update({"planning_s": wall, "planning_repeats": len(metas) if len(metas) > 1 else 0,
                "planning_s_per_activation": wall / max(1, first.n_activations) if wall is not None else None,
                "planning_over_communication": (wall or 0.0) / completion_s if completion_s else None})
    if "planning_cpu_s" in first.meta:
        out["planning_cpu_s"] = statistics.median(m["planning_cpu_s"] for m in metas)
    return out


def nccl_model(platform: dict, topology, overhead_s: float):
    """The NCCL-like pricing of the ``nccl`` baseline on this platform (fabrics.network.nccl.pcie)."""
    from fabrics.network.nccl.pcie import PcieNccl
    from pipelines.network import pcie_nccl_generation, pcie_server_spec

    cpus = {v for v, kind in pcie_server_spec(platform).vertices.items() if kind == "cpu"}
    return PcieNccl(pcie_nccl_generation(None), topology, topology.capacity_Bps, overhead_s=overhead_s, cpus=cpus)


def _nccl_figures(nccl, schedule, ev) -> dict:
    """The nccl baseline's completion as NCCL runs it: the pairwise schedule's flow completion at the
    transports' efficiencies plus NCCL's p2p latency (``ideal_completion_s``: the flow evaluator alone)."""
    from pipelines.nccl_fit_values import bus_factor

    est = nccl.pairwise(schedule)
    n = schedule.n_ranks
    algbw = ev.total_bytes / (n * est.time_s) if est.time_s > 0 else 0.0
    return {"completion_s": est.time_s, "algbw_Bps": algbw, "busbw_Bps": algbw * bus_factor("alltoallv", n),
            "algorithm": est.algorithm, "protocol": est.protocol, "latency_s": est.latency_s,
            "bandwidth_s": est.bandwidth_s, "ideal_completion_s": ev.completion_s}


def run_one(topology, demand, label: str, params: dict, overhead_s: float, cache_dir,
            repeats: int = 5, nccl=None) -> tuple[dict, dict]:
    name = params.get("name", label)
    params = {k: v for k, v in params.items() if k != "name"}
    if name == "variopath":
        params.setdefault("overhead_s", overhead_s)
    t0 = time.perf_counter()
    planner = make_scheduler(name, topology, params, catalog_source(cache_dir))
    setup_s = time.perf_counter() - t0  # offline: the catalog (or its cache read) and per-catalog tables
    schedule = planner.plan(demand)
    report = check_schedule(schedule, topology)
    if not report.valid:
        raise RuntimeError(f"scheduler {name} produced an invalid schedule: {report.problems[:3]}")
    ev = evaluate(schedule, topology.capacity_Bps, overhead_s)
    catalog = planner.catalog.summary() if getattr(planner, "catalog", None) is not None else None
    result = {
        "scheduler": label,
        "registry_key": name,
        "completion_s": ev.completion_s,
        "algbw_Bps": ev.algbw_Bps,
        "busbw_Bps": ev.busbw_Bps,
        "activations": schedule.n_activations,
        **planning_figures(planner, demand, schedule, ev.completion_s, repeats, name),
        "planner_setup_s": setup_s,
        "schedule_valid": report.valid,
        "validity": report.to_json(),
        "catalog": catalog,
        "rank_finish_s": list(ev.rank_finish_s),
    }
    if name == "nccl" and nccl is not None:  # NCCL's own completion; a static schedule plans nothing online
        result.update(_nccl_figures(nccl, schedule, ev))
        for key in ("planning_over_communication", "planning_over_communication_cold"):
            if result.get(key) is not None:
                result[key] = result[key] * ev.completion_s / result["completion_s"]
    if "planning_cpu_s" in schedule.meta:  # VarioPath: which decomposition loop ran
        result["planning_kernel"] = schedule.meta.get("kernel")
    if "certificate" in schedule.meta:
        result["certificate"] = schedule.meta["certificate"]
    return result, schedule.to_json()


# Wall-clock figures measured on this host (time.perf_counter / process_time): they differ run to run,
# so they go to timings.json, never to results.json. ``planning_over_communication`` divides the
# measured steady-state planning time by the modelled completion (paper 000, Section 6.4), so it is
# measured too; ``*_cold`` are the first call's.
MEASURED_KEYS = ("planning_s", "planning_s_per_activation", "planning_cpu_s", "planning_over_communication",
                 "planning_cold_s", "planning_cpu_cold_s", "planning_over_communication_cold", "planning_repeats",
                 "planner_setup_s")


def split_measured(result: dict) -> dict:
    """Move the measured figures of one scheduler's result into a timings dict (returned)."""
    timings = {k: result.pop(k) for k in MEASURED_KEYS if k in result}
    catalog = result.get("catalog")
    if catalog:  # build time, and whether this run found the catalog in the cache
        timings["catalog"] = {k: catalog.pop(k) for k in ("build_s", "cache") if k in catalog}
    certificate = result.get("certificate")
    if isinstance(certificate, dict) and "pricing_s" in certificate:
        timings["certificate_pricing_s"] = certificate.pop("pricing_s")
    return timings


def _plot(per: dict) -> bytes:
    from pipelines.plots import png_bytes, pyplot

    plt = pyplot()

    names = list(per)
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(names), 3.2))
    ax.bar(names, [per[n]["algbw_Bps"] / 1e9 for n in names], color="#4477aa")
    ax.set_ylabel("algorithmic bandwidth (GB/s)")
    ax.set_title("AlltoAllv bandwidth by scheduler")
    ax.tick_params(axis="x", rotation=30)
    return png_bytes(fig, dpi=120)


def run(cfg: dict) -> tuple[dict, dict]:
    """Plain config dict -> (results, artifacts)."""
    preflight("alltoallv", cfg)
    topology = build_topology(cfg["platform"], cfg.get("nodes", 1))
    demand = make_demand(dict(cfg["workload"]), topology.n_ranks)
    overhead_s = parse_time(cfg.get("activation_overhead", 0), "activation_overhead")
    cache_dir = cfg.get("catalog_cache")
    repeats = cfg.get("planning_repeats", 5)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 0:
        raise SpecError(f"planning_repeats={repeats!r} must be a whole number >= 0 (plans of the same demand "
                        "timed after a warm-up for the steady-state planning figure; 0 = the first call only)")
    names = [str(n) for n in (cfg.get("schedulers") or [])]
    single = not names
    if single:
        chosen = {names_key: dict(cfg["scheduler"]) for names_key in [cfg["scheduler"]["name"]]}
    else:
        chosen = {n: _scheduler_params(n) for n in names}  # unknown options fail before any work
    for params in chosen.values():
        SCHEDULERS.get(params["name"])
    base = {"platform": topology.name, "nodes": cfg.get("nodes", 1), "n_ranks": topology.n_ranks,
            "workload": dict(cfg["workload"]), "total_bytes": int(demand.sum()), "activation_overhead_s": overhead_s}
    per, artifacts, timings = {}, {}, {}
    nccl = nccl_model(cfg["platform"], topology, overhead_s)
    for n, params in chosen.items():
        res, sched = run_one(topology, demand, n, params, overhead_s, cache_dir, repeats, nccl)
        timings[n] = split_measured(res)
        per[n] = res
        artifacts["schedule.json" if single else f"schedule_{n}.json"] = sched
    if single:
        artifacts["timings.json"] = next(iter(timings.values()))
        return {**base, **next(iter(per.values()))}, artifacts
    artifacts["timings.json"] = {"schedulers": timings}
    artifacts["bandwidth_by_scheduler.png"] = _plot(per)
    best = max(per, key=lambda n: per[n]["algbw_Bps"])
    return {**base, "schedulers": per, "best": best,
            "speedup_vs": {n: per[n]["completion_s"] / per[best]["completion_s"] for n in per}}, artifacts


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _time(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    return f"{s * 1e3:.3g} ms" if s >= 1e-3 else f"{s * 1e6:.3g} us"


def _planning_text(r: dict, t: dict) -> str:
    """One scheduler's measured planning: steady state (``planning_over_communication``) and first call."""
    if t.get("planning_s") is None:
        return "no online planning"
    if r.get("registry_key") == "milp":  # certification, not online planning: solved once
        return f"MILP solved in {_time(t['planning_s'])}"
    def share(key: str) -> str:  # None when nothing is communicated (a zero completion)
        return "" if t.get(key) is None else f" = {100 * t[key]:.2f} %"

    steady = share("planning_over_communication")
    text = f"planning {_time(t['planning_s'])}" + (f"{steady} of the completion" if steady else "")
    if t.get("planning_repeats") and t.get("planning_cold_s") is not None:
        text += (f" (median of {t['planning_repeats']}; first call {_time(t['planning_cold_s'])}"
                 f"{share('planning_over_communication_cold')})")
    return text


def _scheduler_line(name: str, r: dict, t: dict) -> str:
    acts = r["activations"]
    return (f"{name}: completion {_time(r['completion_s'])}, algbw {r['algbw_Bps'] / 1e9:.1f} GB/s, "
            f"busbw {r['busbw_Bps'] / 1e9:.1f} GB/s, {acts} activation{'' if acts == 1 else 's'}; "
            f"{_planning_text(r, t)}")


def summary(results: dict, timings: dict) -> str:
    """What ``gx alltoallv`` prints: the case, then one line per scheduler (several: the best named)."""
    w = results["workload"]
    per_rank = {"zipf": f"{w.get('bytes_per_rank')} per source", "uniform": f"{w.get('bytes_per_rank')} per source",
                "moe": f"{w.get('tokens_per_rank')} tokens per rank", "file": f"from {w.get('path')}"}
    head = (f"{w.get('name')} demand ({per_rank.get(w.get('name'), '')}) on {results['n_ranks']} GPUs of "
            f"{results['platform']}: {_size(results['total_bytes'])} in all")
    if "schedulers" not in results:
        return head + "\n" + _scheduler_line(results["scheduler"], results, timings)
    lines = [_scheduler_line(n, r, timings["schedulers"].get(n, {})) for n, r in results["schedulers"].items()]
    best = results["best"]
    others = ", ".join(f"{n} {x:.2f}x" for n, x in results["speedup_vs"].items() if n != best)
    return "\n".join([head, *lines, f"best: {best}" + (f"; completion relative to it: {others}" if others else "")])


def task(cfg):
    from omegaconf import OmegaConf

    results, artifacts = run(OmegaConf.to_container(cfg, resolve=True))
    print(summary(results, artifacts["timings.json"]))
    return results, artifacts


main = gx_main("alltoallv")(task)

if __name__ == "__main__":
    main()
