"""``python -m pipelines.collective``: which schedule is best for this collective, on this logical
topology, at this size? (paper 003, Eq. 1, Tables 4-5, Figure 17)

    python -m pipelines.collective collective=allreduce topology=hypercube topology.dims=4 \
        topology.folds=[0b1100] size=4KiB link_rate=400Gb/s hop_latency=0.52us multiplicity=1

results.json:
- ``collective``, ``schedule_option`` (auto or the requested name), ``topology`` {name, kind,
  n_ranks, degree, diameter, min_phases, generators, coset_layers}, ``parameters``
  {hop_latency_s, link_rate_Bps, multiplicity};
- ``size_bytes`` (the first size) with ``schedules`` {name: {valid, phases, volume_bytes, time_s,
  ports, volume_sigma | reason}} and ``best`` (the chosen schedule) at that size;
- ``sweep``: one entry per size {size_bytes, best, time_s {name: s}, volume_bytes {name: B}};
- ``verified`` (with verify=true): executed {h, v_sigma, u, transfers} of the chosen schedule (its
  measured wall time ``verify_s`` is in ``timings.json``).
With several sizes a Figure-17-style plot ``completion_time.png`` is written as well.
"""

from __future__ import annotations

import time

from collectives.errors import SpecError
from pipelines.app import gx_main
from pipelines.budgets import preflight
from pipelines.nccl_fit_values import bus_factor
from pipelines.units import parse_bytes, parse_rate, parse_time


# ---------------------------------------------------------------------------------------
# config edge -> specs
# ---------------------------------------------------------------------------------------

def _int(value, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise SpecError(f"{what}={value!r} must be an integer")


def _dims(tcfg) -> int:
    ranks = tcfg.get("ranks")
    if ranks is not None:
        r = _int(ranks, "topology.ranks")
        if r < 2 or r & (r - 1):
            raise SpecError(
                f"topology.ranks={r} is not a power of two; Cayley labels are bit strings, so use 2^k ranks"
            )
        return r.bit_length() - 1
    return _int(tcfg.get("dims"), "topology.dims")


def topology_from_config(tcfg, multiplicity: int):
    from collectives import topology as T

    kind = str(tcfg.get("kind", "hypercube"))
    folds_raw = list(tcfg.get("folds") or [])
    if kind in ("hypercube", "folded_cube"):
        n = _dims(tcfg)
        topo = T.hypercube(n, multiplicity) if kind == "hypercube" else T.folded_cube(n)
    elif kind == "block_fold":
        topo = T.block_fold(tuple(_int(b, "topology.blocks[]") for b in tcfg.get("blocks")), multiplicity)
    elif kind == "ring":
        if folds_raw:
            raise SpecError("topology=ring takes no folds; use topology=circulant with offsets instead")
        return T.ring(_int(tcfg.get("n"), "topology.n"), multiplicity)
    elif kind == "circulant":
        offsets = tuple(_int(o, "topology.offsets[]") for o in tcfg.get("offsets"))
        return T.circulant(_int(tcfg.get("n"), "topology.n"), offsets, multiplicity)
    else:
        raise SpecError(
            f"topology.kind={kind!r} is unknown; choose hypercube, folded_cube, block_fold, ring or circulant"
        )
    if folds_raw:
        folds = [T.parse_mask(m, topo.n_bits) for m in folds_raw]
        name = topo.name
        topo = T.with_folds(T.CayleyTopology(n_bits=topo.n_bits, generators=topo.generators,
                                             multiplicity=multiplicity, name=name), folds)
    elif multiplicity != topo.multiplicity:
        topo = T.CayleyTopology(n_bits=topo.n_bits, generators=topo.generators, multiplicity=multiplicity,
                                name=topo.name)
    return topo


def parse_sizes(value) -> list[int]:
    """One size, a list of sizes, or a range 'LO..HI' (x2 steps) / 'LO..HI*F' (xF steps)."""
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and not isinstance(value, (str, bytes))):
        sizes = [parse_bytes(v, "size") for v in value]
        if not sizes:
            raise SpecError("size=[] is empty; give at least one buffer size, e.g. size=4KiB")
        return sizes
    text = str(value).strip()
    if ".." in text:
        lo_text, hi_text = text.split("..", 1)
        factor = 2
        if "*" in hi_text:
            hi_text, f_text = hi_text.split("*", 1)
            factor = _int(f_text.strip(), "size range factor")
            if factor < 2:
                raise SpecError(f"size={value!r}: the range factor must be >= 2, e.g. 1KiB..16MiB*4")
        lo, hi = parse_bytes(lo_text, "size"), parse_bytes(hi_text, "size")
        if lo <= 0 or hi < lo:
            raise SpecError(f"size={value!r} must be a range LO..HI with 0 < LO <= HI, e.g. 1KiB..16MiB")
        sizes = []
        s = lo
        while s <= hi:
            sizes.append(s)
            s *= factor
        return sizes
    return [parse_bytes(value, "size")]


