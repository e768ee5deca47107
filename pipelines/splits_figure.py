"""``splits.png`` of a search cell, drawn with Pillow directly instead of matplotlib.

Every cell of every search draws one, so its cost is paid thousands of times per sweep: matplotlib
took ≈ 0.16 s per figure (text layout and glyph rendering of ≈ 45 labels) plus ≈ 1 s to import in
each fresh worker; this renderer takes a few milliseconds and imports only Pillow. The figure is
a plain stacked horizontal bar chart, so nothing of matplotlib's generality is needed:
:func:`splits_layout` decides what is shown (pure, tested), :func:`render_png` draws it.
"""

from __future__ import annotations

import importlib.util
import io
import math
import os
from dataclasses import dataclass
from functools import lru_cache

DPI = 110  # the other figures' resolution (pipelines.plots.png_bytes)
WIDTH_IN = 9.0
# Margins in inches, as the matplotlib version set them (room for the labels and the legend)
LEFT_IN, RIGHT_IN, TOP_IN, BOTTOM_IN = 1.25, 1.4, 0.4, 0.55
BAR_HALF = 0.35  # half a bar's height, in rows
# matplotlib's default colour cycle "C0".."C4" (tab10), so the parts keep the colours of the other figures
PART_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")
GRID, AXES, TEXT = (222, 222, 222), (0, 0, 0), (0, 0, 0)


@dataclass(frozen=True, slots=True)
class SplitsLayout:
    """What splits.png shows, top row first (the fastest)."""
    title: str
    labels: tuple[str, ...]  # (kvp,tpa,ep,tpe) per row
    segments: tuple[tuple[float, ...], ...]  # per row: each part's width in ms, in ``parts`` order
    notes: tuple[str, ...]  # per row: the interactivity written after the bar
    parts: tuple[str, ...]
    x_max_ms: float


def splits_layout(shown: list[dict], *, title: str, parts: tuple[str, ...], label) -> SplitsLayout:
    """The fastest splits (``shown``, fastest first) as rows of part widths in milliseconds."""
    segments = tuple(tuple(r["breakdown_s"].get(p, 0.0) * 1e3 for p in parts) for r in shown)
    totals = [sum(s) for s in segments]
    return SplitsLayout(title=title, labels=tuple(label(r["parallel"]) for r in shown), segments=segments,
                        notes=tuple(f" {r['interactivity_tok_s_user']:.1f} tok/s/user" for r in shown),
                        parts=parts, x_max_ms=max(totals, default=1.0) * 1.28 or 1.0)


def nice_ticks(x_max: float, target: int = 7) -> list[float]:
    """Round tick values 0, s, 2s, ... ≤ x_max with s in 1/2/5 × 10^k, about ``target`` of them."""
    if not x_max > 0:
        return [0.0]
    raw = x_max / target
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [round(i * step, 12) for i in range(int(x_max / step + 1e-9) + 1)]


def tick_text(value: float) -> str:
    return f"{value:g}"


@lru_cache(maxsize=8)
def _font(size: int, bold: bool = False):
    """DejaVu Sans as matplotlib ships it (found without importing matplotlib), else Pillow's own."""
    from PIL import ImageFont

    spec = importlib.util.find_spec("matplotlib")
    if spec is not None and spec.submodule_search_locations:
        name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
        path = os.path.join(spec.submodule_search_locations[0], "mpl-data", "fonts", "ttf", name)
        if os.path.exists(path):
            return ImageFont.truetype(path, size)
    return ImageFont.load_default(size)


def _pt(points: float) -> int:
    """A font size in points as pixels at DPI."""
    return max(1, round(points * DPI / 72))


