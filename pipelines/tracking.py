"""MLflow tracking: one parent run per sweep, one child run per point (a sweep's logged by its
tracking process beside the driver, ``pipelines.tracking_process``).

Default store: SQLite at an absolute path in the working directory (``mlflow.db``), created by
the first driver under a file lock; an existing tracking server when ``tracking.uri`` (or
``MLFLOW_TRACKING_URI``) is given. Opening a :class:`Tracker` probes the store and raises
:class:`StoreUnavailable` (a ``SpecError``: one line, exit 2) within seconds when it cannot be
reached; MLflow's HTTP retries are bounded (:data:`HTTP_BOUNDS`) so no call blocks for minutes.

A point is identified by its config hash (tag ``gx.config_hash``). Logging is idempotent: a
point with a FINISHED child is never logged again (checked before logging, and after: of two
FINISHED children of one point the earliest stays), so reruns, ``gx sync`` and two drivers
started together cannot duplicate a child. One driver per sweep at a time (:meth:`Tracker.open_sweep`
takes a lock keyed by store and sweep hash; the kernel releases it when the driver exits).

A store that fails mid-sweep never stops the sweep: the Tracker says so once, marks itself
down and keeps going; every point's job directory holds ``tracking.json`` (what to log) beside
``results.json``, and the sweep directory lists what was not logged in ``tracking_pending.jsonl``.
The next run of the same sweep (:meth:`Tracker.adopt_from_disk`) or ``gx sync`` logs them.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from collectives.errors import SpecError

TAG_HASH = "gx.config_hash"
TAG_SWEEP = "gx.sweep_hash"
TAG_PIPELINE = "gx.pipeline"
TAG_PARENT = "mlflow.parentRunId"
TAG_SWEEP_DIRS = "gx.sweep_dirs"  # JSON list of the sweep directories that ran this sweep
TAG_POINTS = "gx.points"          # number of points of the sweep (counts are over all of them)
TAG_DRIVER_RUNS = "gx.driver_runs"
# MLflow 3's UI opens an experiment in GenAI mode (traces) unless it is tagged as model
# development (mlflow/server/js: ExperimentKind.CUSTOM_MODEL_DEVELOPMENT).
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
RECORD = "tracking.json"            # per job directory: what to log for the point
PENDING = "tracking_pending.jsonl"  # per sweep directory: points not in the store yet
ORCHESTRATION_PREFIXES = ("hydra", "ray", "tracking")
# MLflow's HTTP client retries 7 times with backoff factor 2 (about 4 minutes against a dead
# server) and waits 120 s per request (mlflow/environment_variables.py). Bounded here, so a
# dead server costs a few seconds once: 2 retries (waits of 0 and 2 s plus jitter), 10 s per
# request. A value already in the environment wins.
HTTP_BOUNDS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
               "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
PROBE_TIMEOUT_S = (3.0, 5.0)  # connect, read: an unreachable server is reported within ~10 s


class StoreUnavailable(SpecError):
    """The tracking store cannot be reached or opened (one line, exit 2)."""


class SweepLocked(SpecError):
    """Another driver is running the same sweep against the same store."""


def config_hash(pipeline: str, cfg: dict) -> str:
    """Stable hash of a point: pipeline name + resolved config (without Hydra's own node)."""
    body = {k: v for k, v in cfg.items() if k != "hydra"}
    text = json.dumps({"pipeline": pipeline, "cfg": body}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def default_uri(cwd: str | None = None) -> str:
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{Path(cwd or os.getcwd()).resolve() / 'mlflow.db'}"


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(d, (list, tuple)) and prefix:
        out[prefix[:-1]] = json.dumps(d, default=str)[:500]
    elif prefix:
        out[prefix[:-1]] = d
    return out


def param_values(params: dict) -> dict[str, str]:
    """Config as MLflow params: flattened, unset (None) values left out rather than "None"."""
    return {k: str(v)[:500] for k, v in flatten(params).items() if v is not None}


def numeric_metrics(results: dict) -> dict[str, float]:
    """Numbers from results.json (nested dicts flattened), as MLflow metrics."""
    metrics = {}
    for key, val in flatten(results).items():
        if isinstance(val, bool):
            continue
        if isinstance(val, (int, float)):
            metrics[key.replace("/", "_")] = float(val)
    return metrics


def sweep_params(overrides: list[list[str]]) -> dict[str, str]:
    """The parent's params from its points' overrides: a fixed override as itself, a swept key
    as its values in sweep order (``batch`` -> ``1,2,4``), orchestration keys left out."""
    values: dict[str, list[str]] = {}
    for point in overrides:
        for item in point:
            key, sep, value = item.lstrip("+~").partition("=")
            if not sep or key.split(".")[0].split("/")[0] in ORCHESTRATION_PREFIXES:
                continue
            seen = values.setdefault(key, [])
            if value not in seen:
                seen.append(value)
    params = {k: ",".join(v)[:500] for k, v in values.items()}
    swept = sorted(k for k, v in values.items() if len(v) > 1)
    params["gx.swept_keys"] = ",".join(swept)[:500]
    return params


def bound_http_retries() -> None:
    for key, value in HTTP_BOUNDS.items():
        os.environ.setdefault(key, value)


def probe_http(uri: str) -> None:
    """One plain request, no retries: any HTTP answer means a server listens there."""
    import requests

    try:
        requests.get(uri.rstrip("/") + "/health", timeout=PROBE_TIMEOUT_S)
    except requests.RequestException as exc:
        raise StoreUnavailable(f"tracking store {uri} is unreachable ({_reason(exc)}); start the server, fix "
                               "tracking.uri (or MLFLOW_TRACKING_URI), or run with tracking.enabled=false") from None


def _reason(exc: BaseException) -> str:
    """A short why: the network cause when there is one (MLflow wraps it in a long message)."""
    text = " ".join(str(exc).split())
    for marker in ("Connection refused", "timed out", "Name or service not known", "No route to host",
                   "Connection reset", "Max retries exceeded", "database is locked", "No space left"):
        if marker in text:
            return marker.lower()
    return f"{type(exc).__name__}: {text[:160]}"


def _sqlite_path(uri: str) -> Path | None:
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


class FileLock:
    """An advisory ``flock`` on a file; the kernel drops it when the holder exits, so a driver
    killed with SIGKILL never leaves a stale lock. The holder's pid and start time are written
    into the file for the message a second process gets."""

    def __init__(self, path: Path, owner_pid: int | None = None):
        self.path = Path(path)
        self.owner_pid = owner_pid  # the pid the file names (default: this process)
        self.fd: int | None = None

    def acquire(self, *, timeout_s: float = 0.0) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        since = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        os.write(fd, json.dumps({"pid": self.owner_pid or os.getpid(), "since": since}).encode())
        self.fd = fd
        return True

    def holder(self) -> str:
        try:
            info = json.loads(self.path.read_text() or "{}")
            return f"pid {info.get('pid')}, since {info.get('since')}"
        except (OSError, ValueError):
            return "unknown process"

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def sweep_lock_path(uri: str, experiment: str, sweep_hash: str) -> Path:
    key = hashlib.sha256(f"{uri}\n{experiment}\n{sweep_hash}".encode()).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"gxnet-locks-{os.getuid()}" / f"sweep-{key}.lock"


@dataclass
class PointRecord:
    """What the driver logs for one point; kept as ``tracking.json`` in the point's job directory
    so a point the store missed can be logged later from disk alone."""
    pipeline: str
    cfg_hash: str
    name: str
    params: dict
    status: str  # FINISHED | FAILED
    error: str | None = None
    wall_s: float | None = None
    sweep_hash: str | None = None
    sweep_name: str | None = None
    swept: dict = field(default_factory=dict)  # the sweep's params (for a parent made by gx sync)
    points: int | None = None

    def write(self, out_dir: Path) -> None:
        path = Path(out_dir) / RECORD
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{RECORD}.{os.getpid()}")
        tmp.write_text(json.dumps(self.__dict__, indent=1, default=str) + "\n")
        os.replace(tmp, path)  # a reader never sees half a record

    @classmethod
    def read(cls, out_dir: Path) -> "PointRecord | None":
        try:
            data = json.loads((Path(out_dir) / RECORD).read_text())
            return cls(**{k: data.get(k) for k in cls.__dataclass_fields__ if k in data})
        except (OSError, ValueError, TypeError):
            return None


def common_dir(dirs) -> Path | None:
    """The sweep directory: the deepest folder holding every job directory."""
    parents = [str(Path(d).resolve().parent) for d in dirs]
    return Path(os.path.commonpath(parents)) if parents else None


def _run_key(run) -> tuple:
    """Which of two runs of one point stays: the earlier created (ties: the smaller id)."""
    return (run.info.start_time or 0, run.info.run_id)


def _hydra_quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def project_env(**extra: str) -> dict[str, str]:
    """This environment for a Python process of ours (``-m pipelines.…``): the project first on
    its path, whatever the driver's working directory."""
    root = str(Path(__file__).resolve().parent.parent)
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p), **extra)


