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

from collectives.errors import SpecError
from pipelines import plots
from pipelines.app import gx_main
from pipelines.plots import FABRIC_ORDER
from pipelines.specs import plain


def load_rows(tracking: dict, sweep: str | None, pipeline: str | None) -> tuple[str, str, list[dict]]:
    from pipelines.tracking import TAG_PARENT, TAG_PIPELINE, TAG_SWEEP, open_tracker

    tracker = open_tracker(tracking, direct=True)  # reads runs and writes nothing but artifacts: exact without MLflow
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
    for r in one_run_per_point(runs):
        rows.append({"run_id": r.info.run_id, "status": r.info.status, "name": r.info.run_name,
                     "params": dict(r.data.params), "metrics": dict(r.data.metrics),
                     "error": r.data.tags.get("gx.error")})
    rows.sort(key=lambda r: r["name"] or "")
    return sweep, kind, rows


def one_run_per_point(runs: list) -> list:
    """One child per config hash, so a point logged twice is never counted twice: its FINISHED
    run (the earliest), else its latest run. Runs without a hash are kept as they are."""
    from pipelines.tracking import TAG_HASH

    best: dict[str, object] = {}
    kept = []
    for r in runs:
        h = r.data.tags.get(TAG_HASH)
        if not h:
            kept.append(r)
            continue
        old = best.get(h)
        if old is None or _preferred(r, old):
            best[h] = r
    return kept + list(best.values())


def _preferred(run, other) -> bool:
    ok, other_ok = run.info.status == "FINISHED", other.info.status == "FINISHED"
    if ok != other_ok:
        return ok
    key, other_key = (run.info.start_time or 0, run.info.run_id), (other.info.start_time or 0, other.info.run_id)
    return key < other_key if ok else key > other_key


def _num(x, default=None):
    try:
        return float(x)
    except (TypeError, ValueError):
        return default


def _fabric(row) -> str:
    return row["params"].get("fabric.name", "?")


def _count(row, *names):
    """A numeric column as a number (int when whole): from the run's metrics, else its params."""
    value = _metric(row, *names)
    if value is None:
        value = next((_num(row["params"][n]) for n in names if n in row["params"]), None)
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _metric(row, *names):
    for n in names:
        if n in row["metrics"]:
            return row["metrics"][n]
    return None


def render(kind: str, rows: list[dict]) -> tuple[list[dict], dict[str, bytes]]:
    prefix = "best." if kind == "search" else ""
    table = []
    for r in rows:
        table.append({
            "fabric": _fabric(r), "model": r["params"].get("model.name"), "world": _count(r, "world"),
            "batch": _count(r, "batch"), "context": r["params"].get("context"),
            "context_tokens": _count(r, "context_tokens", "best.context_tokens"), "status": r["status"],
            "interactivity_tok_s_user": _metric(r, prefix + "interactivity_tok_s_user"),
            "throughput_tok_s": _metric(r, prefix + "throughput_tok_s"),
            "decode_step_s": _metric(r, prefix + "decode_step_s"),
            "tokens_per_s_per_MW": _metric(r, prefix + "tokens_per_s_per_MW"),
            "best_split": "/".join(str(int(_metric(r, f"best.parallel.{k}") or 0)) for k in ("kvp", "tpa", "ep", "tpe"))
            if kind == "search" else None,
            "error": r["error"],
        })
    figs: dict[str, bytes] = {}
    points = [t for t in table if t["status"] == "FINISHED" and t["interactivity_tok_s_user"] is not None]
    if points:
        figs["pareto.png"] = plots.pareto_png(points)
    if any(p["tokens_per_s_per_MW"] for p in points):
        figs["energy.png"] = plots.energy_png(points)
    bars = [{**t, "breakdown_s": [_metric(r, f"{prefix}breakdown_s.{part}") or 0.0 for part in plots.BREAKDOWN_PARTS]}
            for r, t in zip(rows, table) if r["status"] == "FINISHED"]
    if any(any(b["breakdown_s"]) for b in bars):
        figs["breakdown.png"] = plots.breakdown_png(
            bars, what="breakdown of each cell's best split" if kind == "search" else "decode-step breakdown")
    if len({t["world"] for t in points}) > 1:
        figs["scaling.png"] = plots.scaling_png(points)
    return table, figs


def markdown(table: list[dict]) -> str:
    cols = ["fabric", "model", "world", "batch", "context", "best_split", "interactivity_tok_s_user",
            "throughput_tok_s", "tokens_per_s_per_MW", "status"]
    cols = [c for c in cols if any(t.get(c) is not None for t in table)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    def order(t):
        f = t["fabric"]
        return (str(t["model"]), _num(t.get("context_tokens"), 0), str(t["context"]), _num(t["batch"], 0),
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
    results = {"sweep": sweep, "pipeline": kind, "rows": table, "figures": sorted(figs)}
    if cfg.get("attach"):
        attach_to_parent(tracking, sweep, md, results, figs)
    return results, {"report.md": md, **figs}


def attach_to_parent(tracking: dict, sweep: str, md: str, results: dict, figs: dict[str, bytes]) -> None:
    """Log the report (table as markdown and JSON, figures) under ``report/`` of the sweep's
    parent run; a rerun's report replaces the earlier one."""
    import tempfile
    from pathlib import Path

    from pipelines.outputs import dump_json
    from pipelines.tracking import open_tracker

    tracker = open_tracker(tracking, direct=True)
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "report.md").write_text(md)
        Path(tmp, "table.json").write_text(dump_json(results))
        for name, data in figs.items():
            Path(tmp, name).write_bytes(data)
        tracker.client.log_artifacts(sweep, tmp, artifact_path="report")


main = gx_main("report", track=False)(task)  # reads the store, logs nothing

if __name__ == "__main__":
    main()
