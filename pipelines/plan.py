"""``python -m pipelines.plan``: plan the OCS circuits of a deployment's meshes (paper 003, A.1-A.2, A.6).

results.json: ``total_time_s`` (Σ w·T over the axes), ``host_degree`` (distinct generators),
``ports_used`` (Σ p over generators), ``ports``, ``allocation``, ``request_hash`` and ``axes``
= list of {mesh, axis, size, topology, degree, phases, multiplicity, schedule, time_s}.
Artifact ``plan.json``: the same plus each axis's bits, generators and volume, the generator
multiplicities, the generator carried by every port and the bit partition of every mesh.
"""

from __future__ import annotations

import time

from collectives.errors import SpecError
from pipelines.app import gx_main
from pipelines.outputs import Artifacts
from pipelines.budgets import preflight
from pipelines.specs import plain, positive_int
from pipelines.units import parse_bytes, parse_rate, parse_time


def plan_request(cfg):
    from fabrics.planner import request_from_dict

    meshes = plain(cfg["meshes"])
    if not isinstance(meshes, list) or not meshes:
        raise SpecError("meshes must be a non-empty list, e.g. 'meshes=[{shape:[4,64],collective:allreduce,payloads:[4KiB,32KiB]}]'")
    parsed = []
    for i, m in enumerate(meshes):
        if not isinstance(m, dict):
            raise SpecError(f"meshes[{i}]={m!r} must be a mapping with shape, collective and payloads")
        m = dict(m)
        if "payloads" in m:
            pay = m["payloads"] if isinstance(m["payloads"], list) else [m["payloads"]]
            m["payloads"] = [parse_bytes(p, f"meshes[{i}].payloads") for p in pay]
        parsed.append(m)
    return request_from_dict(
        world=positive_int(cfg["world"], "world"),
        ports=positive_int(cfg["ports"], "ports"),
        link_rate_Bps=parse_rate(cfg["link_rate"], "link_rate"),
        hop_latency_s=parse_time(cfg["hop_latency"], "hop_latency"),
        meshes=parsed,
        allocation=str(cfg.get("allocation", "shared_host")),
        schedule=str(cfg.get("schedule", "auto")),
    )


def task(cfg):
    from fabrics.planner import plan

    preflight("plan", cfg)
    request = plan_request(cfg)
    start = time.perf_counter()
    result = plan(request)
    elapsed = time.perf_counter() - start
    results = {"world": request.world, "link_rate_Bps": request.link_rate_Bps,
               "hop_latency_s": request.hop_latency_s, **result.results()}
    print(f"{result.allocation} plan: T = {result.total_time_s * 1e6:.2f} µs, {result.ports_used} of "
          f"{result.ports} ports, host degree {result.host_degree} ({elapsed:.3f} s)")
    for a in result.axes:
        print(f"  mesh {a.mesh} axis {a.axis}: size {a.size:>4} {a.topology:<14} deg {a.degree:>2} h {a.phases} "
              f"p {a.multiplicity} {a.schedule:<24} {a.time_s * 1e6:.2f} µs")
    return results, Artifacts({"plan.json": result.to_json()})


main = gx_main("plan")(task)

if __name__ == "__main__":
    main()
