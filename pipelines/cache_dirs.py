"""Where gxnet keeps its on-disk caches: ``.gxnet-cache/<name>`` in the project folder, or the
folder an environment variable names (``off``, ``none``, ``false``, ``0`` or empty: no cache).
Every cache there is safe to delete."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE_ROOT = ROOT / ".gxnet-cache"
OFF = ("", "off", "none", "false", "0")


def cache_dir(env: str, name: str) -> Path | None:
    """``$env`` if set (None when it says off), else ``.gxnet-cache/<name>``."""
    where = os.environ.get(env)
    if where is not None and where.strip().lower() in OFF:
        return None
    return Path(where) if where else CACHE_ROOT / name
