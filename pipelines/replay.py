"""``python -m pipelines.replay``: replay an AlltoAllv schedule on the hardware at hand (issue #8).

Input: ``schedule=<schedule.json>`` or ``run_id=<MLflow run>`` (its ``schedule.json`` artifact, or
the one ``schedule=`` names, e.g. ``schedule_variopath.json`` of a multi-scheduler run; the replay
is then logged as a child run of that run). One process per rank (``launcher=spawn``,
this host) or ``launcher=torchrun`` (writes ``replay_input.json``; run it with torchrun on every
node, then ``reports=<rank_reports.json>`` turns the gathered reports into results.json).
NCCL with one GPU per rank where torch sees enough GPUs, gloo on CPU otherwise.

results.json keys: ``verified``, ``completion_s``, ``algbw_Bps``, ``busbw_Bps``,
``predicted_completion_s``, ``measured_over_predicted``, ``activation_s``, ``checked_bytes``,
``backend``, ``device``, ``world_size``, ``schedule`` (scheduler, platform, activations,
total_bytes), ``plans`` (every replayed plan's measurement: the schedule, ``compare`` files and
the ``baselines``), ``speedup_over`` (baseline completion / schedule completion).
A dead or hung rank, or a byte that does not verify, ends the run with exit code 1, one line on
stderr naming the rank, no results.json, and (with ``run_id``) a FAILED child run.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from collectives.errors import SpecError
from pipelines.app import gx_main
from pipelines.outputs import dump_json
from pipelines.budgets import budget_of, replay_estimate
from pipelines.budgets import check as check_budget
from pipelines.hardware.launcher import ReplayFailure
from pipelines.hardware.replay_plan import pairwise_plan, plan_from_schedule, single_call_plan
from pipelines.hardware.replay_results import failure_of, measure
from pipelines.hardware import schedule_source as src
from pipelines.specs import plain
from pipelines.units import parse_time

BASELINES = {"nccl_pairwise": pairwise_plan, "all_to_all_single": single_call_plan}


def _whole(value, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(f"{what}={value!r} must be a whole number >= {minimum}")
    return value


def options_of(cfg, world: int) -> dict:
    """Validated runtime options shared by every rank."""
    backend = str(cfg.backend)
    if backend not in ("auto", "gloo", "nccl"):
        raise SpecError(f"backend={backend!r} is unknown; use auto, gloo or nccl")
    if backend != "gloo" and cfg.launcher == "spawn":
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if backend == "auto":
            backend = "nccl" if gpus >= world else "gloo"
        elif gpus < world:
            raise SpecError(f"backend=nccl needs one GPU per rank: world_size={world} but torch sees {gpus} GPU(s); "
                            f"use backend=gloo or launcher=torchrun across nodes")
    elif backend == "auto":
        backend = "nccl"  # torchrun: ranks on GPU nodes
    timeout_s = parse_time(cfg.timeout, "timeout")
    fault = plain(cfg.fault) or {}
    if fault.get("rank") is not None:
        _whole(fault["rank"], "fault.rank", 0)
        if fault["rank"] >= world:
            raise SpecError(f"fault.rank={fault['rank']} is not a rank of world_size={world}")
        if fault.get("mode", "kill") not in ("kill", "hang", "corrupt"):
            raise SpecError(f"fault.mode={fault.get('mode')!r} is unknown; use kill, hang or corrupt")
    return {
        "backend": backend,
        "warmup": _whole(cfg.warmup, "warmup", 0),
        "iterations": _whole(cfg.iterations, "iterations", 1),
        "timeout_s": timeout_s,
        "startup_timeout_s": parse_time(cfg.startup_timeout, "startup_timeout"),
        # the process group's own timeout sits above the watchdog's, so the parent names the rank first
        "collective_timeout_s": 2 * timeout_s + 30,
        "threads_per_rank": _whole(cfg.threads_per_rank, "threads_per_rank", 1),
        "fault": fault if fault.get("rank") is not None else {},
    }


def plans_of(cfg, schedule: dict) -> list:
    main = plan_from_schedule(schedule)
    plans = [main]
    for path in plain(cfg.compare) or []:
        other = src.load_schedule(path, "compare")
        p = plan_from_schedule(other, name=f"{other.get('scheduler', 'schedule')}:{Path(path).stem}")
        if p.demand != main.demand:
            raise SpecError(f"compare schedule {path} has another demand than the replayed schedule; compare "
                            f"schedules of the same demand")
        plans.append(p)
    for name in plain(cfg.baselines) or []:
        if name not in BASELINES:
            raise SpecError(f"baselines entry {name!r} is unknown; use {', '.join(BASELINES)}")
        plans.append(BASELINES[name](main.demand))
    return plans


def predictions(cfg, schedule: dict, plans: list) -> dict[str, float]:
    platform = src.platform_dict(cfg.predict.platform, schedule)
    if platform is None:
        return {}
    cluster = src.cluster_of(platform, schedule["world_size"], cfg.predict.nodes)
    overhead = parse_time(cfg.predict.activation_overhead, "predict.activation_overhead")
    out = {plans[0].name: src.predict(schedule, cluster, overhead)}
    for path in plain(cfg.compare) or []:
        other = src.load_schedule(path, "compare")
        out[f"{other.get('scheduler', 'schedule')}:{Path(path).stem}"] = src.predict(other, cluster, overhead)
    if any(p.name == "nccl_pairwise" for p in plans):
        out["nccl_pairwise"] = src.predict_pairwise(plans[0].demand, cluster, overhead)
    return out


def results_of(schedule: dict, plans: list, measurements: list[dict], predicted: dict, options: dict,
               device: str) -> dict:
    main = measurements[0]
    for m in measurements:
        m["predicted_completion_s"] = predicted.get(m["name"])
    pred = main["predicted_completion_s"]
    return {
        "schedule": {"scheduler": schedule.get("scheduler"), "platform": schedule.get("platform"),
                     "activations": plans[0].n_activations, "total_bytes": plans[0].total_bytes},
        "world_size": plans[0].world_size,
        "backend": options["backend"],
        "device": device,
        "warmup": options["warmup"],
        "iterations": options["iterations"],
        "verified": all(m["verified"] for m in measurements),
        "checked_bytes": main["checked_bytes"],
        "completion_s": main["completion_s"],
        "algbw_Bps": main["algbw_Bps"],
        "busbw_Bps": main["busbw_Bps"],
        "predicted_completion_s": pred,
        "measured_over_predicted": main["completion_s"] / pred if pred else None,
        "activation_s": main["activation_s"],
        "speedup_over": {m["name"]: m["completion_s"] / main["completion_s"] for m in measurements[1:]},
        "plans": measurements,
    }


def _device_name(backend: str) -> str:
    if backend != "nccl":
        import platform

        return f"cpu ({platform.processor() or platform.machine()})"
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cuda"


def _tracker(cfg):
    tracking = plain(cfg.get("tracking")) or {}
    if not tracking.get("enabled"):
        return None
    from pipelines.tracking import Tracker, default_uri

    return Tracker(uri=tracking.get("uri") or default_uri(), experiment=tracking.get("experiment") or "gxnet")


def _log_child(cfg, tracker, results: dict | None, artifacts: dict, error: str | None) -> None:
    """Log the replay as a child run of ``run_id`` (measured beside predicted in the same run tree)."""
    from pipelines.tracking import config_hash

    params = {k: v for k, v in (plain(cfg) or {}).items() if k not in ("tracking", "hydra")}
    with tempfile.TemporaryDirectory() as tmp:
        for name, content in artifacts.items():
            Path(tmp, name).write_text(content if isinstance(content, str) else dump_json(content))
        if results is not None:
            Path(tmp, "results.json").write_text(dump_json(results))
        tracker.log_point(cfg.run_id, pipeline="replay", cfg_hash=config_hash("replay", params),
                          name=f"replay {results['backend'] if results else ''}".strip(), params=params,
                          results=results, artifact_dir=Path(tmp), error=error)
    # gx_main would log this run again, without a parent: the child run above is the record
    cfg.tracking.enabled = False


def task(cfg):
    from pipelines.hardware.launcher import launch

    if cfg.schedule is None and cfg.run_id is None:
        raise SpecError("give exactly one of schedule=<path to schedule.json> or run_id=<MLflow run>")
    if cfg.launcher not in ("spawn", "torchrun"):
        raise SpecError(f"launcher={cfg.launcher!r} is unknown; use spawn or torchrun")
    tracker = _tracker(cfg)
    if cfg.run_id is not None:
        if tracker is None:
            raise SpecError("run_id needs MLflow: set tracking.enabled=true (and tracking.uri if not ./mlflow.db)")
        with tempfile.TemporaryDirectory() as tmp:  # with run_id, schedule= names the artifact (schedule_<name>.json)
            schedule = src.schedule_from_run(tracker.client, str(cfg.run_id), Path(tmp),
                                             str(cfg.schedule or "schedule.json"))
    else:
        schedule = src.load_schedule(cfg.schedule)
    check_budget("replay", replay_estimate(schedule, cfg), budget_of(cfg))
    plans = plans_of(cfg, schedule)
    world = plans[0].world_size
    options = options_of(cfg, world)
    predicted = predictions(cfg, schedule, plans)
    plan_json = [p.to_json() for p in plans]
    if cfg.launcher == "torchrun" and cfg.reports is None:
        return _prepare_torchrun(plans, plan_json, options)
    try:
        if cfg.reports is not None:
            per_rank = _gathered_reports(cfg.reports, world, len(plans))
        else:
            per_rank = launch(plan_json, world, options, timeout_s=options["timeout_s"],
                              startup_timeout_s=options["startup_timeout_s"])
        measurements = [measure(p, [per_rank[r][i] for r in range(world)], options["warmup"])
                        for i, p in enumerate(plans)]
        bad = failure_of(measurements)
        if bad:
            raise ReplayFailure(f"verification failed: {bad}")
    except ReplayFailure as exc:
        if tracker is not None and cfg.run_id is not None:
            _log_child(cfg, tracker, None, {}, str(exc))
        print(f"error: replay failed: {exc}", file=sys.stderr)
        sys.exit(1)
    res = results_of(schedule, plans, measurements, predicted, options, _device_name(options["backend"]))
    print(summary(res))
    artifacts = {"replayed_schedule.json": schedule}
    if tracker is not None and cfg.run_id is not None:
        _log_child(cfg, tracker, res, artifacts, None)
    return res, artifacts


def _prepare_torchrun(plans, plan_json, options):
    """launcher=torchrun: the input every rank reads, and the commands to run (see README.md)."""
    world = plans[0].world_size
    cmd = (f"torchrun --nnodes=<nodes> --nproc-per-node=<gpus per node> --max-restarts=0 --rdzv-backend=c10d "
           f"--rdzv-endpoint=<host0>:29500 -m pipelines.hardware.replay_worker replay_input.json <shared dir>")
    res = {"status": "prepared", "verified": None, "world_size": world, "backend": options["backend"],
           "plans": [p.name for p in plans], "torchrun_command": cmd,
           "collect_command": "python -m pipelines.replay schedule=<same> reports=<shared dir>/rank_reports.json"}
    print(f"wrote replay_input.json for {world} ranks; run on every node:\n  {cmd}")
    return res, {"replay_input.json": {"plans": plan_json, "options": options}}


def _gathered_reports(path, world: int, n_plans: int) -> list:
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"reports={str(path)!r} does not exist; torchrun's rank 0 writes <out dir>/rank_reports.json")
    from pipelines.file_checks import load_reports

    data = load_reports(p)
    reports = data["reports"]
    if data.get("world_size") != world or len(reports) != world or any(len(r) != n_plans for r in reports):
        raise SpecError(f"reports {p.name} hold {len(reports)} ranks; this replay needs {world} ranks x {n_plans} "
                        f"plans (same schedule, compare and baselines as the torchrun run)")
    return reports


def summary(res: dict) -> str:
    lines = [f"replay of {res['schedule']['scheduler']} ({res['schedule']['activations']} activations, "
             f"{res['schedule']['total_bytes']:,} B) on {res['world_size']} ranks, {res['backend']} / {res['device']}: "
             f"verified={res['verified']}"]
    for m in res["plans"]:
        pred = m.get("predicted_completion_s")
        ptxt = f", predicted {pred * 1e6:.1f} us" if pred else ""
        lines.append(f"  {m['name']:<24} {m['completion_s'] * 1e3:9.3f} ms  algbw {m['algbw_Bps'] / 1e9:7.3f} GB/s  "
                     f"busbw {m['busbw_Bps'] / 1e9:7.3f} GB/s{ptxt}")
    return "\n".join(lines)


main = gx_main("replay")(task)

if __name__ == "__main__":
    main()
