"""A second cache level that callers may share between processes.

The planner's plans (A.2: "a plan is a pure function of its request and can be cached and
reused") and the planned topologies' schedule phases are cached per process. Workers of one
sweep recompute each other's entries unless they can see them: a caller with side effects
(``pipelines.shared_cache``: a directory for the workers of one Ray sweep) installs a store
here, and the caches look it up on a miss and offer what they computed. This module does no
I/O itself and, with no store installed, changes nothing. Values must be pure functions of
their keys; a store may drop anything (a miss only costs the computation).
"""

from __future__ import annotations

from typing import Any, Protocol


class SharedStore(Protocol):
    def get(self, namespace: str, key: str) -> Any | None: ...

    def put(self, namespace: str, key: str, value: Any) -> None: ...


_store: SharedStore | None = None


def install(store: SharedStore | None) -> None:
    """Use ``store`` as the shared level of this process's caches (None: back to per-process only)."""
    global _store
    _store = store


def installed() -> SharedStore | None:
    return _store


def lookup(namespace: str, key: str) -> Any | None:
    return None if _store is None else _store.get(namespace, key)


def offer(namespace: str, key: str, value: Any) -> None:
    if _store is not None:
        _store.put(namespace, key, value)