# ---------------------------------------------------------------------------------------
# the pricing step: one call, swappable (network=analytical|simlette will plug in here)
# ---------------------------------------------------------------------------------------

def price(collective, topo, size_bytes, hop_latency_s, link_rate_Bps, multiplicity, schedule="auto"):
    """Closed-form pricing (Eq. 1) of every schedule and the chosen one at one size."""
    from collectives.selection import best_schedule, price_all

    table = price_all(collective, topo, size_bytes, hop_latency_s, link_rate_Bps, multiplicity)
    if schedule == "auto":
        best = best_schedule(collective, topo, size_bytes, hop_latency_s, link_rate_Bps, multiplicity)
    else:
        best = schedule
    return table, best


def _check_schedule_option(schedule: str, collective: str, topo) -> None:
    from collectives.schedules import SCHEDULES

    if schedule == "auto":
        return
    alg = SCHEDULES.get(schedule).for_collective(collective)
    reason = alg.why_invalid(topo)
    if reason:
        raise SpecError(f"schedule={schedule} cannot run on {topo.describe()}: {reason}; use schedule=auto")


def task(cfg, pricer=price):
    from collectives.schedules import normalize_collective
    from collectives.topology import min_phases_lower_bound

    preflight("collective", cfg)
    if cfg.get("fabric") is not None:  # fabric=...: price on a whole physical fabric (issue #4)
        return fabric_task(cfg)
    collective = normalize_collective(cfg.get("collective", "allreduce"))
    multiplicity = _int(cfg.get("multiplicity", 1), "multiplicity")
    if multiplicity < 1:
        raise SpecError(f"multiplicity={multiplicity} must be >= 1 parallel circuits per logical edge")
    topo = topology_from_config(cfg.topology, multiplicity)
    sizes = parse_sizes(cfg.get("size"))
    hop_latency_s = parse_time(cfg.get("hop_latency"), "hop_latency")
    link_rate_Bps = parse_rate(cfg.get("link_rate"), "link_rate")
    schedule = str(cfg.get("schedule", "auto"))
    _check_schedule_option(schedule, collective, topo)

    sweep = []
    first_table, first_best = None, None
    for s in sizes:
        table, best = pricer(collective, topo, s, hop_latency_s, link_rate_Bps, multiplicity, schedule)
        if first_table is None:
            first_table, first_best = table, best
        sweep.append({
            "size_bytes": s,
            "best": best,
            "time_s": {n: r["time_s"] for n, r in table.items() if r["valid"]},
            "volume_bytes": {n: r["volume_bytes"] for n, r in table.items() if r["valid"]},
        })

    from collectives.topology import format_mask as _bits

    results = {
        "collective": collective,
        "schedule_option": schedule,
        "topology": {
            "name": topo.describe(),
            "kind": topo.kind,
            "n_ranks": topo.n_ranks,
            "degree": topo.degree,
            "diameter": topo.diameter,
            "min_phases": min_phases_lower_bound(topo),
            "generators": [(_bits(g, topo.n_bits) if topo.kind == "xor" else g) for g in topo.generators],
            "coset_layers": [[(_bits(g, topo.n_bits)) for g in layer] for layer in topo.coset_layers()],
        },
        "parameters": {"hop_latency_s": hop_latency_s, "link_rate_Bps": link_rate_Bps, "multiplicity": multiplicity},
        "size_bytes": sizes[0],
        "schedules": first_table,
        "best": first_best,
        "sweep": sweep,
    }
    artifacts = {}
    if cfg.get("verify", False):  # the verifier's wall time is measured: timings.json, not results.json
        results["verified"] = _verify(collective, first_best, topo)
        artifacts["timings.json"] = {"verify_s": results["verified"].pop("seconds")}
    if len(sizes) > 1:
        artifacts["completion_time.png"] = plot_sweep(collective, topo, sweep)
    print(format_table(results))
    return results, artifacts


