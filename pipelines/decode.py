"""``python -m pipelines.decode``: one timed decode step (paper 003, Section 4, Appendix B).

results.json keys: ``decode_step_s``, ``interactivity_tok_s_user``, ``throughput_tok_s``,
``breakdown_s`` (attention, ffn, communication, fixed, ...), ``memory_bytes_per_rank``,
``parallel``, ``collective_time_s``, plus the inputs (model, accelerator, world, batch,
context_tokens, fabric, network). Artifacts: ``trace.json`` (Chrome trace, one track per
distinct rank behaviour).
"""

from __future__ import annotations

import dataclasses

from pipelines.app import gx_main
from pipelines.network import build_network
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
        "network": plain(cfg["network"]).get("name"),
        "decode_step_s": step.decode_step_s,
        "interactivity_tok_s_user": step.interactivity_tok_s_user,
        "throughput_tok_s": step.throughput_tok_s,
        "breakdown_s": dict(step.breakdown_s),
        "memory_bytes_per_rank": step.memory_bytes_per_rank,
        "collective_time_s": {
            "/".join(k) if isinstance(k, tuple) else str(k): v for k, v in dict(step.collective_time_s).items()
        },
    }


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


def task(cfg):
    dep, step = evaluate(cfg)
    res = results_of(cfg, dep, step)
    print(summary(res))
    return res, {"trace.json": chrome_trace(step.events, process_name=f"{dep.model.name} decode step")}


main = gx_main("decode")(task)

if __name__ == "__main__":
    main()
