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
- ``verified`` (with verify=true): executed {h, v_sigma, u, transfers, seconds} of the chosen schedule.
With several sizes a Figure-17-style plot ``completion_time.png`` is written as well.
"""

from __future__ import annotations

import time

from collectives.errors import SpecError
from pipelines.app import gx_main
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
    if cfg.get("verify", False):
        results["verified"] = _verify(collective, first_best, topo)
    artifacts = {}
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


def plot_sweep(collective, topo, sweep) -> bytes:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({n for row in sweep for n in row["time_s"]})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [row["size_bytes"] for row in sweep]
    for n in names:
        ys = [row["time_s"].get(n) * 1e6 for row in sweep]
        ax.plot(xs, ys, marker="o", markersize=3, label=n)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("buffer size σ (bytes)")
    ax.set_ylabel("completion time T (µs)")
    ax.set_title(f"{collective} on {topo.describe()} (N={topo.n_ranks}), Eq. 1")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


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


main = gx_main("collective")(task)

if __name__ == "__main__":
    main()
