"""Reference cases of Simlette's two modes: what they must keep giving while the engine gets faster.

``outputs(case)`` runs one case and returns its observable results: completion times, the schedule,
the last credit return, and every used link's bytes, busy time and credit-stall time (as a digest
of their exact values, plus totals). The reference data in
``tests/data/simlette_reference.json`` was written by this module from the engine *before* its speed
work (``python tests/unit/simlette_reference_cases.py --write``), and the test compares the
current engine's outputs with it exactly (``test_simlette_reference.py``). The event count is
recorded for information only. ``--write`` is for adding cases: it rewrites every entry from the
engine at hand, so run it from the revision the data came from (6f183eb), never to make a changed
engine pass.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

KIB = 1024
R = 5e10
DATA = Path(__file__).resolve().parents[1] / "data" / "simlette_reference.json"


def _fab(kind: str, n: int, ports: int, **extra) -> dict:
    return {"kind": kind, "ports": ports, "link_rate_Bps": R, "accelerators": n, **extra}


TWO_LEVEL = {"down_ports": 32, "switch_radix": 72}
# (name, fabric, network, collective, payload bytes, group size or None, slow)
_BASE = [
    ("eps32_oneshot", _fab("single_eps", 32, 8), {"schedule": "one_shot"}, "allreduce", 40 * KIB, None),
    ("eps16_auto", _fab("single_eps", 16, 4), {}, "allreduce", 40 * KIB, None),
    ("eps16_alltoall", _fab("single_eps", 16, 4), {}, "alltoall", 24 * KIB + 100, None),
    ("alleps64_allreduce", _fab("all_eps", 64, 4, up_ports=8, **TWO_LEVEL), {}, "allreduce", 16 * KIB, None),
    ("alleps64_alltoall_g8", _fab("all_eps", 64, 4, up_ports=8, **TWO_LEVEL), {}, "alltoall", 8 * KIB, 8),
    ("ocs16_fixed", _fab("single_ocs", 16, 4), {"ocs_multiplicity": 1}, "allreduce", 40 * KIB, None),
    ("ocs64_planned", _fab("single_ocs", 64, 8), {}, "allgather", 16 * KIB, 8),
    ("hybrid64_allreduce", _fab("hybrid", 64, 8, up_ports=8, **TWO_LEVEL), {}, "allreduce", 16 * KIB, None),
    ("allocs64_alltoall_g8", _fab("all_ocs", 64, 8, up_ports=32, **TWO_LEVEL), {}, "alltoall", 32 * KIB, 8),
    ("allocs64_allreduce", _fab("all_ocs", 64, 8, up_ports=32, **TWO_LEVEL), {}, "allreduce", 40 * KIB, None),
]
VARIANTS = {  # suffix -> network overrides
    "": {},
    "_buf2k": {"buffer_bytes": 2 * KIB},
    "_buf8k_resp": {"buffer_bytes": 8 * KIB, "write_responses": True},
    "_resp": {"write_responses": True},
}


def cases() -> list[dict]:
    """Every base case in every variant and both modes; the default suite runs one variant per base
    case (rotating, so every variant and fabric kind is in it), the rest are ``slow``."""
    out = []
    for b, (name, fab, net, coll, size, group) in enumerate(_BASE):
        for v, (suffix, extra) in enumerate(VARIANTS.items()):
            for mode in ("optimized", "flit"):
                out.append({"name": f"{name}{suffix}_{mode}", "fabric": fab, "network": {**net, **extra, "mode": mode},
                            "collective": coll, "bytes": size, "group": group, "slow": v != b % len(VARIANTS)})
    # the paper's case (Section 5, C.5): 256 x 8 ports, 40 KiB one-shot all-reduce, 64 flits a message
    for mode in ("optimized", "flit"):
        for suffix, extra in (("", {}), ("_buf4k", {"buffer_bytes": 4 * KIB})):
            out.append({"name": f"eps256_oneshot{suffix}_{mode}", "fabric": _fab("single_eps", 256, 8),
                        "network": {"schedule": "one_shot", "mode": mode, **extra}, "collective": "allreduce",
                        "bytes": 40 * KIB, "group": None, "slow": True})
    out.append({"name": "eps256_auto_optimized", "fabric": _fab("single_eps", 256, 8), "network": {"mode": "optimized"},
                "collective": "allreduce", "bytes": 40 * KIB, "group": None, "slow": True})
    return out


def _topology(case: dict):
    if case["fabric"]["kind"] == "single_ocs" and case["network"].get("ocs_multiplicity"):
        from collectives.topology import hypercube

        return hypercube(case["fabric"]["accelerators"].bit_length() - 1)
    return None


def _digest(stats: dict) -> str:
    text = ";".join(f"{l}:{b}:{busy!r}:{stall!r}" for l, (b, busy, stall) in sorted(stats.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def outputs(case: dict) -> dict:
    """The observable results of one case (floats kept exact: JSON writes them with repr)."""
    from fabrics.network.simlette.build import simulate_collective
    from pipelines.network import simlette_from_config

    net = simlette_from_config(case["fabric"], case["network"], topology=_topology(case))
    n = case["fabric"]["accelerators"]
    size = case["group"] or n
    groups = tuple(tuple(range(g * size, (g + 1) * size)) for g in range(n // size))
    res = simulate_collective(net, case["collective"], case["bytes"], groups=groups)
    stats, idle_rel = net._ep_stats
    out = {
        "completion_s": res["completion_s"],
        "schedule": res["schedule"],
        "idle_rel_s": idle_rel,
        "links_used": len(stats),
        "bytes_total": sum(b for b, _, _ in stats.values()),
        "busy_max_s": max(busy for _, busy, _ in stats.values()),
        "stall_total_s": sum(s for _, _, s in stats.values()),
        "stall_max_s": max(s for _, _, s in stats.values()),
        "links_digest": _digest(stats),
        "events": res["events"],
    }
    return out


def multi_call_outputs(mode: str, buffer_bytes: int | None) -> dict:
    """Concurrent calls on one all-EPS engine (contention between calls, staggered starts, the
    episode cache): every completion and the per-link stats of the episode."""
    from fabrics.network.protocol import CollectiveCall, DemandEntry
    from pipelines.network import simlette_from_config

    fab = _fab("all_eps", 64, 4, up_ports=8, **TWO_LEVEL)
    net = simlette_from_config(fab, {"mode": mode, "buffer_bytes": buffer_bytes, "write_responses": True})
    g8 = tuple(tuple(range(g * 8, (g + 1) * 8)) for g in range(8))
    strided = tuple(tuple(range(g, 64, 8)) for g in range(8))
    calls = [("a", "x", "allreduce", g8, 12 * KIB, 0.0), ("b", "y", "alltoall", strided, 20 * KIB, 0.3e-6),
             ("c", "x", "allgather", g8, 4 * KIB, 1.1e-6)]
    demand = tuple(DemandEntry(region=r, axis=a, collective=c, groups=len(g), ranks=len(g[0]), calls_per_step=1,
                               payload_bytes=b) for r, a, c, g, b, _ in calls)
    net.prepare(demand, 64)
    ends = []
    for rep in range(2):  # the second round repeats the first episode: served from the cache
        t0 = rep * 1e-3
        for i, (r, a, c, g, b, t) in enumerate(calls):
            net.register(CollectiveCall(call_id=rep * 10 + i, region=r, axis=a, collective=c, groups=g,
                                        payload_bytes=b), t0 + t)
        got = []
        while len(got) < len(calls):
            got += [[c.call_id, c.start_s, c.end_s, c.schedule] for c in net.advance()]
        ends.append(got)
    stats, idle_rel = net._ep_stats
    return {"completions": ends, "idle_rel_s": idle_rel, "links_used": len(stats), "links_digest": _digest(stats),
            "events": net.simulation_report()["events"]}


def multi_call_cases() -> list[tuple[str, str, int | None]]:
    return [(f"multi_{m}_{'unl' if b is None else b}", m, b) for m in ("optimized", "flit") for b in (None, 2 * KIB)]


def _write(include_slow: bool) -> None:
    data = json.loads(DATA.read_text()) if DATA.exists() else {}
    for case in cases():
        if case["slow"] and not include_slow:
            continue
        data[case["name"]] = outputs(case)
        print(case["name"], data[case["name"]]["completion_s"], data[case["name"]]["events"], flush=True)
    for name, mode, buf in multi_call_cases():
        data[name] = multi_call_outputs(mode, buf)
        print(name, data[name]["events"], flush=True)
    DATA.parent.mkdir(exist_ok=True)
    DATA.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    if "--write" in sys.argv:
        _write(include_slow="--slow" in sys.argv)