def open_tracker(tracking_cfg: dict, *, direct: bool = False) -> "Tracker":
    """The Tracker a config asks for (probed: :class:`StoreUnavailable` when unreachable).
    ``direct``: a caller that uses only what :class:`~pipelines.mlflow_direct.DirectStore`
    offers (a sweep's tracking process, a single run, ``gx sync``, ``gx report``), which may then
    skip MLflow on a local SQLite store when ``tracking.sqlite_direct`` allows; replay, which
    downloads a run's artifacts through ``tracker.client``, always gets MLflow's client."""
    return Tracker(uri=tracking_cfg.get("uri") or default_uri(), experiment=tracking_cfg.get("experiment") or "gxnet",
                   report=bool(tracking_cfg.get("report", True)), sqlite_wal=bool(tracking_cfg.get("sqlite_wal", True)),
                   direct=direct and bool(tracking_cfg.get("sqlite_direct", True)))


def open_sweep_state(tracker: "Tracker", sweep_hash: str, name: str, pipeline: str, *, swept: dict,
                     n_points: int, sweep_dir: Path, hashes: set[str] | None) -> tuple:
    """What a sweep's driver reads from the store before it plans: (parent run id, the children
    by config hash, the sweep directories that ran it before, this one first). With ``hashes``
    (the points' config hashes; not for a large sweep), points an earlier run computed but could
    not log are logged from their job directories and count as children. Raises SweepLocked when
    another driver runs the sweep."""
    parent = tracker.resume_sweep(sweep_hash, name, pipeline, swept=swept, n_points=n_points, sweep_dir=sweep_dir)
    existing = tracker.children(parent)
    dirs = [Path(sweep_dir)] + [Path(d) for d in tracker.sweep_dirs(parent) if Path(d) != Path(sweep_dir)]
    if hashes is not None:  # computed earlier but never logged: log, don't recompute
        tracker.adopt_from_disk(parent, None, existing, hashes=hashes)
    return parent, existing, dirs


