"""Figures of the pipelines (Agg backend, no display): the sweep report's comparisons and a search
cell's splits. The ordering and labelling helpers are pure, so tests can check what a figure shows
without rendering it.

Order everywhere: model, then context and batch by their *numeric* value (32K before 5M, B=4 before
B=16), fabrics in ``FABRIC_ORDER``. Every title names the model and context it shows; every
point is labelled with its batch.
"""

from __future__ import annotations

import io
import math
from collections import defaultdict

FABRIC_ORDER = ("all_eps", "hybrid", "all_ocs", "single_eps", "single_ocs", "pcie")
COLOURS = {"all_eps": "tab:red", "hybrid": "tab:orange", "all_ocs": "tab:blue",
           "single_eps": "tab:purple", "single_ocs": "tab:cyan", "pcie": "tab:green"}
BREAKDOWN_PARTS = ("attention", "ffn", "communication", "fixed", "other")
SPLITS_SHOWN = 20  # splits.png: the fastest splits of a cell, one labelled bar each


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_bytes(fig, dpi: int = 110, layout: bool = True) -> bytes:
    """Render and close ``fig``; returns the PNG file's bytes (artifacts are written atomically later).
    ``layout=False``: the figure set its margins itself (no tight-layout pass)."""
    plt = pyplot()
    buf = io.BytesIO()
    if layout:
        fig.tight_layout()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


# --- ordering and labels (pure) ---------------------------------------------------------------

def quantity(value) -> float:
    """The numeric value of a batch or context as MLflow stores it ("16", "5M", "32K", 5000000.0);
    ``inf`` for what is not a number, so such values sort last instead of raising."""
    from collectives.errors import SpecError
    from pipelines.units import parse_count

    if value is None:
        return math.inf
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    try:
        return float(parse_count(value, "value"))
    except SpecError:
        return math.inf


def fabric_rank(fabric) -> int:
    return FABRIC_ORDER.index(fabric) if fabric in FABRIC_ORDER else len(FABRIC_ORDER)


def point_key(point: dict) -> tuple:
    """Sort key of a sweep point: model, context, fabric, batch — numbers compared as numbers."""
    return (str(point.get("model")), quantity(point.get("context")), fabric_rank(point.get("fabric")),
            str(point.get("fabric")), quantity(point.get("batch")), str(point.get("batch")))


def _int_text(value) -> str:
    q = quantity(value)
    return str(int(q)) if math.isfinite(q) and q == int(q) else str(value)


def batch_label(batch) -> str:
    return f"B={_int_text(batch)}"


def context_label(context) -> str:
    """A context as the user wrote it: 5000000 -> "5M", 32768 -> "32768", "32K" stays."""
    q = quantity(context)
    if not math.isfinite(q):
        return str(context)
    for scale, suffix in ((10**9, "G"), (10**6, "M"), (10**3, "K")):
        if q >= scale and q % scale == 0:
            return f"{int(q // scale)}{suffix}"
    return str(int(q))


def distinct(points: list[dict], key: str) -> list:
    """The distinct values of ``key`` in numeric order (text order for models and fabrics)."""
    values = {str(p.get(key)): p.get(key) for p in points}
    if key in ("batch", "context", "world"):
        return sorted(values.values(), key=lambda v: (quantity(v), str(v)))
    if key == "fabric":
        return sorted(values.values(), key=lambda v: (fabric_rank(v), str(v)))
    return sorted(values.values(), key=str)


def subject(points: list[dict], *, context: bool = True) -> str:
    """"megatron_5t, context 5M" — what a figure shows, for its title."""
    models = ", ".join(str(m) for m in distinct(points, "model"))
    if not context:
        return models
    contexts = "/".join(context_label(c) for c in distinct(points, "context"))
    return f"{models}, context {contexts}"


def point_label(point: dict, *, with_context: bool = False, with_model: bool = False) -> str:
    parts = [batch_label(point.get("batch"))]
    if with_context:
        parts.append(context_label(point.get("context")))
    if with_model:
        parts.insert(0, str(point.get("model")))
    return " ".join(parts)


