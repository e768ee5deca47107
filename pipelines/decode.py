"""``python -m pipelines.decode``: one timed decode step (paper 003, Section 4, Appendix B).

results.json keys: ``decode_step_s``, ``interactivity_tok_s_user``, ``throughput_tok_s``,
``breakdown_s`` (attention, ffn, communication, fixed, ...), ``memory_bytes_per_rank``,
``parallel``, ``collective_time_s``, plus the inputs (model, accelerator, world, batch,
context_tokens, fabric, network). Power (pipelines/power.py, docs/power.md): on the scale-up
fabrics (``fabric=single_eps|single_ocs|all_eps|hybrid|all_ocs``, paper 003 Table 12, D.4)
``system_power_W`` is every accelerator of the fabric incl. host share, switch ports, pluggables,
CPO (``fabric.link_rate`` selects the Table 12 column); on GPU fabrics (``nvswitch``,
``gpu_cluster``) it is what the deployment uses (GPUs, their NVSwitch share, NICs and leaf/spine
ports across nodes); with ``tokens_per_s_per_MW`` (= throughput_tok_s / system_power_W · 1e6),
``power_breakdown_W``, ``accelerator_power_W`` or ``power_note``. Also ``schedules``
({region/axis/collective: schedule}) and, for hybrid and OCS fabrics, ``plan`` (a summary of the
deployment's circuit plan). Artifacts: ``trace.json`` (Chrome trace, one track per distinct rank
behaviour), ``power.json`` (the whole power accounting, with ``deployment_power_W`` beside the
paper's system power) and, for hybrid and OCS fabrics, ``plan.json`` (the plan the circuits were
configured from). On the GPU fabrics
(``fabric=nvswitch|gpu_cluster``) also ``cluster`` {nodes, gpus_per_node, nvlink_ports,
nvlink_rate_Bps, nvls, nics_per_node, nic_rate_Bps}: the NVLink domains and NICs the step ran on
(``world=1``: one GPU, no collectives).
"""

from __future__ import annotations

import dataclasses

from collectives.errors import SpecError
from pipelines.app import gx_main
from pipelines.budgets import preflight
from pipelines.network import build_network, network_name
from pipelines.power import power_line
from pipelines.specs import deployment_spec, plain
from pipelines.trace import chrome_trace


def evaluate(cfg, deployment=None, network=None):
    """Build (cached) plan and execute it with the configured network model.

    A network model may be passed in to be reused across deployments (its price caches
    survive; ``execute`` calls ``prepare`` with each deployment's demand).
    """
    from gxnet.executor import execute
    from gxnet.plan import build_plan

    dep = deployment if deployment is not None else deployment_spec(cfg)
    if network is None:
        network = build_network(cfg, dep.accelerator, dep.world)
    return dep, execute(build_plan(dep), network)


def results_of(cfg, dep, step) -> dict:
    return {
        "model": dep.model.name,
        "accelerator": dep.accelerator.name,
        "world": dep.world,
        "batch": dep.batch,
        "context_tokens": dep.context_tokens,
        "parallel": dataclasses.asdict(dep.parallel),
        "fabric": plain(cfg["fabric"]).get("name"),
        "network": network_name(cfg),
        "decode_step_s": step.decode_step_s,
        "interactivity_tok_s_user": step.interactivity_tok_s_user,
        "throughput_tok_s": step.throughput_tok_s,
        "breakdown_s": dict(step.breakdown_s),
        "memory_bytes_per_rank": step.memory_bytes_per_rank,
        "collective_time_s": {
            "/".join(k) if isinstance(k, tuple) else str(k): v for k, v in dict(step.collective_time_s).items()
        },
    }


def gpu_cluster_results(cfg, dep) -> dict:
    """``cluster``: what a GPU fabric is made of (nothing on the other fabrics)."""
    from pipelines.network import GPU_FABRICS, cluster_spec, fabric_name

    if fabric_name(cfg) not in GPU_FABRICS:
        return {}
    c = cluster_spec(cfg, dep.accelerator, dep.world)
    so = c.scale_out
    return {"cluster": {"nodes": c.nodes, "gpus_per_node": c.node.gpus, "nvlink_ports": c.node.nvlink_ports,
                        "nvlink_rate_Bps": c.node.nvlink_rate_Bps, "nvls": c.node.nvls,
                        "nics_per_node": None if so is None else so.nics_per_node,
                        "nic_rate_Bps": None if so is None else so.nic_rate_Bps}}


def summary(res: dict) -> str:
    b = res["breakdown_s"]
    parts = ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in b.items())
    par = res["parallel"]
    return (
        f"{res['model']} on {res['world']} x {res['accelerator']}, batch {res['batch']}, "
        f"context {res['context_tokens']:,} tokens, {par}\n"
        f"fabric {res['fabric']} ({res['network']}): decode step {res['decode_step_s'] * 1e3:.3f} ms "
        f"-> {res['interactivity_tok_s_user']:.1f} tok/s/user, {res['throughput_tok_s']:.1f} tok/s\n"
        f"breakdown: {parts}\n"
        f"memory per rank: {res['memory_bytes_per_rank'] / 1e9:.1f} GB"
    )


# --- power (pipelines/power.py, docs/power.md) and what the network model reports -----------------