class SpoolingTracker:
    """What a sweep's tracker does without its store: the closing line, and spooling a point the
    store did not take (``tracking.json`` is in its job directory; the sweep directory lists it
    in ``tracking_pending.jsonl``). Shared by :class:`Tracker` and the driver's side of a tracker
    in its own process (``pipelines.tracking_process``), which spools when that process is gone."""

    uri: str
    experiment: str
    down: str | None
    unlogged: int
    sweep_dir: Path | None
    parent_id: str | None
    sweep_hash: str | None
    sweep_name: str | None
    swept: dict
    n_points: int | None

    def point_record(self, *, pipeline: str, cfg_hash: str, name: str, params: dict, error: str | None,
                     wall_s: float | None, out_dir: Path | None) -> PointRecord:
        """The point's record, written to its job directory first (when it has one)."""
        record = PointRecord(pipeline=pipeline, cfg_hash=cfg_hash, name=name, params=params,
                             status="FAILED" if error else "FINISHED", error=error, wall_s=wall_s,
                             sweep_hash=self.sweep_hash, sweep_name=self.sweep_name, swept=self.swept,
                             points=self.n_points)
        if out_dir is not None:
            record.write(out_dir)
        return record

    def spool(self, record: PointRecord, out_dir: Path | None) -> None:
        self.unlogged += 1
        if self.sweep_dir is None:
            return
        line = {"cfg_hash": record.cfg_hash, "name": record.name, "status": record.status,
                "dir": None if out_dir is None else str(out_dir)}
        with open(self.sweep_dir / PENDING, "a") as f:
            f.write(json.dumps(line) + "\n")

    def closing_line(self) -> str:
        if self.down:
            return (f"MLflow: store {self.uri} is down ({self.down}); {self.unlogged} point(s) not logged, their "
                    f"results are on disk under {self.sweep_dir} (listed in {PENDING}); upload them with: "
                    f"gx sync dir={self.sweep_dir}  (or rerun the same sweep)")
        ui = (f"open {self.uri} in a browser" if self.uri.startswith(("http://", "https://"))
              else f"mlflow ui --backend-store-uri {self.uri}")
        sweep = f", sweep run {self.parent_id}" if self.parent_id else ""
        return f"MLflow: {self.uri} (experiment {self.experiment!r}{sweep}); open the UI with: {ui}"


