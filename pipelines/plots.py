"""Matplotlib plumbing shared by every pipeline that writes a PNG artifact (Agg backend, no display)."""

from __future__ import annotations

import io


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_bytes(fig, dpi: int = 110) -> bytes:
    """Render and close ``fig``; returns the PNG file's bytes (artifacts are written atomically later)."""
    plt = pyplot()
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()
