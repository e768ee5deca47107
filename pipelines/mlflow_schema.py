"""New SQLite MLflow stores start from a copy of an empty one instead of running the migrations.

MLflow makes a new SQLite store by running its whole Alembic migration history (≈ 0.65 CPU s,
plus ≈ 0.25 s importing Alembic, measured on 2 cores) — a large part of a short sweep's start.
The first new store a given MLflow version makes is kept, emptied, as a template:
``<cache>/mlflow-<version>.db`` with the schema, its revision and the rows the migrations insert,
without the Default experiment (MLflow adds that itself when it opens a store that lacks it,
with the new store's own artifact path and time). Every later new store is a copy of it, so
MLflow finds its tables at the head revision and only checks them. Deleting the cache is always
safe; a template MLflow refuses is removed and the store is made the usual way.

Where: ``$GX_MLFLOW_SCHEMA_CACHE`` if set (``off`` or empty: no template), else
``.gxnet-cache/mlflow-schema`` in the project folder.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

from pipelines.cache_dirs import cache_dir

ENV = "GX_MLFLOW_SCHEMA_CACHE"


def template_path(mlflow_version: str) -> Path | None:
    """The template of this MLflow version (None: templates are off)."""
    folder = cache_dir(ENV, "mlflow-schema")
    return None if folder is None else folder / f"mlflow-{mlflow_version}.db"


def installed_mlflow() -> str | None:
    """The installed MLflow's version, read from its package metadata (without importing it)."""
    from importlib import metadata

    try:
        return metadata.version("mlflow")
    except metadata.PackageNotFoundError:
        return None


def is_new_store(db: Path) -> bool:
    return not db.exists() or db.stat().st_size == 0


def seed_new_store(db: Path, template: Path | None) -> bool:
    """Copy the template into the new store ``db`` (the caller holds the store's lock); True when
    it did (False: no template yet, or it cannot be read)."""
    if template is None or not template.is_file():
        return False
    try:
        _copy_atomically(template, db)
    except sqlite3.Error:  # not a database: made anew from the next new store
        drop_template(template)
        return False
    except OSError:
        return False
    return True


def keep_template(db: Path, template: Path | None) -> None:
    """After MLflow made the new store ``db`` (nothing logged to it yet): keep an emptied copy as
    the template. A cache that cannot be written only costs the migrations next time."""
    if template is None or template.exists():
        return
    try:
        _copy_atomically(db, template, without_experiments=True)
    except (OSError, sqlite3.Error):
        pass


def drop_template(template: Path | None) -> None:
    """Remove a template MLflow refused (another build of the same version, a damaged file)."""
    if template is not None:
        try:
            template.unlink()
        except OSError:
            pass


def _copy_atomically(source: Path, target: Path, *, without_experiments: bool = False) -> None:
    """``target`` becomes a consistent copy of the SQLite database ``source`` in one file (written
    beside it in rollback-journal mode, then renamed); ``without_experiments``: its experiments
    deleted (the Default one, which MLflow re-creates per store)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        _backup(source, Path(tmp))
        con = sqlite3.connect(tmp)
        try:
            if without_experiments:
                con.execute("DELETE FROM experiments")
                con.commit()
            con.execute("PRAGMA journal_mode=DELETE")  # one plain file, whatever the source's journal (WAL)
        finally:
            con.close()
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _backup(source: Path, target: Path) -> None:
    """A consistent copy of one SQLite database (SQLite's online backup)."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()
