"""Runs written straight into MLflow's SQLite tables, without importing MLflow.

Importing MLflow costs a sweep's tracking process ≈ 2.7 CPU s and ≈ 50,000 first touches of
memory (docs/benchmarks.md) — a fifth of a cold 2,160-point search on 2 cores, and most of a
single tracked run — to write a few dozen rows. :class:`DirectStore` writes the same rows with
the standard library's ``sqlite3``: the subset of ``MlflowClient`` the
:class:`~pipelines.tracking.Tracker` calls, with the same arguments, the same rows and the same
checks of names and values as MLflow's ``SqlAlchemyStore`` and ``LocalArtifactRepository``
(tested row for row against them), and runs read back as light objects with the attributes the
Tracker reads.

It is used only where it is exact: a local SQLite store at the schema revision these writes were
checked against (:data:`SCHEMA_REVISION`), MLflow's default artifact root, and an experiment
whose artifacts are local files. Anything else (:func:`why_not`) goes through MLflow as before.
Its users: a sweep's tracking process, a single run, ``gx sync`` and ``gx report`` (which reads
runs with the filters :func:`parse_filter` takes and attaches its files); ``mlflow ui`` and
``gx replay`` (which downloads a run's schedule) use MLflow itself.
"""

from __future__ import annotations

import math
import os
import posixpath
import re
import shutil
import sqlite3
import tempfile
import time
import urllib.parse
import uuid
from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path

# The alembic head of mlflow 3.17.2 (mlflow/store/db_migrations/versions): the schema the rows
# below were checked against. A store at any other revision is written through MLflow.
SCHEMA_REVISION = "dc11669786a5"
# mlflow/utils/validation.py (3.17.2): key and value limits; values above them are cut unless
# MLFLOW_TRUNCATE_LONG_VALUES is false, keys above them are refused
MAX_ENTITY_KEY_LENGTH = 250
MAX_PARAM_VAL_LENGTH = 6000
MAX_TAG_VAL_LENGTH = 8000
MAX_EXPERIMENT_NAME_LENGTH = 500
MAX_EXPERIMENT_TAG_VAL_LENGTH = 20000
_VALID_NAME = re.compile(r"^[/\w.\- :]*$")  # validate_param_and_metric_name, POSIX
# mlflow/store/tracking/sqlalchemy_store.py: SQL holds no infinities, MLflow stores the largest double
_MAX_DOUBLE = 1.7976931348623157e308
# MLflow's own defaults (mlflow/store/tracking/__init__.py, mlflow/entities): what a store it
# opens without a configured artifact root uses
DEFAULT_ARTIFACT_ROOT = "./mlruns"
DEFAULT_WORKSPACE = "default"
RUN_NAME_TAG, USER_TAG = "mlflow.runName", "mlflow.user"
TERMINAL = frozenset({"FINISHED", "FAILED", "KILLED"})
STATUSES = TERMINAL | {"RUNNING", "SCHEDULED"}
# set, these make MLflow pick another artifact root or another store class: MLflow writes then
ENV_OVERRIDES = ("_MLFLOW_SERVER_ARTIFACT_ROOT", "MLFLOW_ENABLE_WORKSPACES")
# a file being copied into the artifact folder (mlflow/store/artifact/local_artifact_repo.py)
UPLOADING = ".artifact.uploading."

# the entities the Tracker builds (the fields of mlflow.entities.Param, Metric and RunTag)
Param = namedtuple("Param", "key value")
Metric = namedtuple("Metric", "key value timestamp step")
RunTag = namedtuple("RunTag", "key value")


class DirectStoreError(Exception):
    """A write MLflow would refuse, refused here with MLflow's reason."""


@dataclass(frozen=True, slots=True)
class Experiment:
    experiment_id: str
    name: str
    artifact_location: str
    lifecycle_stage: str
    tags: dict


@dataclass(frozen=True, slots=True)
class RunInfo:
    run_id: str
    experiment_id: str
    run_name: str
    user_id: str
    status: str
    start_time: int | None
    end_time: int | None
    artifact_uri: str
    lifecycle_stage: str


@dataclass(frozen=True, slots=True)
class RunData:
    metrics: dict
    params: dict
    tags: dict


@dataclass(frozen=True, slots=True)
class Run:
    info: RunInfo
    data: RunData


