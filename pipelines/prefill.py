"""``python -m pipelines.prefill``: an expert-parallel MoE phase (prefill | decode) on a fabric.

One run: the GXNET graph and passes on each rank's token shard (``gxnet.ep_phase``), expert
dispatch/combine AlltoAllv with per-layer routing demand (``gxnet.expert_routing``), run by the one
executor against the configured network model -- on a PCIe cluster (``fabric=pcie``,
``network=flow``: ``fabrics.network.pcie``) with the configured ``scheduler``.

results.json keys: ``latency_s`` (end to end), ``breakdown_s`` (attention, ffn, communication,
planning, fixed, other), ``alltoallv`` (``per_layer_dispatch_s``, ``per_layer_combine_s``,
``total_s``, ``mean_s``, ``max_s``), ``planning`` (per layer, ``total_s``),
``kv_allgather_total_s``, ``memory_bytes_per_rank``, ``tokens_per_rank``, ``dropped_rows``,
``routing``, ``scheduler``, ``platform``, ``nodes``, ``ep`` and the inputs. Experiment mode
(``points`` and ``compare`` set, e.g. ``+experiment=qwen3_prefill_pcie``): ``comparison``, one
row per point with each scheduler's latency and AlltoAllv time and the latency reduction of
the last scheduler over the first, beside the paper's. Artifacts: ``trace.json`` (single run).
"""

from __future__ import annotations

from typing import Any

from collectives.errors import SpecError
from pipelines.app import gx_main
from pipelines.budgets import preflight
from pipelines.network import build_network, config_get as _get, network_name, scheduler_choice
from pipelines.specs import accelerator_spec, model_spec, plain, positive_int
from pipelines.trace import chrome_trace


def ep_deployment(cfg: Any, *, ep: int | None = None):
    from gxnet.precision import precision_from_dict
    from gxnet.ep_phase import EpDeployment, PhaseSpec
    from gxnet.expert_routing import routing_from_dict

    phase = PhaseSpec(phase=str(_get(cfg, "phase", "prefill")),
                      requests=positive_int(_get(cfg, "requests", 1), "requests"),
                      prompt_tokens=positive_int(_get(cfg, "prompt_tokens", 8192), "prompt_tokens"),
                      context_tokens=positive_int(_get(cfg, "context", 1), "context"))
    routing = routing_from_dict(plain(_get(cfg, "routing", {})))
    if routing.model == "trace" and routing.trace_path:  # the file is read here, the ids checked in gxnet
        from dataclasses import replace

        from pipelines.file_checks import read_array

        routing = replace(routing, trace=read_array(routing.trace_path, "routing.trace_path"))
    from pipelines.program_store import attach_default_program_store

    attach_default_program_store()  # the phase compiles its family's program: kept between processes
    return EpDeployment(model=model_spec(cfg), accelerator=accelerator_spec(cfg),
                        ep=ep if ep is not None else positive_int(cfg["ep"], "ep"), phase=phase,
                        routing=routing,
                        precision=precision_from_dict(plain(_get(cfg, "precision"))))


def run_point(cfg: Any, *, ep: int | None = None, nodes: int | None = None, scheduler: str | None = None):
    from gxnet.ep_phase import build_phase_plan, execute_phase

    dep = ep_deployment(cfg, ep=ep)
    net = build_network(cfg, dep.accelerator, dep.ep, scheduler=scheduler, nodes=nodes)
    plan = build_phase_plan(dep)
    return dep, net, execute_phase(plan, net)


def results_of(cfg: Any, dep, net, res) -> dict:
    fab = dict(plain(cfg["fabric"]))
    out = {
        "model": dep.model.name, "accelerator": dep.accelerator.name, "phase": dep.phase.phase,
        "requests": dep.phase.requests, "prompt_tokens": dep.phase.prompt_tokens,
        "context_tokens": dep.phase.context_tokens, "tokens": dep.phase.tokens, "ep": dep.ep,
        "routing": {"model": dep.routing.model, "seed": dep.routing.seed, "zipf_s": dep.routing.zipf_s,
                    "placement": dep.routing.placement, "capacity_factor": dep.routing.capacity_factor,
                    "bucket_levels": list(dep.routing.bucket_levels), "dedup": dep.routing.dedup},
        "fabric": fab.get("name"),
        "network": network_name(cfg),
    }
    details = net.report().details or {}
    for key in ("platform", "nodes", "scheduler", "planning_mode"):
        if key in details:
            out[key] = details[key]
    if details.get("scheduler") == "nccl" and "nccl" in details:  # the PCIe NCCL baseline: what NCCL ran
        out["nccl"] = details["nccl"]
    out.update(res.summary())
    return out


