"""``python -m pipelines.report``: read a sweep back from MLflow and render its comparison.

Regenerates tables and figures without re-running anything:

    gx report                         # the newest sweep in the default store
    gx report sweep=<parent run id>   # a chosen sweep
    gx report pipeline=search         # the newest sweep of a pipeline

For decode sweeps: interactivity by batch per fabric, energy efficiency vs interactivity
(Figure 7 style) and the decode-step breakdown (Figure 5 style). For search sweeps: the
Pareto front of interactivity vs throughput per fabric (Figure 4), the breakdown of each cell's
best split, energy efficiency, and world-size scaling (Figure 6) when several worlds were swept.
Writes ``report.md``, PNGs and ``results.json`` (``sweep``, ``pipeline``, ``rows``).
"""

from __future__ import annotations

from collections import defaultdict

from collectives.errors import SpecError
from pipelines.app import gx_main
from pipelines.plots import png_bytes, pyplot
from pipelines.specs import plain

FABRIC_ORDER = ("all_eps", "hybrid", "all_ocs", "single_eps", "single_ocs", "pcie")
COLOURS = {"all_eps": "tab:red", "hybrid": "tab:orange", "all_ocs": "tab:blue",
           "single_eps": "tab:purple", "single_ocs": "tab:cyan", "pcie": "tab:green"}


def load_rows(tracking: dict, sweep: str | None, pipeline: str | None) -> tuple[str, str, list[dict]]:
    from pipelines.tracking import TAG_PARENT, TAG_PIPELINE, TAG_SWEEP, Tracker, default_uri

    tracker = Tracker(uri=tracking.get("uri") or default_uri(), experiment=tracking.get("experiment") or "gxnet")
    client = tracker.client
    if sweep is None:
        filt = f"tags.`{TAG_SWEEP}` != ''"
        if pipeline:
            filt += f" and tags.`{TAG_PIPELINE}` = '{pipeline}'"
        parents = client.search_runs([tracker.experiment_id], filter_string=filt,
                                     order_by=["attributes.start_time DESC"], max_results=1)
        if not parents:
            raise SpecError(f"no sweep found in {tracker.uri}; run one with -m first or give sweep=<run id>")
        sweep = parents[0].info.run_id
    try:
        parent = client.get_run(sweep)
    except Exception:  # mlflow raises its own exception types for an unknown or malformed id
        raise SpecError(f"sweep={sweep!r} is not a run in {tracker.uri}; give the parent run id a sweep printed, "
                        f"or leave sweep out for the newest sweep") from None
    kind = parent.data.tags.get(TAG_PIPELINE, "")
    runs = client.search_runs([tracker.experiment_id], filter_string=f"tags.`{TAG_PARENT}` = '{sweep}'",
                              max_results=50000)
    rows = []
    for r in runs:
        rows.append({"run_id": r.info.run_id, "status": r.info.status, "name": r.info.run_name,
                     "params": dict(r.data.params), "metrics": dict(r.data.metrics),
                     "error": r.data.tags.get("gx.error")})
    rows.sort(key=lambda r: r["name"] or "")
    return sweep, kind, rows


def _num(x, default=None):
    try:
        return float(x)
    except (TypeError, ValueError):
        return default


def _fabric(row) -> str:
    return row["params"].get("fabric.name", "?")