@dataclass(frozen=True, slots=True)
class FileInfo:
    path: str
    is_dir: bool
    file_size: int | None


def why_not(db: Path) -> str | None:
    """Why the store ``db`` must be written through MLflow (None: it can be written directly)."""
    for name in ENV_OVERRIDES:
        if os.environ.get(name):
            return f"{name} is set"
    try:
        con = sqlite3.connect(Path(db).resolve().as_uri() + "?mode=ro", uri=True, timeout=30.0)
        try:
            revisions = [r for (r,) in con.execute("SELECT version_num FROM alembic_version")]
            # deleting a run also deletes the GenAI assessments that name it, and rebuilds their
            # rollups: a store that holds any is left to MLflow
            assessed = revisions == [SCHEMA_REVISION] and con.execute("SELECT 1 FROM assessments LIMIT 1").fetchone()
        finally:
            con.close()
    except sqlite3.Error as exc:
        return f"its schema cannot be read ({exc})"
    if revisions != [SCHEMA_REVISION]:
        return f"schema revision {revisions} is not {SCHEMA_REVISION}"
    if assessed:
        return "it holds assessments"
    return None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def local_path(uri: str) -> Path | None:
    """The folder an artifact location names when it is local (a path or a file: URI)."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme == "" and os.path.isabs(uri):
        return Path(uri)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return Path(urllib.parse.unquote(parsed.path))
    return None


def _join(uri: str, *parts: str) -> str:
    """``uri`` with POSIX ``parts`` appended to its path (mlflow.utils.uri.append_to_uri_path)."""
    parsed = urllib.parse.urlparse(uri)
    path = posixpath.join(parsed.path, *parts)
    return path if parsed.scheme == "" else urllib.parse.urlunparse(parsed._replace(path=path))


def _truncating() -> bool:
    return os.environ.get("MLFLOW_TRUNCATE_LONG_VALUES", "true").strip().lower() not in ("false", "0")


def _name(kind: str, name) -> str:
    """A param, metric or tag key as MLflow checks it (characters, path-like, length)."""
    if name is None:
        raise DirectStoreError(f"{kind} name cannot be None")
    norm = posixpath.normpath(name)
    if not _VALID_NAME.match(name):
        raise DirectStoreError(f"invalid {kind} name {name!r}: names may only contain alphanumerics, underscores, "
                               "dashes, periods, spaces, colons and slashes")
    if norm != str(name) or norm == "." or norm.startswith(("..", "/")):
        raise DirectStoreError(f"invalid {kind} name {name!r}: it would resolve to {norm!r} as a path")
    if len(name) > MAX_ENTITY_KEY_LENGTH:
        raise DirectStoreError(f"{kind} name {name[:100]!r}... exceeds {MAX_ENTITY_KEY_LENGTH} characters")
    return name


def _value(kind: str, value: str, limit: int) -> str:
    if value is None or len(value) <= limit:
        return value
    if _truncating():
        return value[:limit]
    raise DirectStoreError(f"{kind} value exceeds {limit} characters")


def _metric_value(value) -> tuple[float, int]:
    """(value stored, is_nan) as MLflow's SqlAlchemyStore.sanitize_metric_value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DirectStoreError(f"metric value {value!r} is not a number")
    if math.isnan(value):
        return 0.0, 1
    if math.isinf(value):
        return (_MAX_DOUBLE if value > 0 else -_MAX_DOUBLE), 0
    return float(value), 0


_CLAUSE = re.compile(r"^\s*(tags|attributes)\.(`[^`]+`|\w+)\s*(=|!=)\s*'([^']*)'\s*$", re.IGNORECASE)
NEWEST_FIRST = ("attributes.start_time DESC",)  # MLflow's own order, the only one read here


def parse_filter(filter_string: str) -> list[tuple[str, str, str, str]]:
    """``tags.`k` = 'v' and tags.`j` != '' and attributes.status = 'v'`` as (kind, key, op, value)
    clauses: the filters gxnet's logging and report use; anything else is refused rather than read
    differently. As in MLflow, a tag comparison never matches a run without the tag."""
    clauses = []
    for part in re.split(r"\s+and\s+", filter_string.strip(), flags=re.IGNORECASE) if filter_string.strip() else []:
        m = _CLAUSE.match(part)
        if m is None:
            raise DirectStoreError(f"filter {part!r} is not an (in)equality on a tag or the status")
        kind, key, op, value = m.group(1).lower(), m.group(2).strip("`"), m.group(3), m.group(4)
        if kind == "attributes" and (key != "status" or op != "="):
            raise DirectStoreError(f"filter on attribute {key!r}: only the status, by equality, is supported")
        clauses.append((kind, key, op, value))
    return clauses


