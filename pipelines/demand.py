"""``python -m pipelines.demand``: the deployment-time demand table (paper 003, Table 1).

results.json: ``collectives`` = list of {region, axis, collective, groups, ranks,
calls_per_step, payload_bytes}, plus ``parallel``, ``model``, ``world``, ``batch``.
"""

from __future__ import annotations

import dataclasses

from pipelines.app import gx_main
from pipelines.budgets import preflight
from pipelines.specs import deployment_spec


def task(cfg) -> dict:
    from gxnet.plan import deployment_demand

    preflight("demand", cfg)
    dep = deployment_spec(cfg)
    rows = deployment_demand(dep)
    results = {
        "model": dep.model.name,
        "world": dep.world,
        "batch": dep.batch,
        "parallel": dataclasses.asdict(dep.parallel),
        "collectives": [dataclasses.asdict(r) for r in rows],
    }
    print(format_demand(rows))
    return results


def format_demand(rows) -> str:
    lines = [f"{'region':<10} {'axis':<6} {'collective':<14} {'G x R':>10} {'calls':>6} {'payload':>12}"]
    for r in rows:
        lines.append(
            f"{r.region:<10} {r.axis:<6} {r.collective:<14} {f'{r.groups} x {r.ranks}':>10} "
            f"{r.calls_per_step:>6} {human_bytes(r.payload_bytes):>12}"
        )
    return "\n".join(lines)


def human_bytes(n: float) -> str:
    if n == 0:
        return "-"
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % (scale // 1024 if scale > 1024 else 1) == 0:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


main = gx_main("demand")(task)

if __name__ == "__main__":
    main()
