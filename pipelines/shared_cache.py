"""A directory shared by the Ray workers of one sweep, as the second level of the fabric caches.

Each worker process caches OCS plans and planned schedule phases for itself; with this store
installed (``fabrics.shared_memo``) a worker that misses looks for the entry another worker of
the same sweep already wrote. Entries are pickles named by a hash of (namespace, key), written
atomically (temporary file + rename), so concurrent workers never read half a file; two workers
computing the same entry at the same time both write it, harmlessly (same pure value). The
driver creates the directory for one sweep and removes it at the end, so nothing outlives the
code that computed it. On a multi-node cluster each node sees its own directory (a local
path): still correct, shared per node only.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any


class DirectoryStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)

    def _path(self, namespace: str, key: str) -> Path:
        digest = hashlib.sha256(f"{namespace}\0{key}".encode()).hexdigest()
        return self.root / namespace / f"{digest}.pkl"

    def get(self, namespace: str, key: str) -> Any | None:
        try:
            with open(self._path(namespace, key), "rb") as f:
                return pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError):  # absent or unreadable: a miss
            return None

    def put(self, namespace: str, key: str, value: Any) -> None:
        path = self._path(namespace, key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            pass  # a cache that cannot write is only slower


def use_directory(root: str | Path | None) -> None:
    """Install (or, with None, remove) the shared level for this process; idempotent."""
    from fabrics import shared_memo

    current = shared_memo.installed()
    if root is None:
        shared_memo.install(None)
    elif not (isinstance(current, DirectoryStore) and current.root == Path(root)):
        shared_memo.install(DirectoryStore(root))