def render_png(layout: SplitsLayout) -> bytes:
    """The layout as PNG bytes: stacked bars, y labels, the interactivity per bar, x grid and ticks,
    a legend to the right, the title on top."""
    from PIL import Image, ImageDraw

    n = len(layout.labels)
    height_in = max(3.0, 0.32 * n + 1.6)
    w, h = round(WIDTH_IN * DPI), round(height_in * DPI)
    x0, x1 = round(LEFT_IN * DPI), w - round(RIGHT_IN * DPI)
    y0, y1 = round(TOP_IN * DPI), h - round(BOTTOM_IN * DPI)
    img = Image.new("RGB", (w, h), "white")
    draw = ImageDraw.Draw(img)
    small, tiny = _font(_pt(8)), _font(_pt(7))
    rows_span = max(n, 1) + 0.5  # rows from -0.75 to n - 0.25, as the matplotlib version

    def px(ms: float) -> float:
        return x0 + (x1 - x0) * ms / layout.x_max_ms

    def py(row: float) -> float:  # row 0 is the fastest, drawn at the top
        return y0 + (y1 - y0) * (row + 0.75) / rows_span

    for tick in nice_ticks(layout.x_max_ms):
        x = px(tick)
        draw.line([(x, y0), (x, y1)], fill=GRID)
        draw.line([(x, y1), (x, y1 + 4)], fill=AXES)
        draw.text((x, y1 + 6), tick_text(tick), font=small, fill=TEXT, anchor="mt")
    for row, (label, widths, note) in enumerate(zip(layout.labels, layout.segments, layout.notes)):
        top, bottom, left = py(row - BAR_HALF), py(row + BAR_HALF), 0.0
        for colour, width in zip(PART_COLOURS * 2, widths):
            if width > 0:
                draw.rectangle([px(left), top, px(left + width), bottom], fill=colour)
            left += width
        centre = py(row)
        draw.line([(x0 - 4, centre), (x0, centre)], fill=AXES)
        draw.text((x0 - 6, centre), label, font=_font(_pt(8), bold=row == 0), fill=TEXT, anchor="rm")
        draw.text((px(left), centre), note, font=tiny, fill=TEXT, anchor="lm")
    draw.rectangle([x0, y0, x1, y1], outline=AXES)
    draw.text(((x0 + x1) / 2, y1 + 10 + _pt(8)), "decode step (ms)", font=_font(_pt(10)), fill=TEXT, anchor="mt")
    _y_label(img, "split (kvp, tpa, ep, tpe)", centre_y=(y0 + y1) / 2)
    draw.text(((x0 + x1) / 2, y0 - 6), layout.title, font=_font(_pt(9)), fill=TEXT, anchor="md")
    _legend(draw, layout.parts, x=x1 + 10, y=y0 + 4, font=tiny)
    buf = io.BytesIO()
    # every search cell draws one: zlib level 1 takes 13.0 ms a figure, level 6 took 16.9 (file +9 %)
    img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def _y_label(img, text: str, *, centre_y: float) -> None:
    from PIL import Image, ImageDraw

    font = _font(_pt(10))
    left, top, right, bottom = font.getbbox(text)
    strip = Image.new("RGB", (right - left + 2, bottom - top + 2), "white")
    ImageDraw.Draw(strip).text((1 - left, 1 - top), text, font=font, fill=TEXT)
    rotated = strip.rotate(90, expand=True)
    top = min(max(0, round(centre_y - rotated.height / 2)), max(0, img.height - rotated.height))
    img.paste(rotated, (4, top))


def _legend(draw, parts: tuple[str, ...], *, x: int, y: int, font) -> None:
    line = _pt(7) + 6
    box = _pt(7)
    width = max(font.getbbox(p)[2] for p in parts) + box + 18
    draw.rectangle([x, y, x + width, y + line * len(parts) + 6], outline=(204, 204, 204), fill="white")
    for i, (part, colour) in enumerate(zip(parts, PART_COLOURS * 2)):
        top = y + 5 + i * line
        draw.rectangle([x + 6, top, x + 6 + box, top + box], fill=colour)
        draw.text((x + 12 + box, top + box / 2), part, font=font, fill=TEXT, anchor="lm")