class DirectStore:
    """The calls of ``MlflowClient`` a sweep's Tracker makes, on one SQLite store. Each call is
    one transaction (``BEGIN IMMEDIATE``: writers wait for each other up to ``timeout_s``)."""

    def __init__(self, db: Path, *, wal: bool = False, timeout_s: float = 60.0):
        self.db = Path(db)
        self.con = sqlite3.connect(str(self.db), timeout=timeout_s, isolation_level=None, check_same_thread=False)
        if wal:
            from pipelines.sqlite_journal import switch_connection

            switch_connection(self.con)
        self.artifact_root = os.path.abspath(DEFAULT_ARTIFACT_ROOT)
        with self._write():
            self._default_experiment()

    def close(self) -> None:
        self.con.close()

    # -- transactions -------------------------------------------------------------------
    def _write(self):
        return _Transaction(self.con)

    def _one(self, sql: str, args=()):
        return self.con.execute(sql, args).fetchone()

    # -- experiments --------------------------------------------------------------------
    def _default_experiment(self) -> None:
        """MLflow adds experiment 0 to a store that lacks it, whenever it opens the store."""
        if self._one("SELECT 1 FROM experiments WHERE experiment_id = 0") is None:
            t = now_ms()
            self.con.execute("INSERT INTO experiments (experiment_id, name, artifact_location, lifecycle_stage, "
                             "creation_time, last_update_time, workspace) VALUES (0, 'Default', ?, 'active', ?, ?, ?)",
                             (_join(self.artifact_root, "0"), t, t, DEFAULT_WORKSPACE))

    def _experiment_row(self, where: str, arg) -> Experiment | None:
        row = self._one("SELECT experiment_id, name, artifact_location, lifecycle_stage FROM experiments "
                        f"WHERE {where} = ? AND workspace = ?", (arg, DEFAULT_WORKSPACE))
        if row is None:
            return None
        tags = dict(self.con.execute("SELECT key, value FROM experiment_tags WHERE experiment_id = ?", (row[0],)))
        return Experiment(str(row[0]), row[1], row[2], row[3], tags)

    def get_experiment_by_name(self, name: str) -> Experiment | None:
        return self._experiment_row("name", name)

    def get_experiment(self, experiment_id: str) -> Experiment:
        exp = self._experiment_row("experiment_id", int(experiment_id))
        if exp is None:
            raise DirectStoreError(f"no experiment with id {experiment_id}")
        return exp

    def create_experiment(self, name: str, tags: dict | None = None) -> str:
        if not name or len(name) > MAX_EXPERIMENT_NAME_LENGTH:
            raise DirectStoreError(f"invalid experiment name {name!r}")
        tags = {_name("experiment tag", k): v for k, v in (tags or {}).items()}
        for v in tags.values():
            if v is not None and len(v) > MAX_EXPERIMENT_TAG_VAL_LENGTH:
                raise DirectStoreError(f"experiment tag value exceeds {MAX_EXPERIMENT_TAG_VAL_LENGTH} characters")
        t = now_ms()
        with self._write():
            if self._experiment_row("name", name) is not None:
                raise DirectStoreError(f"experiment {name!r} already exists")
            cur = self.con.execute("INSERT INTO experiments (name, artifact_location, lifecycle_stage, creation_time, "
                                   "last_update_time, workspace) VALUES (?, NULL, 'active', ?, ?, ?)",
                                   (name, t, t, DEFAULT_WORKSPACE))
            eid = cur.lastrowid
            self.con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?",
                             (_join(self.artifact_root, str(eid)), eid))
            self.con.executemany("INSERT INTO experiment_tags (key, value, experiment_id) VALUES (?, ?, ?)",
                                 [(k, v, eid) for k, v in tags.items()])
        return str(eid)

    def restore_experiment(self, experiment_id: str) -> None:
        """The experiment and every run in it active again (MLflow restores the runs too)."""
        with self._write():
            self.con.execute("UPDATE experiments SET lifecycle_stage = 'active', last_update_time = ? "
                             "WHERE experiment_id = ?", (now_ms(), int(experiment_id)))
            self.con.execute("UPDATE runs SET lifecycle_stage = 'active', deleted_time = NULL WHERE experiment_id = ?",
                             (int(experiment_id),))

    def set_experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
        _name("experiment tag", key)
        with self._write():
            self._active_experiment(experiment_id)
            self.con.execute("INSERT INTO experiment_tags (key, value, experiment_id) VALUES (?, ?, ?) "
                             "ON CONFLICT (key, experiment_id) DO UPDATE SET value = excluded.value",
                             (key, value, int(experiment_id)))

    def _active_experiment(self, experiment_id: str) -> Experiment:
        exp = self.get_experiment(experiment_id)
        if exp.lifecycle_stage != "active":
            raise DirectStoreError(f"the experiment {experiment_id} must be in the 'active' state")
        return exp

    # -- runs ---------------------------------------------------------------------------
    def create_run(self, experiment_id: str, start_time: int | None = None, tags: dict | None = None,
                   run_name: str | None = None) -> Run:
        tags = dict(tags or {})
        named = tags.get(RUN_NAME_TAG)
        if run_name and named and run_name != named:
            raise DirectStoreError(f"run_name {run_name!r} and the {RUN_NAME_TAG} tag {named!r} differ")
        run_name = run_name or named or uuid.uuid4().hex[:8]  # MLflow draws a random adjective-noun name
        if not named:
            tags[RUN_NAME_TAG] = run_name
        run_id = uuid.uuid4().hex
        start = start_time or now_ms()
        with self._write():
            exp = self._active_experiment(experiment_id)
            self.con.execute(
                "INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name, user_id, status, "
                "start_time, end_time, source_version, lifecycle_stage, artifact_uri, experiment_id, deleted_time) "
                "VALUES (?, ?, 'UNKNOWN', '', '', ?, 'RUNNING', ?, NULL, '', 'active', ?, ?, NULL)",
                (run_id, run_name, tags.get(USER_TAG, "unknown"), start,
                 _join(exp.artifact_location, run_id, "artifacts"), int(experiment_id)))
            self._set_tags(run_id, list(tags.items()))
        return self.get_run(run_id)

    def _active_run(self, run_id: str) -> None:
        row = self._one("SELECT lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,))
        if row is None:
            raise DirectStoreError(f"run {run_id!r} not found")
        if row[0] != "active":
            raise DirectStoreError(f"the run {run_id} must be in the 'active' state; its state is {row[0]!r}")

    def log_batch(self, run_id: str, metrics=(), params=(), tags=()) -> None:
        rows = []
        for m in metrics:
            _name("metric", m.key)
            value, is_nan = _metric_value(m.value)
            if not isinstance(m.timestamp, int) or m.timestamp < 0 or not isinstance(m.step, int):
                raise DirectStoreError(f"metric {m.key!r}: timestamp and step must be non-negative integers")
            rows.append((m.key, value, m.timestamp, run_id, m.step, is_nan))
        params = [(_name("param", p.key), _value("param", p.value, MAX_PARAM_VAL_LENGTH)) for p in params]
        keys = [k for k, _ in params]
        if len(set(keys)) != len(keys):
            raise DirectStoreError("duplicate parameter keys in one batch")
        with self._write():
            self._active_run(run_id)
            self._log_params(run_id, params)
            self._log_metrics(rows)
            self._set_tags(run_id, [(t.key, t.value) for t in tags])

    def _log_params(self, run_id: str, params: list) -> None:
        old = dict(self.con.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,)))
        changed = [(k, old[k], v) for k, v in params if k in old and old[k] != v]
        if changed:
            raise DirectStoreError(f"changing param values is not allowed: {changed} for run {run_id}")
        self.con.executemany("INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)",
                             [(k, v, run_id) for k, v in params if k not in old])

    def _log_metrics(self, rows: list) -> None:
        """History rows (an identical row is kept once) and the latest value per key: the one
        with the greatest (step, timestamp, value), as MLflow keeps it."""
        self.con.executemany("INSERT OR IGNORE INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                             "VALUES (?, ?, ?, ?, ?, ?)", rows)
        latest: dict = {}
        for key, value, ts, run_id, step, is_nan in rows:
            best = latest.get((key, run_id))
            if best is None or (step, ts, value) > (best[4], best[2], best[1]):
                latest[(key, run_id)] = (key, value, ts, run_id, step, is_nan)
        for key, value, ts, run_id, step, is_nan in latest.values():
            old = self._one("SELECT step, timestamp, value FROM latest_metrics WHERE key = ? AND run_uuid = ?",
                            (key, run_id))
            if old is None:
                self.con.execute("INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
                                 "VALUES (?, ?, ?, ?, ?, ?)", (key, value, ts, step, is_nan, run_id))
            elif (step, ts, value) > tuple(old):
                self.con.execute("UPDATE latest_metrics SET value = ?, timestamp = ?, step = ?, is_nan = ? "
                                 "WHERE key = ? AND run_uuid = ?", (value, ts, step, is_nan, key, run_id))

    def _set_tags(self, run_id: str, tags: list) -> None:
        for key, value in tags:
            value = _value("tag", value, MAX_TAG_VAL_LENGTH)
            self.con.execute("INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?) "
                             "ON CONFLICT (key, run_uuid) DO UPDATE SET value = excluded.value",
                             (_name("tag", key), value, run_id))
            if key == RUN_NAME_TAG:  # the run's name follows its name tag
                self.con.execute("UPDATE runs SET name = ? WHERE run_uuid = ?", (value, run_id))

    def set_tag(self, run_id: str, key: str, value) -> None:
        self.log_batch(run_id, tags=[RunTag(key, str(value))])

    def update_run(self, run_id: str, status: str | None = None, name: str | None = None) -> None:
        """MlflowClient.update_run: a terminal status also sets the end time."""
        self._update(run_id, status, now_ms() if status in TERMINAL else None, name)

    def set_terminated(self, run_id: str, status: str | None = None, end_time: int | None = None) -> None:
        self._update(run_id, status or "FINISHED", end_time or now_ms(), None)

    def _update(self, run_id: str, status: str | None, end_time: int | None, name: str | None) -> None:
        if status is not None and status not in STATUSES:
            raise DirectStoreError(f"run status {status!r} is not one of {sorted(STATUSES)}")
        with self._write():
            self._active_run(run_id)
            if status is not None:
                self.con.execute("UPDATE runs SET status = ? WHERE run_uuid = ?", (status, run_id))
            if end_time is not None:
                self.con.execute("UPDATE runs SET end_time = ? WHERE run_uuid = ?", (end_time, run_id))
            if name:
                self._set_tags(run_id, [(RUN_NAME_TAG, name)])

    def delete_run(self, run_id: str) -> None:
        with self._write():
            if self._one("SELECT 1 FROM runs WHERE run_uuid = ?", (run_id,)) is None:
                raise DirectStoreError(f"run {run_id!r} not found")
            if self._one("SELECT 1 FROM assessments LIMIT 1") is not None:  # added since the store opened
                raise DirectStoreError("the store holds assessments, which MLflow deletes with their run")
            self.con.execute("UPDATE runs SET lifecycle_stage = 'deleted', deleted_time = ? WHERE run_uuid = ?",
                             (now_ms(), run_id))

    # -- reading runs -------------------------------------------------------------------
    def get_run(self, run_id: str) -> Run:
        runs = self._runs("r.run_uuid = ?", [run_id], 1, active_only=False)
        if not runs:
            raise DirectStoreError(f"run {run_id!r} not found")
        return runs[0]

    def search_runs(self, experiment_ids, filter_string: str = "", max_results: int = 1000,
                    order_by=None) -> list[Run]:
        """Active runs of the experiments matching the filter, newest first (MLflow's order)."""
        if order_by and tuple(order_by) != NEWEST_FIRST:
            raise DirectStoreError(f"order_by {order_by!r}: only {list(NEWEST_FIRST)} is supported")
        where, args = [f"r.experiment_id IN ({','.join('?' * len(experiment_ids))})"], [int(e) for e in experiment_ids]
        for kind, key, op, value in parse_filter(filter_string):
            if kind == "tags":
                where.append("EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = ? "
                             f"AND t.value {op} ?)")
                args += [key, value]
            else:
                where.append("r.status = ?")
                args.append(value)
        return self._runs(" AND ".join(where), args, max_results, active_only=True)

    def _runs(self, where: str, args: list, limit: int, *, active_only: bool) -> list[Run]:
        if active_only:
            where += " AND r.lifecycle_stage = 'active'"
        rows = self.con.execute(
            "SELECT r.run_uuid, r.experiment_id, r.name, r.user_id, r.status, r.start_time, r.end_time, "
            f"r.artifact_uri, r.lifecycle_stage FROM runs r WHERE {where} "
            "ORDER BY r.start_time DESC, r.run_uuid LIMIT ?", (*args, int(limit))).fetchall()
        ids = [r[0] for r in rows]
        tags, params, metrics = ({i: {} for i in ids} for _ in range(3))
        for chunk in (ids[i:i + 500] for i in range(0, len(ids), 500)):
            marks = ",".join("?" * len(chunk))
            for key, value, rid in self.con.execute(f"SELECT key, value, run_uuid FROM tags WHERE run_uuid IN ({marks})",
                                                    chunk):
                tags[rid][key] = value
            for key, value, rid in self.con.execute(
                    f"SELECT key, value, run_uuid FROM params WHERE run_uuid IN ({marks})", chunk):
                params[rid][key] = value
            for key, value, is_nan, rid in self.con.execute(
                    f"SELECT key, value, is_nan, run_uuid FROM latest_metrics WHERE run_uuid IN ({marks})", chunk):
                metrics[rid][key] = math.nan if is_nan else value
        return [Run(RunInfo(r[0], str(r[1]), r[2], r[3], r[4], r[5], r[6], r[7], r[8]),
                    RunData(metrics[r[0]], params[r[0]], tags[r[0]])) for r in rows]

    # -- artifacts (local files, as MLflow's LocalArtifactRepository) ------------------------
    def _artifact_dir(self, run_id: str, artifact_path: str | None) -> Path:
        uri = self.get_run(run_id).info.artifact_uri
        root = local_path(uri)
        if root is None:
            raise DirectStoreError(f"artifact location {uri!r} is not a local folder")
        if not artifact_path:
            return root
        sub = os.path.normpath(artifact_path)
        if os.path.isabs(sub) or sub.startswith(".."):
            raise DirectStoreError(f"artifact path {artifact_path!r} leaves the run's artifact folder")
        return root / sub

    def log_artifact(self, run_id: str, local_file: str, artifact_path: str | None = None) -> None:
        target = self._artifact_dir(run_id, artifact_path)
        target.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target, prefix=UPLOADING)
        try:
            with os.fdopen(fd, "wb") as out, open(local_file, "rb") as src:
                shutil.copyfileobj(src, out)
            os.replace(tmp, target / os.path.basename(local_file))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def log_artifacts(self, run_id: str, local_dir: str, artifact_path: str | None = None) -> None:
        target = self._artifact_dir(run_id, artifact_path)
        target.mkdir(parents=True, exist_ok=True)
        for folder, dirs, files in os.walk(local_dir):
            rel = os.path.relpath(folder, local_dir)
            for d in dirs:
                (target / rel / d).mkdir(exist_ok=True)
            for f in files:
                shutil.copy2(os.path.join(folder, f), target / rel / f)

    def list_artifacts(self, run_id: str, path: str | None = None) -> list[FileInfo]:
        root = self._artifact_dir(run_id, None)
        folder = self._artifact_dir(run_id, path)
        if not folder.is_dir():
            return []
        infos = []
        for entry in os.listdir(folder):
            full = folder / entry
            if entry.startswith(UPLOADING):
                continue
            rel = full.relative_to(root).as_posix()
            infos.append(FileInfo(rel, True, None) if full.is_dir() else FileInfo(rel, False, full.stat().st_size))
        return sorted(infos, key=lambda f: f.path)


class _Transaction:
    """``with``: BEGIN IMMEDIATE … COMMIT, rolled back on an error."""

    def __init__(self, con: sqlite3.Connection):
        self.con = con

    def __enter__(self):
        self.con.execute("BEGIN IMMEDIATE")
        return self.con

    def __exit__(self, kind, exc, tb):
        self.con.execute("ROLLBACK" if kind else "COMMIT")
        return False