@dataclass
class Tracker(SpoolingTracker):
    uri: str
    experiment: str
    report: bool = True  # attach the report's table and figures to a sweep's parent run
    sqlite_wal: bool = True  # a local SQLite store logs in WAL mode (pipelines/sqlite_journal.py)
    direct: bool = False  # a local SQLite store is written without MLflow where exact (pipelines/mlflow_direct.py)
    writer: str = field(default="mlflow", init=False)  # "direct" when it is
    down: str | None = field(default=None, init=False)  # why the store stopped answering
    sweep_hash: str | None = field(default=None, init=False)
    sweep_name: str | None = field(default=None, init=False)
    sweep_dir: Path | None = field(default=None, init=False)
    swept: dict = field(default_factory=dict, init=False)
    n_points: int | None = field(default=None, init=False)
    unlogged: int = field(default=0, init=False)
    logged: int = field(default=0, init=False)  # child runs this process created
    parent_id: str | None = field(default=None, init=False)
    report_pid: int | None = field(default=None, init=False)  # the background report process
    owner_pid: int = field(default_factory=os.getpid, init=False)  # the driver the sweep's lock names

    def __post_init__(self) -> None:
        bound_http_retries()
        self._sweep_lock: FileLock | None = None
        self._known: dict[str, str] = {}  # config hash -> FINISHED child of this driver's parent run
        self._read_parent: str | None = None
        self.commit = git_commit()  # once per driver, not a git process per logged point
        if self.uri.startswith(("http://", "https://")):
            probe_http(self.uri)
        try:
            self._open_store()
        except SpecError:
            raise
        except Exception as exc:  # MLflow, SQLAlchemy, OS errors: the store cannot be used
            raise StoreUnavailable(f"tracking store {self.uri} cannot be opened ({_reason(exc)}); fix "
                                   "tracking.uri (or MLFLOW_TRACKING_URI), or run with tracking.enabled=false") from None

    def _open_store(self) -> None:
        db = _sqlite_path(self.uri)
        lock = None
        if db is not None:  # two drivers creating one new SQLite store race in its migrations
            db.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(db.with_name(db.name + ".lock"))
            if not lock.acquire(timeout_s=120.0):
                raise StoreUnavailable(f"SQLite store {db} stayed locked for 120 s by {lock.holder()}; "
                                       f"stop that process or remove {lock.path} if it is gone")
        try:
            if not (self.direct and db is not None and self._open_direct(db)):
                self._open_mlflow(db)
        finally:
            if lock is not None:
                lock.release()

    def _open_mlflow(self, db: Path | None) -> None:
        import mlflow
        import mlflow.entities

        if db is not None and self.sqlite_wal:
            from pipelines.sqlite_journal import use_wal

            use_wal(db)
        mlflow.set_tracking_uri(self.uri)
        self.client, self.entities, self.writer = self._new_client(db, mlflow.__version__), mlflow.entities, "mlflow"
        self.experiment_id = self._experiment()

    def _open_direct(self, db: Path) -> bool:
        """Open the local SQLite store ``db`` with :class:`~pipelines.mlflow_direct.DirectStore`
        when that writes what MLflow would; False leaves it to MLflow (a new store with no
        schema template yet, another schema revision, artifacts that are not local files)."""
        from pipelines import mlflow_direct, mlflow_schema

        if mlflow_schema.is_new_store(db):
            version = mlflow_schema.installed_mlflow()
            if version is None or not mlflow_schema.seed_new_store(db, mlflow_schema.template_path(version)):
                return False
        if mlflow_direct.why_not(db) is not None:
            return False
        if self.sqlite_wal:
            from pipelines.sqlite_journal import allow_wal

            allow_wal(db)
        self.client, self.entities, self.writer = mlflow_direct.DirectStore(db, wal=self.sqlite_wal), mlflow_direct, "direct"
        self.experiment_id = self._experiment()
        if mlflow_direct.local_path(self.client.get_experiment(self.experiment_id).artifact_location) is None:
            self.client.close()
            return False
        return True

    def _new_client(self, db: Path | None, mlflow_version: str):
        """The MLflow client; a new SQLite store starts from the schema template of this MLflow
        version (pipelines/mlflow_schema.py) and, made the usual way, becomes the template."""
        from mlflow.tracking import MlflowClient

        from pipelines import mlflow_schema

        if db is None or not mlflow_schema.is_new_store(db):
            return MlflowClient(tracking_uri=self.uri)
        template = mlflow_schema.template_path(mlflow_version)
        if mlflow_schema.seed_new_store(db, template):
            try:
                return MlflowClient(tracking_uri=self.uri)
            except Exception:  # noqa: BLE001 - a template MLflow refuses: made the usual way below
                mlflow_schema.drop_template(template)
                db.unlink(missing_ok=True)
        client = MlflowClient(tracking_uri=self.uri)
        mlflow_schema.keep_template(db, template)
        return client

    def _experiment(self) -> str:
        exp = self.client.get_experiment_by_name(self.experiment)
        if exp is None:
            try:
                return self.client.create_experiment(self.experiment, tags=dict([EXPERIMENT_KIND]))
            except Exception:  # created meanwhile by another driver on a shared server
                exp = self.client.get_experiment_by_name(self.experiment)
                if exp is None:
                    raise
        if exp.lifecycle_stage == "deleted":
            self.client.restore_experiment(exp.experiment_id)
        if exp.tags.get(EXPERIMENT_KIND[0]) is None:
            self.client.set_experiment_tag(exp.experiment_id, *EXPERIMENT_KIND)
        return exp.experiment_id

    # -- store failures -----------------------------------------------------------------
    def _guard(self, doing: str, fn: Callable[[], Any], default: Any = None) -> Any:
        """Run a store call; a failure marks the store down (said once) instead of raising."""
        if self.down:
            return default
        try:
            return fn()
        except Exception as exc:
            if self.down:  # a nested call has already said so
                return default
            self.down = _reason(exc)
            where = f"; results stay on disk under {self.sweep_dir}" if self.sweep_dir else ""
            print(f"warning: tracking store {self.uri} failed while {doing} ({self.down}); going on without it"
                  f"{where}; rerun the same sweep or run `gx sync` to upload what is missing", file=sys.stderr)
            return default

    # -- parent -------------------------------------------------------------------------
    def open_sweep(self, sweep_hash: str, name: str, pipeline: str, points: list) -> str | None:
        """Lock the sweep (:class:`SweepLocked` if another driver runs it) and open its parent
        run: reused by a rerun, given the sweep's params when new. None if the store failed."""
        return self.resume_sweep(sweep_hash, name, pipeline, swept=sweep_params([p.overrides for p in points]),
                                 n_points=len(points), sweep_dir=common_dir(p.out_dir for p in points))

    def resume_sweep(self, sweep_hash: str, name: str, pipeline: str, *, swept: dict, n_points: int | None,
                     sweep_dir: Path | None) -> str | None:
        self._lock_sweep(sweep_hash, name)
        self.sweep_hash, self.sweep_name, self.swept, self.n_points = sweep_hash, name, swept, n_points
        self.sweep_dir = sweep_dir
        self.parent_id = self._guard("opening the sweep's parent run", lambda: self._parent(pipeline))
        return self.parent_id

    def _lock_sweep(self, sweep_hash: str, name: str) -> None:
        lock = FileLock(sweep_lock_path(self.uri, self.experiment, sweep_hash), owner_pid=self.owner_pid)
        if not lock.acquire():
            raise SweepLocked(f"sweep {name!r} ({sweep_hash}) is already running against {self.uri} "
                              f"({lock.holder()}); wait for that driver to finish or stop it")
        self._sweep_lock = lock  # held until this process exits (or close())

    def close(self) -> None:
        if self.writer == "direct":
            self.client.close()
        db = _sqlite_path(self.uri)
        if db is not None and self.sqlite_wal:
            from pipelines.sqlite_journal import checkpoint

            checkpoint(db)
        if self._sweep_lock is not None:
            self._sweep_lock.release()
            self._sweep_lock = None

    def _sweep_parents(self) -> list:
        runs = self.client.search_runs([self.experiment_id], filter_string=f"tags.`{TAG_SWEEP}` = '{self.sweep_hash}'",
                                       max_results=1000)
        return sorted(runs, key=_run_key)

    def _parent(self, pipeline: str) -> str:
        Param, RunTag = self.entities.Param, self.entities.RunTag
        found = self._sweep_parents()
        if not found:
            mine = self.client.create_run(self.experiment_id, run_name=self.sweep_name,
                                          tags={TAG_SWEEP: self.sweep_hash, TAG_PIPELINE: pipeline})
            found = self._sweep_parents()
            for extra in found[1:]:  # two drivers created one at once: the earliest stays
                if extra.info.run_id == mine.info.run_id:
                    self.client.delete_run(extra.info.run_id)
        parent = found[0]
        pid = parent.info.run_id
        dirs = json.loads(parent.data.tags.get(TAG_SWEEP_DIRS, "[]"))
        if self.sweep_dir is not None and str(self.sweep_dir) not in dirs:
            dirs = (dirs + [str(self.sweep_dir)])[-20:]
        runs = int(parent.data.tags.get(TAG_DRIVER_RUNS, "0")) + 1
        tags = {TAG_SWEEP_DIRS: json.dumps(dirs), TAG_DRIVER_RUNS: str(runs), "gx.git_commit": self.commit}
        if self.n_points is not None:
            tags[TAG_POINTS] = str(self.n_points)
        params = [] if parent.data.params else [Param(k, v) for k, v in sorted(self.swept.items()) if v != ""]
        self.client.log_batch(pid, params=params, tags=[RunTag(k, v) for k, v in tags.items()])
        self.client.update_run(pid, status="RUNNING")
        return pid

    def finish_parent(self, parent_id: str | None, summary: dict[str, int] | None) -> None:
        """Counts over all of the sweep's children (a rerun adds to them, never overwrites them
        with its own), this run's counts as ``run.*``, the report attached, status FINISHED."""
        if not parent_id or self.down:
            return
        self._guard("finishing the sweep's parent run", lambda: self._finish(parent_id, summary or {}))
        if self.report and not self.down and (self.logged or not self._has_report(parent_id)):
            self.attach_report(parent_id)

    def sweep_dirs(self, parent_id: str | None) -> list[str]:
        """The sweep directories that ran this sweep before (the parent's tag)."""
        if not parent_id:
            return []
        return self._guard("reading the sweep's parent run", lambda: json.loads(
            self.client.get_run(parent_id).data.tags.get(TAG_SWEEP_DIRS, "[]")), [])

    def log_table(self, parent_id: str | None, path: Path, n_points: int) -> None:
        """A large sweep's results (every point once) as one artifact of its parent run."""
        if not parent_id:
            return
        self._guard("attaching the sweep's results table", lambda: (
            self.client.log_artifact(parent_id, str(path)),
            self.client.set_tag(parent_id, "gx.results_table", f"{Path(path).name} ({n_points} points)")))

    def _has_report(self, parent_id: str) -> bool:
        """Whether the parent already carries a report (a rerun that logged nothing keeps it)."""
        files = self._guard("listing the parent's artifacts", lambda: self.client.list_artifacts(parent_id, "report"), [])
        return any(f.path.endswith("report.md") for f in files)

    def _finish(self, parent_id: str, summary: dict[str, int]) -> None:
        Metric = self.entities.Metric
        groups = self._children(parent_id)
        done = sum(any(r.info.status == "FINISHED" for r in runs) for runs in groups.values())
        failed = sum(all(r.info.status != "FINISHED" for r in runs) and any(r.info.status == "FAILED" for r in runs)
                     for runs in groups.values())
        parent = self.client.get_run(parent_id)
        step = int(parent.data.tags.get(TAG_DRIVER_RUNS, "1"))
        n_points = int(parent.data.tags.get(TAG_POINTS, self.n_points or len(groups)))
        now = int(time.time() * 1000)
        counts = {"sweep.points": n_points, "sweep.done": done, "sweep.failed": failed,
                  "sweep.missing": max(0, n_points - done - failed)}
        counts.update({f"run.{k}": v for k, v in summary.items()})
        self.client.log_batch(parent_id, metrics=[Metric(k, float(v), now, step) for k, v in counts.items()])
        self.client.set_terminated(parent_id, "FINISHED")

    def attach_report(self, parent_id: str) -> None:
        """The report pipeline (``gx report sweep=<id> attach=true``) renders the sweep's table and
        figures from the store and logs them on the parent run; run as its own process, so a
        plotting failure can never touch the sweep. Files also land in ``<sweep dir>/report``.

        The process is started and not waited for: every point is in the store and on disk by
        now, and rendering a sweep's figures in a fresh interpreter takes longer than most of
        its points (tens of seconds on a loaded 2-core host). Its output goes to
        ``report/attach.log``; ``report/report.md`` appears when it is done."""
        out = (self.sweep_dir or Path.cwd()) / "report"
        env = project_env(MLFLOW_TRACKING_URI=self.uri, GX_TRACKING="true")
        cmd = [sys.executable, "-m", "pipelines.report", f"sweep={parent_id}", "attach=true",
               f"tracking.experiment={_hydra_quote(self.experiment)}", f"hydra.run.dir={_hydra_quote(str(out))}"]
        try:
            out.mkdir(parents=True, exist_ok=True)
            with open(out / "attach.log", "w") as log:  # the driver's cwd: a relative store URI means the same
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env=env, start_new_session=True)
        except OSError as exc:
            print(f"warning: the sweep's report was not attached to its parent run ({_reason(exc)}); "
                  f"make it with: gx report sweep={parent_id}", file=sys.stderr)
            return
        self.report_pid = proc.pid
        print(f"MLflow: attaching the sweep's report to its parent run in the background (pid {proc.pid}; "
              f"it writes {out / 'report.md'}; log {out / 'attach.log'})", file=sys.stderr)

    # -- children -----------------------------------------------------------------------
    def children(self, parent_id: str | None) -> dict[str, list]:
        """Child runs of a parent by config hash (duplicates of a point removed from the store)."""
        if not parent_id:
            return {}
        return self._guard("reading the sweep's child runs", lambda: self._children(parent_id), {})

    def _children(self, parent_id: str) -> dict[str, list]:
        runs = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{TAG_PARENT}` = '{parent_id}'", max_results=50000
        )
        by_hash: dict[str, list] = {}
        for r in runs:
            by_hash.setdefault(r.data.tags.get(TAG_HASH, ""), []).append(r)
        for h, group in by_hash.items():
            finished = sorted((r for r in group if r.info.status == "FINISHED"), key=_run_key)
            for extra in finished[1:]:  # a point is logged once: the earliest FINISHED child stays
                self.client.delete_run(extra.info.run_id)
                group.remove(extra)
            if finished and parent_id == self.parent_id:
                self._known[h] = finished[0].info.run_id
        if parent_id == self.parent_id:
            self._read_parent = parent_id  # every earlier child of this parent is in _known
        return by_hash

    def finished_hashes(self, parent_id: str) -> set[str]:
        return {h for h, runs in self.children(parent_id).items() if any(r.info.status == "FINISHED" for r in runs)}

    def remove_children_except(self, parent_id: str | None, keep: set[str]) -> None:
        """Delete the parent's child runs whose config hash is not in ``keep``."""
        def remove() -> None:
            for h, runs in self._children(parent_id).items():
                if h not in keep:
                    for r in runs:
                        self.client.delete_run(r.info.run_id)
                    self._known.pop(h, None)

        if parent_id:
            self._guard("removing child runs outside the top k", remove)

    def remove_unfinished(self, runs: list | None) -> None:
        def remove() -> None:
            for old in runs or []:
                if old.info.status != "FINISHED":
                    self.client.delete_run(old.info.run_id)

        self._guard("removing stale child runs", remove)

    def single_run_logged(self, cfg_hash: str) -> bool:
        """Whether a FINISHED top-level (non-sweep) run of this config hash is in the store."""
        runs = self._guard("searching runs", lambda: self.client.search_runs(
            [self.experiment_id], max_results=100,
            filter_string=f"tags.`{TAG_HASH}` = '{cfg_hash}' and attributes.status = 'FINISHED'"), [])
        return any(TAG_PARENT not in r.data.tags for r in runs)

    def _finished_child(self, parent_id: str, cfg_hash: str) -> list:
        runs = self.client.search_runs(
            [self.experiment_id], max_results=100,
            filter_string=f"tags.`{TAG_PARENT}` = '{parent_id}' and tags.`{TAG_HASH}` = '{cfg_hash}' "
                          "and attributes.status = 'FINISHED'")
        return sorted(runs, key=_run_key)

    def log_point(self, parent_id: str | None, *, pipeline: str, cfg_hash: str, name: str, params: dict,
                  results: dict | None, artifact_dir: Path | None = None, error: str | None = None,
                  stale: list | None = None, out_dir: Path | None = None, wall_s: float | None = None) -> str | None:
        """Log one point as a child run, at most once per config hash under a parent; removes
        older unfinished runs of the same point. ``out_dir``: the point's job directory, which
        gets ``tracking.json`` first, so a point the store missed can be logged from disk later.
        Returns the child's run id, or None when the store is down (the point is spooled)."""
        record = self.point_record(pipeline=pipeline, cfg_hash=cfg_hash, name=name, params=params, error=error,
                                   wall_s=wall_s, out_dir=out_dir)
        run_id = self._guard(f"logging point {name!r}",
                             lambda: self._log(parent_id, record, results, artifact_dir, stale))
        if run_id is None:
            self.spool(record, out_dir)
        return run_id

    def _log(self, parent_id: str | None, record: PointRecord, results: dict | None, artifact_dir: Path | None,
             stale: list | None) -> str:
        Metric, Param = self.entities.Metric, self.entities.Param
        # holding the sweep's lock on a local SQLite store, no other driver logs its children (the
        # lock is per host: a server shared by hosts is still searched): the children were read at
        # the start and this driver's own are remembered, so the store is not searched per point
        exclusive = (self._sweep_lock is not None and parent_id == self.parent_id == self._read_parent
                     and _sqlite_path(self.uri) is not None)
        if exclusive and record.cfg_hash in self._known:  # logged already by this driver or a run before
            self.remove_unfinished(stale)
            return self._known[record.cfg_hash]
        if parent_id and not exclusive:
            done = self._finished_child(parent_id, record.cfg_hash)
            if done:  # logged already (a rerun, gx sync, or another driver): never twice
                self.remove_unfinished(stale)
                return done[0].info.run_id
        tags = {TAG_HASH: record.cfg_hash, TAG_PIPELINE: record.pipeline, "gx.git_commit": self.commit}
        if parent_id:
            tags[TAG_PARENT] = parent_id
        if record.error:
            tags["gx.error"] = record.error[:4900]
        rid = self.client.create_run(self.experiment_id, run_name=record.name, tags=tags).info.run_id
        self.logged += 1
        metrics = numeric_metrics(results or {})
        metrics.update(measured_metrics(record.wall_s, artifact_dir))
        self.client.log_batch(
            rid,
            params=[Param(k, v) for k, v in sorted(param_values(record.params).items())],
            metrics=[Metric(k, v, 0, 0) for k, v in sorted(metrics.items())],
        )
        if artifact_dir is not None and Path(artifact_dir).is_dir():
            self.client.log_artifacts(rid, str(artifact_dir))
        self.client.set_terminated(rid, record.status)
        if exclusive and record.status == "FINISHED":
            self._known[record.cfg_hash] = rid
        self.remove_unfinished(stale)
        if parent_id and record.status == "FINISHED" and not exclusive:  # logged: the rest is best effort
            return self._guard("checking the point for duplicates",
                               lambda: self._keep_earliest(parent_id, record.cfg_hash), None) or rid
        return rid

    def _keep_earliest(self, parent_id: str, cfg_hash: str) -> str | None:
        """Another driver may have logged the same point meanwhile: the earliest child stays."""
        keep = self._finished_child(parent_id, cfg_hash)
        for extra in keep[1:]:
            self.client.delete_run(extra.info.run_id)
        return keep[0].info.run_id if keep else None

    # -- from disk ----------------------------------------------------------------------
    def log_from_disk(self, parent_id: str | None, job_dir: Path, stale: list | None = None) -> str | None:
        """Log a point from its job directory (``tracking.json`` + ``results.json``)."""
        rec = PointRecord.read(job_dir)
        if rec is None:
            return None
        results = None
        if rec.status == "FINISHED":
            try:
                results = json.loads((Path(job_dir) / "results.json").read_text())
            except (OSError, ValueError):
                return None  # killed before its results were complete: the point runs again
        return self.log_point(parent_id, pipeline=rec.pipeline, cfg_hash=rec.cfg_hash, name=rec.name,
                              params=rec.params, results=results, error=rec.error, stale=stale,
                              artifact_dir=Path(job_dir) if results is not None else None, wall_s=rec.wall_s)

    def adopt_from_disk(self, parent_id: str | None, points, existing: dict[str, list],
                        hashes: set[str] | None = None) -> int:
        """Points of this sweep that an earlier driver computed but could not log (the store was
        down): log them from their job directories instead of computing them again. Updates
        ``existing`` so the caller skips them; returns how many were adopted. ``hashes``: the
        points' config hashes, when ``points`` is not a list of ready points."""
        if hashes is None:
            hashes = {p.cfg_hash for p in points}
        missing = {h for h in hashes if not any(r.info.status == "FINISHED" for r in existing.get(h, []))}
        if not missing or not parent_id or self.down:
            return 0
        dirs = self._guard("reading the sweep's parent run", lambda: json.loads(
            self.client.get_run(parent_id).data.tags.get(TAG_SWEEP_DIRS, "[]")), [])
        adopted = 0
        for cfg_hash, job_dir in records_on_disk(dirs, missing).items():
            run_id = self.log_from_disk(parent_id, job_dir, stale=existing.get(cfg_hash))
            if run_id is None:
                continue
            run = self._guard("reading an adopted run", lambda: self.client.get_run(run_id))
            if run is not None and run.info.status == "FINISHED":
                existing[cfg_hash] = [run]
                adopted += 1
        if adopted:
            print(f"tracking: logged {adopted} point(s) an earlier run computed but could not log "
                  "(from their job directories); they are not computed again", file=sys.stderr)
        return adopted


def records_on_disk(dirs, wanted: set[str] | None = None) -> dict[str, Path]:
    """Job directories under ``dirs`` holding a FINISHED ``tracking.json`` and a ``results.json``,
    by config hash (limited to ``wanted`` hashes when given)."""
    found: dict[str, Path] = {}
    for root in dirs:
        if not Path(root).is_dir():
            continue
        for path in sorted(Path(root).rglob(RECORD)):
            rec = PointRecord.read(path.parent)
            if rec is None or rec.status != "FINISHED" or not (path.parent / "results.json").is_file():
                continue
            if wanted is None or rec.cfg_hash in wanted:
                found.setdefault(rec.cfg_hash, path.parent)
    return found


def measured_metrics(wall_s: float | None, job_dir: Path | None) -> dict[str, float]:
    """Measured (not modelled) figures of a point, under ``timing.``: the driver's compute wall
    time of the point and the numbers of ``timings.json`` when the pipeline wrote one."""
    out: dict[str, float] = {}
    if wall_s is not None:
        out["timing.wall_s"] = float(wall_s)
    if job_dir is not None:
        try:
            timings = json.loads((Path(job_dir) / "timings.json").read_text())
        except (OSError, ValueError):
            timings = {}
        out.update({f"timing.{k}": v for k, v in numeric_metrics(timings).items()})
    return out


class TrackingWriter:
    """Logs a sweep's points from a background thread, off the driver's critical path.

    ``put`` queues a point's :meth:`Tracker.log_point` arguments and returns at once; the
    thread takes what has queued up (up to ``batch`` points) and logs it, then calls
    ``on_logged(item, run_id)`` for each (the sweep appends the point's table row there, so the
    table never lists a point the store could still miss). A store failure marks the tracker
    down (said once) and spools the rest, as before; nothing here raises into the sweep.
    ``close`` drains the queue: every queued point is logged (or spooled) exactly once.
    """

    def __init__(self, tracker: "Tracker", on_logged: Callable[[dict, str | None], None] | None = None,
                 batch: int = 64):
        import queue
        import threading

        self.tracker, self.on_logged, self.batch = tracker, on_logged, batch
        self.queue: "queue.Queue" = queue.Queue()
        self.logged = 0
        self.thread = threading.Thread(target=self._run, name="gx-tracking-writer", daemon=True)
        self.thread.start()

    def put(self, item: dict) -> None:
        self.queue.put(item)

    def pending(self) -> int:
        return self.queue.qsize()

    def _run(self) -> None:
        import queue

        stop = False
        while not stop:
            items = [self.queue.get()]
            while len(items) < self.batch:
                try:
                    items.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            for item in items:
                if item is None:
                    stop = True
                    continue
                self._log(item)

    def _log(self, item: dict) -> None:
        kwargs = {k: v for k, v in item.items() if not k.startswith("_")}
        try:
            run_id = self.tracker.log_point(**kwargs)
        except Exception as exc:  # log_point guards the store; this is the last line of defence
            self.tracker.down = self.tracker.down or _reason(exc)
            run_id = None
        self.logged += 1
        if self.on_logged is not None:
            try:
                self.on_logged(item, run_id)
            except Exception as exc:
                print(f"warning: recording point {item.get('name')!r} failed ({_reason(exc)})", file=sys.stderr)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()
