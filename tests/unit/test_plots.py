"""What the figures show: numeric order, model and context in titles, points labelled by batch."""

from __future__ import annotations

import io
import math

import pytest

from pipelines import plots
from pipelines.report import render


def point(fabric, batch, context="5M", model="megatron_5t", step_ms=1.0, **extra):
    return {"fabric": fabric, "batch": batch, "context": context, "model": model, "world": "512",
            "status": "FINISHED", "interactivity_tok_s_user": 1e3 / step_ms,
            "throughput_tok_s": float(batch) * 1e3 / step_ms, "tokens_per_s_per_MW": 100.0 * float(batch),
            "breakdown_s": [step_ms * 1e-3, 0, 0, 0, 0], **extra}


@pytest.fixture
def captured(monkeypatch):
    """Figures are kept instead of rendered: their titles and labels can be read back."""
    figs = []

    def keep(fig, dpi=110, **_):
        figs.append(fig)
        return b"\x89PNG"

    monkeypatch.setattr(plots, "png_bytes", keep)
    yield figs
    plots.pyplot().close("all")


def test_quantity_is_numeric_for_batches_and_contexts():
    assert plots.quantity("16") == 16 and plots.quantity(4.0) == 4
    assert plots.quantity("5M") == 5_000_000 and plots.quantity("32K") == 32_000
    assert math.isinf(plots.quantity("bogus")) and math.isinf(plots.quantity(None))
    assert plots.context_label(5_000_000) == "5M" and plots.context_label("32K") == "32K"
    assert plots.context_label(32768) == "32768"


def test_breakdown_bars_run_in_numeric_batch_order_grouped_by_fabric():
    pts = [point(f, b) for f in ("all_ocs", "all_eps", "hybrid") for b in ("16", "1", "4")]
    labels = [label for label, _ in plots.breakdown_bars(pts)]
    assert labels == [f"{f} B={b}" for f in ("all_eps", "hybrid", "all_ocs") for b in (1, 4, 16)]


def test_breakdown_labels_name_the_context_only_when_it_varies():
    pts = [point("all_eps", "1", "5M"), point("all_eps", "1", "32K"), point("all_eps", "16", "32K")]
    labels = [label for label, _ in plots.breakdown_bars(pts)]
    assert labels == ["all_eps B=1 32K", "all_eps B=16 32K", "all_eps B=1 5M"]  # 32K < 5M numerically


def test_points_without_a_breakdown_get_no_bar():
    pts = [point("all_eps", "1"), {**point("all_eps", "4"), "breakdown_s": [0, 0, 0, 0, 0]}]
    assert [label for label, _ in plots.breakdown_bars(pts)] == ["all_eps B=1"]


def test_subject_names_models_and_contexts_in_numeric_order():
    pts = [point("all_eps", "1", "5M"), point("hybrid", "1", "32K")]
    assert plots.subject(pts) == "megatron_5t, context 32K/5M"
    assert plots.subject(pts, context=False) == "megatron_5t"


def test_one_label_per_neighbourhood_of_equal_labels():
    pts = [(100.0, 500.0, "B=1"), (101.0, 501.0, "B=1"),  # two fabrics on top of each other
           (101.0, 501.0, "B=4"),                          # another label at the same place
           (900.0, 100.0, "B=1")]                          # the same label far away
    assert plots.labels_to_draw(pts) == [0, 2, 3]
    assert plots.labels_to_draw([]) == []


def test_fastest_splits_skip_infeasible_and_keep_the_search_tie_break():
    rows = [{"parallel": {"kvp": k, "tpa": 512 // k, "ep": 16, "tpe": 32}, "feasible": True, "decode_step_s": s}
            for k, s in ((8, 2e-3), (4, 2e-3), (16, 1e-3))]
    rows.append({"parallel": {"kvp": 1, "tpa": 512, "ep": 16, "tpe": 32}, "feasible": False, "reason": "HBM"})
    order = [plots.split_label(r["parallel"]) for r in plots.fastest_splits(rows)]
    assert order == ["(16,32,16,32)", "(4,128,16,32)", "(8,64,16,32)"]
    assert len(plots.fastest_splits(rows, shown=2)) == 2


def test_report_figures_carry_model_context_and_batch_labels(captured):
    rows = []
    for fabric in ("all_ocs", "all_eps"):
        for batch in ("16", "1", "4"):
            p = point(fabric, batch)
            rows.append({"run_id": f"{fabric}{batch}", "status": "FINISHED", "name": f"{fabric}-{batch}",
                         "error": None,
                         "params": {"fabric.name": fabric, "model.name": "megatron_5t", "world": "512",
                                    "batch": batch, "context": "5M"},
                         "metrics": {"interactivity_tok_s_user": p["interactivity_tok_s_user"],
                                     "throughput_tok_s": p["throughput_tok_s"],
                                     "tokens_per_s_per_MW": p["tokens_per_s_per_MW"],
                                     "breakdown_s.attention": 1e-3 * float(batch)}})
    _, figs = render("decode", rows)
    assert sorted(figs) == ["breakdown.png", "energy.png", "pareto.png"]
    titles = [fig.axes[0].get_title() for fig in captured]
    assert all("megatron_5t" in t and "5M" in t for t in titles), titles
    pareto_fig, energy_fig, breakdown_fig = captured
    texts = {t.get_text() for t in pareto_fig.axes[0].texts}
    assert {"B=1", "B=4", "B=16"} <= texts
    ticks = [t.get_text() for t in breakdown_fig.axes[0].get_xticklabels()]
    assert ticks == [f"{f} B={b}" for f in ("all_eps", "all_ocs") for b in (1, 4, 16)]


def test_splits_figure_title_and_fastest_on_top():
    from PIL import Image

    from pipelines.splits_figure import splits_layout

    rows = [{"parallel": {"kvp": k, "tpa": 512 // k, "ep": 16, "tpe": 32}, "feasible": k != 2,
             "decode_step_s": s, "interactivity_tok_s_user": 1 / s,
             "breakdown_s": {"attention": s / 2, "communication": s / 2}}
            for k, s in ((8, 2e-3), (4, 1e-3), (2, 0.5e-3))]
    shown = plots.fastest_splits(rows)
    title = plots.splits_title(rows, shown, model="megatron_5t", batch=1, context=5_000_000, fabric="all_eps")
    assert title == "megatron_5t, B=1, context 5M, all_eps: fastest 2 of 2 feasible splits (3 tried)"
    layout = splits_layout(shown, title=title, parts=plots.BREAKDOWN_PARTS, label=plots.split_label)
    assert layout.labels == ("(4,128,16,32)", "(8,64,16,32)")  # fastest first (drawn on top)
    assert layout.segments[0] == (0.5, 0.0, 0.5, 0.0, 0.0) and layout.notes[1] == " 500.0 tok/s/user"
    assert layout.x_max_ms == 2.0 * 1.28
    png = plots.splits_png(rows, model="megatron_5t", batch=1, context=5_000_000, fabric="all_eps")
    img = Image.open(io.BytesIO(png))
    assert img.size == (990, 330) and img.getpixel((495, 10)) == (255, 255, 255)
    # the fastest bar starts at the axes' left edge in the first part's colour
    assert img.getpixel((139, 101)) == (31, 119, 180)


def test_splits_figure_ticks_are_round():
    from pipelines.splits_figure import nice_ticks

    assert nice_ticks(1.25) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2]
    assert nice_ticks(2.56) == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert nice_ticks(0.0) == [0.0]