def fabric_results(cfg, dep, step, network) -> tuple[dict, dict | None, dict | None]:
    """Power (scale-up and GPU fabrics), what the network model reports (schedules, the circuit plan
    of hybrid and OCS fabrics, model details), the plan.json artifact and the whole power accounting
    (power.json: ``deployment_power_W`` beside the paper's system power)."""
    from pipelines.power import fabric_power, power_results

    power = fabric_power(cfg, dep.accelerator, dep.world)
    out: dict = power_results(power, step.throughput_tok_s)
    report = network.report()
    if report.schedules:
        out["schedules"] = dict(report.schedules)
    if report.plan_summary is not None:
        out["plan"] = dict(report.plan_summary)
    if report.details is not None:
        out["network_report"] = dict(report.details)
    return out, (None if report.plan_summary is None else report.plan_json), power


# --- fabric=pcie (issue #9): the expert-parallel decode phase on a PCIe cluster ----------------------
# The EP phase of pipelines.prefill (gxnet.ep_phase, phase=decode): one token per request through the
# GXNET graph on each rank's token shard, expert dispatch/combine as AlltoAllv with per-layer routing
# demand, scheduled by `scheduler=` and timed by the contention-aware flow-level evaluator
# (fabrics.network.pcie); the scheduler's planning is charged on the critical path.

def _opt(cfg, key: str):
    try:
        return cfg.get(key) if hasattr(cfg, "get") else None
    except Exception:  # pragma: no cover - omegaconf missing-value errors
        return None


def pcie_view(cfg) -> dict:
    """decode's config as the mapping pipelines.prefill reads (phase=decode, requests=batch).

    EP degree: ``ep=`` else ``parallel.ep``; nodes: ``nodes=`` else ``fabric.nodes``; platform,
    scheduler and routing: their groups when selected, else ``fabric.platform`` / ``fabric.scheduler``
    / uniform routing (paper 003, B.2).
    """
    from pipelines.specs import positive_int

    compute = plain(_opt(cfg, "compute")) or {}
    if compute.get("name", "roofline") != "roofline":
        raise SpecError(f"compute={compute.get('name')!r} is not available with fabric=pcie; use compute=roofline")
    ep = _opt(cfg, "ep")
    if ep is None:
        ep = (plain(_opt(cfg, "parallel")) or {}).get("ep")
    fab = dict(plain(cfg["fabric"]))
    nodes = _opt(cfg, "nodes")
    return {
        "model": plain(cfg["model"]), "accelerator": plain(cfg["accelerator"]), "fabric": fab,
        "precision": plain(_opt(cfg, "precision")), "platform": plain(_opt(cfg, "platform")),
        "scheduler": plain(_opt(cfg, "scheduler")), "routing": plain(_opt(cfg, "routing")) or {},
        "network": plain(_opt(cfg, "network")) or {"name": "auto"},
        "phase": "decode", "requests": positive_int(cfg["batch"], "batch"),
        "context": positive_int(cfg["context"], "context"),
        "ep": positive_int(ep, "ep"),
        "nodes": positive_int(nodes if nodes is not None else fab.get("nodes", 1), "nodes"),
    }


def pcie_task(cfg):
    from pipelines import prefill

    view = pcie_view(cfg)
    dep, net, step = prefill.run_point(view)
    res = prefill.results_of(view, dep, net, step)
    res.pop("prompt_tokens", None)  # a prefill input; decode routes one token per request
    latency = res["latency_s"]
    a2a = res["alltoallv"]
    res.update({
        "world": dep.ep, "batch": dep.phase.requests, "parallel": {"scheme": "ep", "ep": dep.ep},
        "decode_step_s": latency,
        "interactivity_tok_s_user": 1.0 / latency,
        "throughput_tok_s": dep.phase.requests / latency,
        "collective_time_s": {"ffn/ep/alltoallv_dispatch": float(sum(a2a["per_layer_dispatch_s"])),
                              "ffn/ep/alltoallv_combine": float(sum(a2a["per_layer_combine_s"]))},
    })
    print(prefill.summary(res) + f"\ndecode step {latency * 1e3:.3f} ms -> {res['interactivity_tok_s_user']:.1f} "
          f"tok/s/user, {res['throughput_tok_s']:.1f} tok/s")
    return res, {"trace.json": chrome_trace(step.events, process_name=f"{dep.model.name} decode step")}
# -------------------------------------------------------------------------------------------------------


def task(cfg):
    preflight("decode", cfg)
    if plain(cfg["fabric"]).get("name") == "pcie":
        return pcie_task(cfg)
    from pipelines.hardware.measured import evaluate_compute

    dep = deployment_spec(cfg)
    network = build_network(cfg, dep.accelerator, dep.world)
    step, compute_results = evaluate_compute(cfg, dep, network)  # compute=roofline | measured, on this network
    res = {**results_of(cfg, dep, step), **compute_results, **gpu_cluster_results(cfg, dep)}
    extra, plan_json, power = fabric_results(cfg, dep, step, network)
    res.update(extra)
    timings = {}
    if "sim_wall_s" in res.get("network_report", {}):  # measured wall time: timings.json, not results.json
        timings["sim_wall_s"] = res["network_report"].pop("sim_wall_s")
    print(summary(res) + power_line(res, power))
    artifacts = {"trace.json": chrome_trace(step.events, process_name=f"{dep.model.name} decode step")}
    if timings:
        artifacts["timings.json"] = timings
    if plan_json is not None:
        artifacts["plan.json"] = plan_json
    if power is not None and power.get("system_power_W") is not None:
        artifacts["power.json"] = power
    return res, artifacts


main = gx_main("decode")(task)

if __name__ == "__main__":
    main()