def _experiment(cfg: Any) -> dict:
    points = list(plain(_get(cfg, "points", [])) or [])
    compare = [str(s) for s in (plain(_get(cfg, "compare", [])) or [])]
    if not compare:
        compare = [scheduler_choice(cfg)[0]]
    if network_name(cfg) == "nccl" and set(compare) != {"nccl"}:  # NCCL has one AlltoAllv: its own
        raise SpecError(f"compare={compare} needs AlltoAllv schedulers but network=nccl runs NCCL's own "
                        "(pairwise grouped sends) only; use network=auto (the flow model) to compare schedulers")
    rows = []
    for pt in points:
        pt = dict(pt)
        ep = positive_int(pt.get("ep"), "points[].ep")
        nodes = positive_int(pt.get("nodes", _get(cfg, "nodes", 1)), "points[].nodes")
        row: dict = {"ep": ep, "nodes": nodes, "paper_reduction_pct": pt.get("paper_reduction_pct")}
        for s in compare:
            dep, net, res = run_point(cfg, ep=ep, nodes=nodes, scheduler=s)
            summ = res.summary()
            row[s] = {"latency_s": res.latency_s, "alltoallv_total_s": summ["alltoallv"]["total_s"],
                      "planning_total_s": summ["planning"]["total_s"], "breakdown_s": summ["breakdown_s"]}
            nccl = (net.report().details or {}).get("nccl")
            if nccl:  # the collectives NCCL ran, as "<algorithm>/<protocol>" per row
                row[s]["nccl_choices"] = nccl["choices"]
        if len(compare) >= 2:
            base, new = row[compare[0]], row[compare[-1]]
            row["latency_reduction_pct"] = 100.0 * (1 - new["latency_s"] / base["latency_s"])
            row["alltoallv_reduction_pct"] = (100.0 * (1 - new["alltoallv_total_s"] / base["alltoallv_total_s"])
                                              if base["alltoallv_total_s"] > 0 else 0.0)
            row["latency_reduction_without_planning_pct"] = 100.0 * (
                1 - (new["latency_s"] - new["planning_total_s"]) / (base["latency_s"] - base["planning_total_s"]))
        rows.append(row)
    return {"model": model_spec(cfg).name, "phase": str(_get(cfg, "phase", "prefill")),
            "prompt_tokens": _get(cfg, "prompt_tokens"), "compare": compare,
            "routing": dict(plain(_get(cfg, "routing", {}))), "comparison": rows}


def summary(res: dict) -> str:
    if "comparison" in res:
        lines = [f"{res['model']} {res['phase']}: {' vs '.join(res['compare'])}"]
        for r in res["comparison"]:
            lat = ", ".join(f"{s} {r[s]['latency_s'] * 1e3:.1f} ms" for s in res["compare"])
            paper = f" (paper {r['paper_reduction_pct']} %)" if r.get("paper_reduction_pct") is not None else ""
            red = (f"; latency reduction {r['latency_reduction_pct']:.1f} %{paper}, AlltoAllv {r['alltoallv_reduction_pct']:.1f} %, "
                   f"without planning {r['latency_reduction_without_planning_pct']:.1f} %") if "latency_reduction_pct" in r else ""
            lines.append(f"  EP{r['ep']} on {r['nodes']} nodes: {lat}{red}")
        return "\n".join(lines)
    b = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in res["breakdown_s"].items())
    return (f"{res['model']} {res['phase']} ({res['tokens']} tokens) on EP{res['ep']} x {res['accelerator']}, "
            f"fabric {res['fabric']}" + (f" ({res.get('platform')} x {res.get('nodes')}, {res.get('scheduler')})" if "platform" in res else "")
            + f"\nlatency {res['latency_s'] * 1e3:.2f} ms; AlltoAllv total {res['alltoallv']['total_s'] * 1e3:.2f} ms, "
            f"planning {res['planning']['total_s'] * 1e3:.2f} ms\nbreakdown: {b}")


def task(cfg):
    preflight("prefill", cfg)
    if plain(_get(cfg, "points", [])):
        res = _experiment(cfg)
        print(summary(res))
        return res
    dep, net, step = run_point(cfg)
    res = results_of(cfg, dep, net, step)
    print(summary(res))
    return res, {"trace.json": chrome_trace(step.events, process_name=f"{dep.model.name} {dep.phase.phase}")}


main = gx_main("prefill")(task)

if __name__ == "__main__":
    main()
