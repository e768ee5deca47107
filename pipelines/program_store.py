"""Compiled decode programs on disk, shared by a sweep's processes and by later runs
(``gxnet.compile``: a program is a pure function of its family's specs and of the code that
compiles it).

Compiling a family (the symbolic passes and SymPy's lambdify) costs 0.3-0.8 s per process; a
stored program loads in a few milliseconds. One JSON file per family:
``<root>/<code>/<key[:2]>/<key>.json``, ``key`` a hash of the family's specs (the record holds
them in full and is used only when they match) and ``code`` a fingerprint of the source of
``gxnet``, ``collectives`` and ``fabrics`` with the SymPy and Python versions, so changed code
never reads an older program. A record holds the program's slots and the Python source of its
evaluation function, which reads only ``math`` and a few builtins and is executed when loaded -- the
store is trusted as ``__pycache__`` is: keep it in a folder only you write. Files are written
atomically; one that cannot be read or rebuilt is ignored and compiled again (then
overwritten). Deleting the folder is always safe.

Where: ``$GX_PROGRAM_STORE`` if set (``off`` or empty: no store), else
``.gxnet-cache/programs`` in the project folder. Code registered from outside those packages
(a sharding scheme or kernel model of your own) is not in the fingerprint: set
``GX_PROGRAM_STORE=off`` while changing it.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache

from pipelines.cache_dirs import KeyedFiles, cache_dir, read_json, source_fingerprint, write_json_atomic

ENV = "GX_PROGRAM_STORE"


@lru_cache(maxsize=1)  # explicit keyed cache of one value: neither changes in a process
def compiler_fingerprint() -> str:
    from importlib.metadata import version  # not ``import sympy``: 0.4 s in a process that never compiles

    code = source_fingerprint("gxnet", "collectives", "fabrics")
    return f"{code}-sympy{version('sympy')}-py{sys.version_info[0]}{sys.version_info[1]}"


class ProgramStore(KeyedFiles):
    """``gxnet.compile.ProgramStore`` on a folder; counts its hits, misses and writes."""

    def __init__(self, root: str | os.PathLike, code: str | None = None):
        super().__init__(root, code or compiler_fingerprint)

    def load(self, key: str) -> dict | None:
        record = read_json(self.path(key))
        if isinstance(record, dict):
            self.hits += 1
            return record
        self.misses += 1
        return None

    def save(self, key: str, record: dict) -> None:
        self.writes += write_json_atomic(self.path(key), record)  # a read-only disk: used, not kept


def attach_default_program_store() -> ProgramStore | None:
    """Attach ``$GX_PROGRAM_STORE`` (default ``.gxnet-cache/programs``) to ``gxnet.compile``
    unless a store is attached already (then keep it). Called where pipelines build deployments
    (``pipelines.specs``, the prefill phase), which import gxnet anyway: a process that never
    builds one (``gx alltoallv``, ``gx collective``) never imports the compiler for it."""
    from gxnet.compile import attach_program_store

    current = attach_program_store(None)
    if current is None:
        folder = cache_dir(ENV, "programs")
        current = None if folder is None else ProgramStore(folder)
    attach_program_store(current)
    return current
