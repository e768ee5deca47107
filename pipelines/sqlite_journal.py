"""Write-ahead logging for the local SQLite MLflow stores gxnet logs to.

MLflow opens SQLite in its rollback-journal mode with ``synchronous=FULL``: every commit syncs
the journal and the database (one cold figure-4 search, 31 runs, made 1,596 ``fdatasync``
calls; measured with ``strace -c``, docs/benchmarks.md), and on a shared disk each sync stalls
the other processes' file writes. In WAL mode with ``synchronous=NORMAL`` a commit appends to
the write-ahead log and the disk is synced at checkpoints only, and a reader (an open ``mlflow
ui``) no longer blocks the writer. A power loss may lose the last commits but does not corrupt
the database (SQLite, "Write-Ahead Logging" and "PRAGMA synchronous"); a sweep's points lost that
way are still in their job folders, and a rerun or ``gx sync`` logs them.

WAL needs memory shared by every process that opens the file, so a database on a network
filesystem (or one whose filesystem cannot be told) keeps its journal mode, as does any
database when ``tracking.sqlite_wal=false``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

# /proc/mounts types of network and cluster filesystems (proc(5), the filesystems' own docs)
NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "9p", "afs", "ceph", "lustre", "gpfs",
                        "beegfs", "glusterfs", "fuse.glusterfs", "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse",
                        "fuse.rclone", "fuse.juicefs", "virtiofs"})
_WAL_FILES: set[str] = set()  # databases whose connections switch to WAL (resolved paths)
_LISTENING = [False]


def filesystem_type(path: Path, mounts: str = "/proc/mounts") -> str | None:
    """The type of the filesystem holding ``path`` (its longest mount point), None if unknown."""
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return None
    where = os.path.realpath(path)
    best, kind = "", None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def wal_allowed(db: Path, mounts: str = "/proc/mounts") -> bool:
    kind = filesystem_type(db, mounts)
    return kind is not None and kind not in NETWORK_FS


def allow_wal(db: Path) -> bool:
    """From now on, connections of this process to ``db`` that :func:`switch_connection` is given
    run it in WAL mode with ``synchronous=NORMAL`` (when its filesystem allows; returns whether
    it does)."""
    if not wal_allowed(db):
        return False
    _WAL_FILES.add(os.path.realpath(db))
    return True


def use_wal(db: Path) -> bool:
    """:func:`allow_wal`, and this process's SQLAlchemy connections to ``db`` are switched as
    they open."""
    if not allow_wal(db):
        return False
    if not _LISTENING[0]:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        event.listen(Engine, "connect", _on_connect)
        _LISTENING[0] = True
    return True


def switch_connection(con: sqlite3.Connection) -> None:
    """Put one connection in WAL mode with ``synchronous=NORMAL`` if its database was allowed."""
    try:
        files = [row[2] for row in con.execute("PRAGMA database_list") if row[1] == "main"]
        if not files or os.path.realpath(files[0]) not in _WAL_FILES:
            return
        (mode,) = con.execute("PRAGMA journal_mode").fetchone()  # asking takes no lock
        if str(mode).lower() != "wal":  # switching does: once per database
            (mode,) = con.execute("PRAGMA journal_mode=WAL").fetchone()
        if str(mode).lower() == "wal":  # NORMAL is safe in WAL mode only
            con.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error:  # locked by another process meanwhile: this connection keeps the old mode
        pass


def _on_connect(dbapi_conn, _record) -> None:
    if isinstance(dbapi_conn, sqlite3.Connection):
        switch_connection(dbapi_conn)


def checkpoint(db: Path) -> None:
    """Copy ``db``'s write-ahead log into the database and sync it to disk (once a sweep has
    logged its last run: from then on a power loss cannot take any of its commits)."""
    if os.path.realpath(db) not in _WAL_FILES:
        return
    try:
        # mode=rw: a database deleted meanwhile is not made anew; a reader in the way (the report
        # process) delays the end by 2 s at most
        con = sqlite3.connect(Path(db).resolve().as_uri() + "?mode=rw", uri=True, timeout=2.0)
        try:
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            con.close()
    except sqlite3.Error:  # busy or gone: SQLite checkpoints it later by itself
        pass