def _verify(collective, name, topo) -> dict:
    from collectives.schedules import lookup
    from collectives.verify import execute

    t0 = time.perf_counter()
    sched = lookup(collective, name).build(topo)
    report = execute(sched, topo)
    cost = lookup(collective, name).closed_form(topo)
    return {"schedule": name, "h": report.h, "v_sigma": str(report.v), "u": report.u,
            "transfers": report.transfers, "seconds": time.perf_counter() - t0,
            "matches_closed_form": (report.h, report.v, report.u) == (cost.h, cost.v, cost.u)}


def plot_times_vs_size(sweep: list[dict], title: str, ylabel: str, chosen_s: list[float] | None = None) -> bytes:
    """Completion time of every schedule in ``row["time_s"]`` against the buffer size (log-log);
    a schedule missing at some size (invalid there) is drawn where it has a time. ``chosen_s``:
    the time of the schedule actually picked per size, drawn as a wide grey line."""
    from pipelines.plots import png_bytes, pyplot

    plt = pyplot()
    names = sorted({n for row in sweep for n in row["time_s"]})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [row["size_bytes"] for row in sweep]
    for n in names:
        pts = [(x, row["time_s"][n] * 1e6) for x, row in zip(xs, sweep) if row["time_s"].get(n) is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=n)
    if chosen_s is not None:
        ax.plot(xs, [t * 1e6 for t in chosen_s], color="k", linewidth=2, alpha=0.4, label="chosen")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("buffer size σ (bytes)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return png_bytes(fig, dpi=110)


def plot_sweep(collective, topo, sweep) -> bytes:
    return plot_times_vs_size(sweep, f"{collective} on {topo.describe()} (N={topo.n_ranks}), Eq. 1",
                              "completion time T (µs)")


def format_table(results) -> str:
    lines = [f"{results['collective']} on {results['topology']['name']} (N={results['topology']['n_ranks']}, "
             f"deg {results['topology']['degree']}, diam {results['topology']['diameter']}) "
             f"at {results['size_bytes']} B"]
    for name, r in results["schedules"].items():
        if r["valid"]:
            mark = " *" if name == results["best"] else ""
            lines.append(f"  {name:<26} h={r['phases']:<5} v={r['volume_bytes']:>14.1f} B  "
                         f"T={r['time_s'] * 1e6:10.3f} us{mark}")
        else:
            lines.append(f"  {name:<26} invalid: {r['reason']}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# fabric=single_eps|single_ocs|all_eps|hybrid|all_ocs: one collective on a whole fabric (issue #4)
# ---------------------------------------------------------------------------------------

def fabric_world(fab: dict, cluster_accelerators: int | None = None) -> int:
    """``fabric.world``, else the fabric's accelerators when a power of two, else the largest power
    of two that fits (512 of the 576 accelerators of Appendix C.7); PCIe: every GPU of the cluster."""
    if fab.get("world") is not None:
        w = _int(fab["world"], "fabric.world")
    elif cluster_accelerators is not None:
        w = cluster_accelerators
    elif fab.get("accelerators") is not None:
        n = _int(fab["accelerators"], "fabric.accelerators")
        w = 1 << (n.bit_length() - 1)
    else:
        raise SpecError(f"fabric={fab.get('name')} needs the number of ranks: give fabric.world=N (e.g. fabric.world=512)")
    if w < 2:
        raise SpecError(f"fabric.world={w} must be at least 2 ranks")
    return w


def fabric_groups(world: int, group_size, *, whole: bool = True) -> tuple[tuple[int, ...], ...]:
    """One group of every rank, or contiguous groups of ``group_size`` ranks (minor mesh axis).
    ``whole=False`` (GPU fabrics): the groups need not cover every rank -- 5 GPUs of an 8-GPU node
    are one group of 5, the others idle, as ``nccl-tests -g 5`` runs."""
    n = world if group_size is None else _int(group_size, "group_size")
    if whole and (n < 2 or world % n):
        raise SpecError(f"group_size={n} must be at least 2 and divide fabric.world={world}; e.g. group_size=8")
    if not whole and not 2 <= n <= world:
        raise SpecError(f"group_size={n} must be between 2 and fabric.world={world} GPUs; e.g. group_size={world}")
    return tuple(tuple(range(g * n, (g + 1) * n)) for g in range(world // n))


def nccl_tests_row(collective: str, n_ranks: int, size_bytes: int, completion_s: float, schedule: str,
                   network: str) -> dict:
    """The quantities nccl-tests prints for one size: ``size`` (bytes as nccl-tests counts them:
    all-reduce / reduce-scatter input, all-gather output, all-to-all each rank's whole buffer --
    gxnet's per-rank buffer σ in every case), ``algbw_Bps`` = size / time, ``busbw_Bps`` = algbw x
    factor, and the ``algorithm`` / ``protocol`` the NCCL-like model chose (null for ideal models)."""
    algbw = size_bytes / completion_s if completion_s > 0 else None
    algorithm = protocol = None
    if network == "nccl" and "/" in schedule:
        algorithm, protocol = schedule.split("/", 1)
    return {"size": size_bytes, "completion_s": completion_s, "algbw_Bps": algbw,
            "busbw_Bps": None if algbw is None else algbw * bus_factor(collective, n_ranks),
            "algorithm": algorithm, "protocol": protocol}


class _Accelerator:
    """The collective pipeline has no accelerator group: RX00 (Table 11/12: 36 ports, 2631 W incl.
    host share) stands in for the ports when ``fabric.ports`` is null and for the power figure."""

    name = "rx00"
    scaleup_ports = 36


def _pcie_world(cfg, fab: dict) -> int | None:
    """Every GPU of a PCIe cluster (the collective spans them unless fabric.world says otherwise)."""
    if fab.get("name") != "pcie":
        return None
    from pipelines.network import cluster_spec

    return cluster_spec(cfg, _Accelerator(), 1).accelerators


def fabric_task(cfg):
    """Price one collective on a whole fabric with the configured network model.

    results.json: ``mode`` = "fabric", ``collective``, ``fabric``, ``network``, ``world``,
    ``group_size``, ``groups``, ``schedule_option``, ``size_bytes``, ``completion_s``, ``schedule``,
    ``schedules`` {name: {time_s, ...}} (analytical and flow models on scale-up fabrics: every
    schedule the model can run there -- the native set on EPS, every valid schedule on the planned
    OCS topology -- with ``phases``, ``latency_s``, ``seconds_per_byte``; other models: the one
    that ran), ``sweep`` [{size_bytes, completion_s, schedule, time_s {name: s}}], ``plan``
    (hybrid/OCS), ``network_report`` (model details: Simlette's events, PCIe's activations) and
    ``system_power_W``; artifact ``plan.json`` (hybrid/OCS, first size).
    """
    from collectives.schedules import normalize_collective
    from pipelines.network import GPU_FABRICS, build_network, gpu_fabric_world, network_name
    from pipelines.power import fabric_power
    from pipelines.specs import plain

    collective = normalize_collective(cfg.get("collective", "allreduce"))
    fab = dict(plain(cfg["fabric"]))
    schedule = str(cfg.get("schedule", "auto"))
    if schedule == "auto":  # the top-level option wins; fabric.schedule is the fabric group's default
        schedule = str(fab.get("schedule") or "auto")
    fcfg = {"fabric": {**fab, "schedule": schedule}, "network": plain(cfg.get("network") or {"name": "auto"}),
            "platform": plain(cfg.get("platform")), "scheduler": plain(cfg.get("scheduler")), "nodes": cfg.get("nodes")}
    if fab.get("name") in ("pcie", *GPU_FABRICS):
        # PCIe collectives run NCCL's native schedules (AlltoAllv: the scheduler); GPU fabrics: the
        # network model's own choice (network.algorithm / network.protocol force one on network=nccl)
        fcfg["fabric"].pop("schedule")
    gpu = fab.get("name") in GPU_FABRICS
    if gpu and schedule != "auto":
        raise SpecError(f"schedule={schedule} is a scale-up fabric schedule; on fabric={fab.get('name')} the network "
                        "model chooses (network=nccl: force one with network.algorithm / network.protocol)")
    if gpu:
        accel = _gpu_accelerator(cfg)
        world = fabric_world({**fab, "world": gpu_fabric_world(fab, accel)})
    else:
        accel = _Accelerator()
        world = fabric_world(fab, _pcie_world(fcfg, fab))
    groups = fabric_groups(world, cfg.get("group_size"), whole=not gpu)
    sizes = parse_sizes(cfg.get("size"))
    ports = fab.get("ports")
    if ports is not None and not gpu:
        accel.scaleup_ports = _int(ports, "fabric.ports")
    from fabrics.network.analytical import FabricAnalytical

    network = build_network(fcfg, accel, world)
    nccl_columns = gpu or network_name(fcfg) == "nccl"  # nccl-tests' columns (PCIe: network=nccl)
    sweep, tables, reports, timing_rows = [], [], [], []
    for size in sizes:
        if sweep and not isinstance(network, FabricAnalytical):  # a simulator reports per run: a fresh one per size
            network = build_network(fcfg, accel, world)
        row, table, report = _price_one(network, collective, groups, world, size)
        if nccl_columns:
            row.update(nccl_tests_row(collective, len(groups[0]), size, row["completion_s"], row["schedule"],
                                      network_name(fcfg)))
            if not gpu:  # the NCCL transports the call crossed (P2P, SHM, NET)
                row["transport"] = dict(report.details or {}).get("transports", {}).get("collective/group/" + collective)
        details = dict(report.details or {})
        if "events" in details:
            row["events"] = details["events"]
        if "sim_wall_s" in details:  # measured wall time: timings.json, not results.json
            timing_rows.append({"size_bytes": size, "sim_wall_s": details["sim_wall_s"]})
        sweep.append(row)
        tables.append(table)
        reports.append(report)
    row, table, report = sweep[0], tables[0], reports[0]
    results = {
        "mode": "fabric", "collective": collective, "fabric": fab.get("name"), "network": network_name(fcfg),
        "world": world, "group_size": len(groups[0]), "groups": len(groups), "schedule_option": schedule,
        "size_bytes": row["size_bytes"], "completion_s": row["completion_s"], "schedule": row["schedule"],
        "schedules": table, "sweep": sweep,
    }
    if nccl_columns:
        results.update({k: row[k] for k in NCCL_TESTS_KEYS})
        if gpu:
            results["accelerator"] = accel.name
        else:
            results.update({"platform": dict(report.details or {}).get("platform"), "transport": row["transport"]})
    if report.plan_summary is not None:
        results["plan"] = dict(report.plan_summary)
    timings = {}
    if report.details is not None:
        results["network_report"] = dict(report.details)
        results["network_report"].pop("sim_wall_s", None)
    if timing_rows:
        timings["sweep"] = timing_rows
    power = fabric_power(fcfg, accel, world)
    if power is not None:
        results["system_power_W"] = power["system_power_W"]
    print(format_gpu_table(results) if nccl_columns else format_fabric_table(results))
    artifacts = {"plan.json": report.plan_json} if report.plan_json is not None else {}
    if timings:
        artifacts["timings.json"] = timings
    if len(sizes) > 1:
        artifacts["completion_time.png"] = plot_fabric_sweep(results)
        if nccl_columns:
            artifacts["busbw.png"] = plot_busbw(results)
    return results, artifacts


NCCL_TESTS_KEYS = ("size", "algbw_Bps", "busbw_Bps", "algorithm", "protocol")


def _gpu_accelerator(cfg):
    """The GPU of ``fabric=nvswitch | gpu_cluster``: the ``accelerator`` group (required there)."""
    from pipelines.network import nvlink_accelerators
    from pipelines.specs import accelerator_spec

    if cfg.get("accelerator") is None:
        raise SpecError(f"fabric={cfg['fabric']['name']} needs the GPU: add accelerator="
                        f"{' | '.join(nvlink_accelerators())} (e.g. accelerator=h200)")
    return accelerator_spec(cfg)


def format_gpu_table(results) -> str:
    """nccl-tests' columns: size, time, algbw, busbw (GB/s), and the algorithm/protocol chosen."""
    lines = [f"{results['collective']} on {results['fabric']} ({results['network']}), {results['groups']} x "
             f"{results['group_size']} {results.get('accelerator') or results.get('platform')} GPUs of {results['world']}",
             f"  {'size (B)':>14} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}  choice"]
    for row in results["sweep"]:
        choice = (f"{row['algorithm']}/{row['protocol']}" if row["algorithm"] is not None else row["schedule"])
        if row.get("transport"):
            choice += f" ({row['transport']})"
        algbw, busbw = (row[k] / 1e9 if row[k] is not None else 0.0 for k in ("algbw_Bps", "busbw_Bps"))
        lines.append(f"  {row['size']:>14} {row['completion_s'] * 1e6:>12.2f} {algbw:>13.2f} {busbw:>13.2f}  {choice}")
    return "\n".join(lines)


def plot_busbw(results) -> bytes:
    """Bus bandwidth against size, the plot nccl-tests results are usually shown as."""
    from pipelines.plots import png_bytes, pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    rows = [r for r in results["sweep"] if r["busbw_Bps"] is not None]
    ax.plot([r["size"] for r in rows], [r["busbw_Bps"] / 1e9 for r in rows], marker="o", markersize=3,
            label=results["network"])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes, as nccl-tests counts them)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"{results['collective']} on {results['fabric']}: {results['group_size']} x "
                 f"{results.get('accelerator') or results.get('platform')}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return png_bytes(fig, dpi=110)


def _price_one(network, collective: str, groups, world: int, size: int):
    """One collective of ``size`` bytes per rank through the network-model protocol, and every
    schedule's time where the model can price alternatives (analytical and flow on scale-up)."""
    from fabrics.network.analytical import FabricAnalytical
    from fabrics.network.protocol import CollectiveCall, DemandEntry

    demand = (DemandEntry(region="collective", axis="group", collective=collective, groups=len(groups),
                          ranks=len(groups[0]), calls_per_step=1, payload_bytes=size),)
    call = CollectiveCall(call_id=0, region="collective", axis="group", collective=collective, groups=groups,
                          payload_bytes=size)
    network.prepare(demand, world)
    network.register(call, 0.0)
    (done,) = network.advance()
    completion_s = done.end_s - done.start_s
    if isinstance(network, FabricAnalytical):
        lines = network.schedule_lines(call, every_schedule=True)
        table = {n: {"time_s": ln.time_s(size), "phases": ln.phases, "latency_s": ln.latency_s,
                     "seconds_per_byte": ln.seconds_per_byte} for n, ln in lines.items()}
    else:
        table = {done.schedule: {"time_s": completion_s}}
    row = {"size_bytes": size, "completion_s": completion_s, "schedule": done.schedule,
           "time_s": {n: r["time_s"] for n, r in table.items()}}
    return row, table, network.report()


def format_fabric_table(results) -> str:
    lines = [f"{results['collective']} on {results['fabric']} ({results['network']}), {results['groups']} x "
             f"{results['group_size']} ranks of {results['world']}, at {results['size_bytes']} B: "
             f"{results['completion_s'] * 1e6:.3f} us with {results['schedule']}"]
    for name, r in sorted(results["schedules"].items(), key=lambda kv: kv[1]["time_s"]):
        mark = " *" if name == results["schedule"] else ""
        phases = r.get("phases", "")
        lines.append(f"  {name:<26} h={phases!s:<5} T={r['time_s'] * 1e6:10.3f} us{mark}")
    return "\n".join(lines)


def plot_fabric_sweep(results) -> bytes:
    sweep = results["sweep"]
    return plot_times_vs_size(
        sweep, f"{results['collective']} on {results['fabric']} ({results['groups']}×{results['group_size']} ranks)",
        "completion time (µs)", chosen_s=[row["completion_s"] for row in sweep])


main = gx_main("collective")(task)

if __name__ == "__main__":
    main()
