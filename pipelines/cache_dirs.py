"""Where gxnet keeps its on-disk caches: ``.gxnet-cache/<name>`` in the project folder, or the
folder an environment variable names (``off``, ``none``, ``false``, ``0`` or empty: no cache).
Every cache there is safe to delete."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
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


@lru_cache(maxsize=8)  # explicit keyed cache: the source does not change in a process
def source_fingerprint(*packages: str) -> str:
    """SHA-256 (16 hex digits) over the Python source of ``packages`` (folders of the project):
    a cache folder named by it is never read by other code."""
    h = hashlib.sha256()
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            h.update(str(path.relative_to(ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def read_json(path: Path):
    """The JSON value in ``path``, or None when it is absent, unreadable or not whole JSON."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_json_atomic(path: Path, value) -> bool:
    """Write ``value`` as JSON to a temporary file beside ``path``, then rename it into place, so a
    reader sees a whole file or none; False (and nothing left behind) on a read-only or full disk."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem[:8]}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:  # dumps, not dump: one C-encoded string, not chunks from the Python encoder
            f.write(json.dumps(value, separators=(",", ":")))
        os.replace(tmp, path)
        return True
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False


class KeyedFiles:
    """One JSON file per key, ``<root>/<code>/<key[:2]>/<key>.json``, ``code`` the fingerprint of
    the code whose answers they hold (a string, or a function computing it when a file is first
    wanted: a process that never reads the store never hashes the source); counts hits, misses
    and writes (a store's ``stats``)."""

    def __init__(self, root: str | os.PathLike, code):
        self._base, self._code, self._root = Path(root), code, None
        self.hits = self.misses = self.writes = 0

    @property
    def root(self) -> Path:
        if self._root is None:
            self._root = self._base / (self._code if isinstance(self._code, str) else self._code())
        return self._root

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def stats(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "writes": self.writes}