def pareto(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Upper-right Pareto front of (throughput, interactivity) points, by throughput."""
    front, best_y = [], float("-inf")
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if y > best_y:
            front.append((x, y))
            best_y = y
    return sorted(front)


def _metric(row, *names):
    for n in names:
        if n in row["metrics"]:
            return row["metrics"][n]
    return None


def render(kind: str, rows: list[dict]) -> tuple[list[dict], dict[str, bytes]]:
    plt = pyplot()
    ok = [r for r in rows if r["status"] == "FINISHED"]
    prefix = "best." if kind == "search" else ""
    table = []
    for r in rows:
        table.append({
            "fabric": _fabric(r), "model": r["params"].get("model.name"), "world": r["params"].get("world"),
            "batch": r["params"].get("batch"), "context": r["params"].get("context"), "status": r["status"],
            "interactivity_tok_s_user": _metric(r, prefix + "interactivity_tok_s_user"),
            "throughput_tok_s": _metric(r, prefix + "throughput_tok_s"),
            "decode_step_s": _metric(r, prefix + "decode_step_s"),
            "tokens_per_s_per_MW": _metric(r, prefix + "tokens_per_s_per_MW"),
            "best_split": "/".join(str(int(_metric(r, f"best.parallel.{k}") or 0)) for k in ("kvp", "tpa", "ep", "tpe"))
            if kind == "search" else None,
            "error": r["error"],
        })
    figs: dict[str, bytes] = {}
    by_fabric: dict[str, list[dict]] = defaultdict(list)
    for t in table:
        if t["status"] == "FINISHED" and t["interactivity_tok_s_user"] is not None:
            by_fabric[t["fabric"]].append(t)
    fabrics = sorted(by_fabric, key=lambda f: (FABRIC_ORDER.index(f) if f in FABRIC_ORDER else 99, f))

    # Figure 4 style: interactivity vs throughput, Pareto front per fabric (one panel per context)
    contexts = sorted({str(t["context"]) for f in fabrics for t in by_fabric[f]})
    fig, axes = plt.subplots(1, len(contexts), figsize=(6.2 * len(contexts), 4.8), squeeze=False)
    for ax, ctx in zip(axes[0], contexts):
        for f in fabrics:
            pts = [(t["throughput_tok_s"], t["interactivity_tok_s_user"]) for t in by_fabric[f] if str(t["context"]) == ctx]
            if not pts:
                continue
            ax.scatter(*zip(*pts), s=16, alpha=0.5, color=COLOURS.get(f))
            ax.plot(*zip(*pareto(pts)), marker="o", label=f, color=COLOURS.get(f))
        ax.set_xscale("log")
        ax.set_xlabel("throughput (tokens/s)")
        ax.set_ylabel("interactivity (tokens/s/user)")
        ax.set_title(f"context {ctx}: Pareto front per fabric")
        ax.grid(alpha=0.3)
        ax.legend()
    figs["pareto.png"] = png_bytes(fig)

    # Figure 7 style: energy efficiency vs interactivity
    if any(t["tokens_per_s_per_MW"] for f in fabrics for t in by_fabric[f]):
        fig, ax = plt.subplots(figsize=(7, 4.8))
        for f in fabrics:
            pts = [(t["interactivity_tok_s_user"], t["tokens_per_s_per_MW"]) for t in by_fabric[f] if t["tokens_per_s_per_MW"]]
            if pts:
                ax.scatter(*zip(*pts), label=f, color=COLOURS.get(f))
        ax.set_yscale("log")
        ax.set_xlabel("interactivity (tokens/s/user)")
        ax.set_ylabel("energy efficiency (tokens/s/MW)")
        ax.set_title("energy efficiency vs interactivity")
        ax.grid(alpha=0.3)
        ax.legend()
        figs["energy.png"] = png_bytes(fig)

    # Figure 5 style: decode-step breakdown per point
    parts = ("attention", "ffn", "communication", "fixed", "other")
    bars = []
    for r in ok:
        vals = [_metric(r, f"{prefix}breakdown_s.{p}") or 0.0 for p in parts]
        if any(vals):
            label = f"{_fabric(r)} B={r['params'].get('batch')} {r['params'].get('context', '')}"
            bars.append((label, vals))
    if bars:
        bars.sort(key=lambda b: b[0])
        fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(bars) + 2), 4.8))
        bottom = [0.0] * len(bars)
        for i, p in enumerate(parts):
            vals = [b[1][i] * 1e3 for b in bars]
            ax.bar(range(len(bars)), vals, bottom=bottom, label=p)
            bottom = [x + y for x, y in zip(bottom, vals)]
        ax.set_xticks(range(len(bars)), [b[0] for b in bars], rotation=70, ha="right", fontsize=7)
        ax.set_ylabel("decode step (ms)")
        ax.set_title("decode-step breakdown")
        ax.legend(fontsize=8)
        figs["breakdown.png"] = png_bytes(fig)

    # Figure 6 style: scaling with world size
    worlds = {t["world"] for f in fabrics for t in by_fabric[f]}
    if len(worlds) > 1:
        fig, ax = plt.subplots(figsize=(7, 4.8))
        for f in fabrics:
            best: dict[int, float] = {}
            for t in by_fabric[f]:
                w = int(t["world"])
                best[w] = max(best.get(w, 0.0), t["interactivity_tok_s_user"])
            ax.plot(sorted(best), [best[w] for w in sorted(best)], marker="o", label=f, color=COLOURS.get(f))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("accelerators")
        ax.set_ylabel("best interactivity (tokens/s/user)")
        ax.legend()
        ax.grid(alpha=0.3)
        figs["scaling.png"] = png_bytes(fig)
    return table, figs


def markdown(table: list[dict]) -> str:
    cols = ["fabric", "model", "world", "batch", "context", "best_split", "interactivity_tok_s_user",
            "throughput_tok_s", "tokens_per_s_per_MW", "status"]
    cols = [c for c in cols if any(t.get(c) is not None for t in table)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    def order(t):
        f = t["fabric"]
        return (str(t["model"]), str(t["context"]), _num(t["batch"], 0),
                FABRIC_ORDER.index(f) if f in FABRIC_ORDER else 99, f)

    for t in sorted(table, key=order):
        cells = []
        for c in cols:
            v = t.get(c)
            cells.append(f"{v:,.1f}" if isinstance(v, float) else ("" if v is None else str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    failed = [t for t in table if t["error"]]
    if failed:
        lines.append("")
        lines += [f"- failed: {t['fabric']} batch {t['batch']}: {t['error']}" for t in failed]
    return "\n".join(lines) + "\n"


def _run_dir():
    from pathlib import Path

    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except Exception:  # called outside a Hydra run (tests, Ray workers)
        return Path.cwd()


def task(cfg):
    tracking = dict(plain(cfg["tracking"]))
    sweep, kind, rows = load_rows(tracking, cfg.get("sweep"), cfg.get("pipeline"))
    if not rows:
        raise SpecError(f"sweep {sweep} has no child runs")
    table, figs = render(kind, rows)
    md = markdown(table)
    print(md)
    out_dir = _run_dir()
    from pipelines.tracking import default_uri

    uri = tracking.get("uri") or default_uri()
    print(f"figures: {', '.join(str(out_dir / f) for f in figs)}")
    print(f"browse every run: mlflow ui --backend-store-uri {uri}  (experiment {tracking.get('experiment') or 'gxnet'!r}, "
          f"sweep run {sweep})")
    return ({"sweep": sweep, "pipeline": kind, "rows": table, "figures": sorted(figs)},
            {"report.md": md, **figs})


main = gx_main("report", track=False)(task)  # reads the store, logs nothing

if __name__ == "__main__":
    main()