def breakdown_bars(points: list[dict]) -> list[tuple[str, list[float]]]:
    """(label, seconds per part) per point with a breakdown, in ``point_key`` order; the label
    names the fabric and batch, and the context or model only when the points differ in them."""
    shown = [p for p in points if any(p.get("breakdown_s") or [])]
    many_contexts = len(distinct(shown, "context")) > 1
    many_models = len(distinct(shown, "model")) > 1
    bars = []
    for p in sorted(shown, key=point_key):
        label = f"{p.get('fabric')} " + point_label(p, with_context=many_contexts, with_model=many_models)
        bars.append((label, [float(v or 0.0) for v in p["breakdown_s"]]))
    return bars


def pareto(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Upper-right Pareto front of (throughput, interactivity) points, by throughput."""
    front, best_y = [], float("-inf")
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if y > best_y:
            front.append((x, y))
            best_y = y
    return sorted(front)


def labels_to_draw(points: list[tuple[float, float, str]], *, log_x: bool = False,
                   log_y: bool = False, near: tuple[float, float] = (0.08, 0.04)) -> list[int]:
    """Indices of the (x, y, label) points to annotate: a label is drawn once per neighbourhood
    (within ``near`` = (x, y) fractions of the data span; a label is wider than tall), so fabrics
    that coincide share one "B=4"."""
    def scale(v, log):
        return math.log10(v) if log and v > 0 else v

    xs = [scale(x, log_x) for x, _, _ in points]
    ys = [scale(y, log_y) for _, y, _ in points]
    span_x = (max(xs) - min(xs)) or 1.0 if xs else 1.0
    span_y = (max(ys) - min(ys)) or 1.0 if ys else 1.0
    drawn: list[int] = []
    for i, (_, _, label) in enumerate(points):
        if not any(points[j][2] == label and abs(xs[i] - xs[j]) <= near[0] * span_x
                   and abs(ys[i] - ys[j]) <= near[1] * span_y for j in drawn):
            drawn.append(i)
    return drawn


def split_label(parallel: dict) -> str:
    return "({kvp},{tpa},{ep},{tpe})".format(**parallel)


def fastest_splits(rows: list[dict], shown: int = SPLITS_SHOWN) -> list[dict]:
    """The feasible splits of a search cell, fastest first (ties: smaller KVP first, as the search)."""
    feasible = [r for r in rows if r.get("feasible")]
    return sorted(feasible, key=lambda r: (r["decode_step_s"], r["parallel"]["kvp"], split_label(r["parallel"])))[:shown]


# --- figures ------------------------------------------------------------------------------------

def _by_fabric(points: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for p in sorted(points, key=point_key):
        groups[p.get("fabric")].append(p)
    return {f: groups[f] for f in distinct(points, "fabric")}


def _finish(ax, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _annotate(ax, labelled: list[tuple[float, float, str]], **scales):
    for i in labels_to_draw(labelled, **scales):
        x, y, text = labelled[i]
        ax.annotate(text, (x, y), xytext=(4, 3), textcoords="offset points", fontsize=7, alpha=0.85)


def pareto_png(points: list[dict]) -> bytes:
    """Interactivity against throughput per fabric, one panel per context (Figure 4 style); every
    point labelled with its batch, the Pareto front of each fabric drawn as a line."""
    plt = pyplot()
    contexts = distinct(points, "context")
    fig, axes = plt.subplots(1, len(contexts), figsize=(6.2 * len(contexts), 4.8), squeeze=False)
    for ax, ctx in zip(axes[0], contexts):
        here = [p for p in points if str(p.get("context")) == str(ctx)]
        labelled = []
        for fabric, pts in _by_fabric(here).items():
            xy = [(p["throughput_tok_s"], p["interactivity_tok_s_user"]) for p in pts]
            ax.scatter(*zip(*xy), s=16, alpha=0.5, color=COLOURS.get(fabric))
            ax.plot(*zip(*pareto(xy)), marker="o", label=fabric, color=COLOURS.get(fabric))
            labelled += [(x, y, batch_label(p.get("batch"))) for p, (x, y) in zip(pts, xy)]
        _annotate(ax, labelled, log_x=True)
        ax.set_xscale("log")
        _finish(ax, "throughput (tokens/s)", "interactivity (tokens/s/user)",
                f"{subject(here)}: Pareto front per fabric")
    return png_bytes(fig)


def energy_png(points: list[dict]) -> bytes:
    """Energy efficiency against interactivity (Figure 7 style), points labelled with their batch."""
    plt = pyplot()
    shown = [p for p in points if p.get("tokens_per_s_per_MW")]
    many_contexts = len(distinct(shown, "context")) > 1
    fig, ax = plt.subplots(figsize=(7, 4.8))
    labelled = []
    for fabric, pts in _by_fabric(shown).items():
        xy = [(p["interactivity_tok_s_user"], p["tokens_per_s_per_MW"]) for p in pts]
        ax.scatter(*zip(*xy), label=fabric, color=COLOURS.get(fabric))
        labelled += [(x, y, point_label(p, with_context=many_contexts)) for p, (x, y) in zip(pts, xy)]
    _annotate(ax, labelled, log_y=True)
    ax.set_yscale("log")
    _finish(ax, "interactivity (tokens/s/user)", "energy efficiency (tokens/s/MW)",
            f"energy efficiency vs interactivity: {subject(shown)}")
    return png_bytes(fig)


def breakdown_png(points: list[dict], *, what: str = "decode-step breakdown") -> bytes:
    """Stacked decode-step breakdown per point (Figure 5 style), grouped by fabric, batches in
    numeric order within a group."""
    plt = pyplot()
    bars = breakdown_bars(points)
    shown = [p for p in points if any(p.get("breakdown_s") or [])]
    fabrics = [label.split(" ", 1)[0] for label, _ in bars]
    # a gap between fabric groups: x advances one extra slot where the fabric changes
    xs, x = [], 0.0
    for i, f in enumerate(fabrics):
        if i and f != fabrics[i - 1]:
            x += 0.6
        xs.append(x)
        x += 1.0
    fig, ax = plt.subplots(figsize=(max(6.5, 0.5 * len(bars) + 3), 4.8))
    bottom = [0.0] * len(bars)
    for i, part in enumerate(BREAKDOWN_PARTS):
        vals = [b[1][i] * 1e3 for b in bars]
        ax.bar(xs, vals, bottom=bottom, label=part)
        bottom = [a + b for a, b in zip(bottom, vals)]
    ax.set_xticks(xs, [b[0] for b in bars], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("decode step (ms)")
    ax.set_title(f"{what}: {subject(shown)}", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return png_bytes(fig)


def scaling_png(points: list[dict]) -> bytes:
    """Best interactivity per world size and fabric (Figure 6 style)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.8))
    for fabric, pts in _by_fabric(points).items():
        best: dict[int, float] = {}
        for p in pts:
            w = int(quantity(p["world"]))
            best[w] = max(best.get(w, 0.0), p["interactivity_tok_s_user"])
        ax.plot(sorted(best), [best[w] for w in sorted(best)], marker="o", label=fabric, color=COLOURS.get(fabric))
    ax.set_xscale("log", base=2)
    _finish(ax, "accelerators", "best interactivity (tokens/s/user)", f"scaling with world size: {subject(points)}")
    return png_bytes(fig)


def splits_title(rows: list[dict], shown: list[dict], *, model: str, batch, context, fabric: str) -> str:
    feasible = sum(1 for r in rows if r.get("feasible"))
    return (f"{model}, {batch_label(batch)}, context {context_label(context)}, {fabric}: "
            f"fastest {len(shown)} of {feasible} feasible splits ({len(rows)} tried)")


def splits_png(rows: list[dict], *, model: str, batch, context, fabric: str) -> bytes:
    """A search cell's fastest splits as stacked horizontal bars of their decode-step breakdown,
    the fastest on top and in bold, each labelled (kvp,tpa,ep,tpe) and with its interactivity.
    (Interactivity against throughput would be a straight line: one batch per cell.)
    Every cell of a sweep draws one, so it is drawn with Pillow directly (pipelines.splits_figure)."""
    from pipelines.splits_figure import render_png, splits_layout

    shown = fastest_splits(rows)
    title = splits_title(rows, shown, model=model, batch=batch, context=context, fabric=fabric)
    return render_png(splits_layout(shown, title=title, parts=BREAKDOWN_PARTS, label=split_label))
