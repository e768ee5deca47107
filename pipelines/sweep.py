"""Sweep execution on Ray with MLflow logging from the driver.

Hydra's ``-m`` multirun hands the composed points to the ``gx_ray`` launcher
(``hydra_plugins/gx_ray_launcher``), which calls :func:`run_sweep`. Points run as Ray tasks
of whole colocated units (:func:`colocated_units`, sharing a process's caches) sized from the
points' observed run time (:class:`BatchSizer`, keeping Ray's per-task cost small next to
millisecond-scale evaluations), each streaming its points back in chunks of about
``STREAM_CHUNK_S`` of work; the driver collects them with ``ray.wait``, shows progress,
writes each point's files (and Hydra's ``.hydra/``) into its job directory and logs it to
MLflow at once, so a killed driver loses only the points in flight. A point that raises or
runs over ``sweep.point_timeout`` is recorded as failed with its reason and the sweep goes on.
SIGINT/SIGTERM stop the sweep cleanly (points in flight cancelled and recorded, summary
printed); a lost Ray head (``pipelines.ray_cluster``) does the same. A rerun skips the points
that have a FINISHED run. Ray cluster choice: ``pipelines/ray_cluster.py``; docs: docs/sweeps.md.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.ray_cluster import lean_serialization, lean_serialization_in_worker
from pipelines.tracking import TrackingWriter

# a Ray worker imports this module to load the sweep's task (run_points), before it decodes the
# task's arguments: leave out Ray's serialization add-ons there (ray_cluster.lean_serialization)
lean_serialization_in_worker()

# config keys that say how a point runs, not what it computes: not part of a point's identity
ORCHESTRATION_KEYS = ("hydra", "ray", "tracking", "sweep")
# the columns of the final table; other pipelines show their first numeric results
MAIN_METRICS = {
    "decode": ("interactivity_tok_s_user", "throughput_tok_s", "tokens_per_s_per_MW", "decode_step_s"),
    "search": ("best.interactivity_tok_s_user", "best.throughput_tok_s", "best.tokens_per_s_per_MW", "feasible"),
    "alltoallv": ("completion_s", "algbw_Bps", "busbw_Bps"),
    "plan": ("total_time_s", "host_degree", "ports_used"),
}
TABLE_ROWS = 200


@dataclass
class SweepPoint:
    index: int
    overrides: list[str]
    cfg: dict  # resolved config without hydra
    out_dir: Path
    cfg_hash: str = ""
    name: str = ""
    job_cfg: Any = None  # the composed DictConfig (with hydra), for the job's .hydra/ folder


@dataclass
class SweepSummary:
    done: int = 0
    failed: int = 0
    skipped: int = 0
    cancelled: int = 0
    not_run: int = 0
    errors: dict[int, str] = field(default_factory=dict)
    wall_s: float = 0.0
    timeline: list[dict] = field(default_factory=list)  # one row per point run: worker, start, wall
    signal: int | None = None  # SIGINT/SIGTERM that stopped the sweep
    head_lost: str | None = None  # the Ray head went away mid-sweep
    parent_run_id: str | None = None

    def as_dict(self) -> dict[str, int]:
        return {"done": self.done, "failed": self.failed, "skipped": self.skipped, "cancelled": self.cancelled,
                "not_run": self.not_run}

    @property
    def exit_code(self) -> int:
        """0 all points finished; 1 a point failed or the Ray head was lost; 128+N stopped by signal N."""
        if self.signal is not None:
            return 128 + self.signal
        return 1 if (self.failed or self.head_lost or self.cancelled or self.not_run) else 0


def point_config(cfg: dict) -> dict:
    return {k: v for k, v in cfg.items() if k not in ORCHESTRATION_KEYS}


def point_timeout_s(sweep_cfg: dict | None) -> float | None:
    """``sweep.point_timeout`` in seconds (None: no limit); SpecError when not a positive time."""
    from collectives.errors import SpecError
    from pipelines.units import parse_time

    value = (sweep_cfg or {}).get("point_timeout")
    if value is None:
        return None
    seconds = parse_time(value, "sweep.point_timeout")
    if not math.isfinite(seconds) or seconds <= 0:
        raise SpecError(f"sweep.point_timeout={value!r} must be a positive, finite time (e.g. 600s) or null "
                        f"for no limit")
    return seconds


SWEEP_KEYS = ("point_timeout", "job_dirs")


def check_sweep_keys(sweep_cfg: dict) -> None:
    """The ``sweep`` block of a pipeline's config (a plain block, not a config group: ``gx report
    sweep=<run id>`` keeps its meaning)."""
    from collectives.errors import SpecError

    for key in sweep_cfg:
        if key not in SWEEP_KEYS:
            raise SpecError(f"sweep.{key} is not a sweep setting; the sweep block has {', '.join(SWEEP_KEYS)}")
    point_timeout_s(sweep_cfg)
    job_dirs = sweep_cfg.get("job_dirs", "auto")
    if job_dirs not in (None, "auto", True, False):
        raise SpecError(f"sweep.job_dirs={job_dirs!r} must be auto (a job folder per point up to "
                        f"{JOB_DIRS_AUTO_MAX} points), true or false")


class PointTimeout(BaseException):
    """Raised in a point's process when it runs over sweep.point_timeout (BaseException: a
    pipeline's own ``except Exception`` must not swallow it)."""


class SweepStopped(BaseException):
    """Raised in the driver's point (in-process sweeps) when SIGINT/SIGTERM stops the sweep."""


@contextlib.contextmanager
def deadline(timeout_s: float | None):
    """SIGALRM after ``timeout_s`` raises PointTimeout in the running point (main thread only;
    elsewhere the driver's own deadline, which kills the worker, is the limit)."""
    if not timeout_s or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise PointTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def timeout_error(timeout_s: float) -> str:
    return f"timed out: ran over sweep.point_timeout={timeout_s:g}s"


def run_points(pipeline: str, cfgs: list[dict], timeout_s: float | None = None,
               artifacts: bool = True) -> list[dict]:
    """Worker side: run the pipeline's pure task on each config (no files, no MLflow).
    ``artifacts=False``: drop the points' artifacts here (a sweep without job folders)."""
    return list(_point_outcomes(pipeline, cfgs, timeout_s, artifacts))


# a Ray task sends its finished points to the driver once they ran this long (and the rest at its
# end): a unit of long points (a fabric's search cells in one process) is recorded, logged and
# counted point by point, so a killed driver loses only the work in flight, while a task of
# millisecond points still returns in one message
STREAM_CHUNK_S = 0.5


def stream_points(pipeline: str, cfgs: list[dict], timeout_s: float | None = None,
                  artifacts: bool = True, chunk_s: float = STREAM_CHUNK_S):
    """Worker side, as a Ray streaming task: ``run_points``'s outcomes in chunks, each sent as soon
    as its points ran for ``chunk_s`` seconds, the last one at the end."""
    chunk, since = [], time.perf_counter()
    for outcome in _point_outcomes(pipeline, cfgs, timeout_s, artifacts):
        chunk.append(outcome)
        if time.perf_counter() - since >= chunk_s:
            yield chunk
            chunk, since = [], time.perf_counter()
    if chunk:
        yield chunk


def _point_outcomes(pipeline: str, cfgs: list[dict], timeout_s: float | None, artifacts: bool):
    from collectives.errors import SpecError
    from pipelines.collector import pace_collector

    pace_collector()  # a worker's memo tables grow for the whole sweep (pipelines/collector.py)
    # a dotted name is a module of its own (a test pipeline); the others live in pipelines/
    module = importlib.import_module(pipeline if "." in pipeline else f"pipelines.{pipeline}")
    task = module.main.task
    worker = _worker_name()
    configs = _REUSED.setdefault(pipeline, ReusedConfig())  # the next task of this process goes on from it
    for cfg in cfgs:
        t0, started = time.perf_counter(), time.time()
        try:
            with deadline(timeout_s):
                outcome = configs.run(task, cfg)
            results, extra = outcome if isinstance(outcome, tuple) else (outcome, None)
            out = {"ok": True, "results": results, "artifacts": (extra or {}) if artifacts else {},
                   "wall_s": time.perf_counter() - t0}
        except PointTimeout:
            out = {"ok": False, "error": timeout_error(timeout_s or 0.0), "wall_s": time.perf_counter() - t0}
        except SpecError as exc:
            out = {"ok": False, "error": f"invalid point: {exc}", "wall_s": time.perf_counter() - t0}
        except Exception as exc:  # a failing point must not stop the sweep
            out = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                   "traceback": traceback.format_exc(), "wall_s": time.perf_counter() - t0}
        out.update(worker=worker, started=started)
        yield out


_REUSED: dict[str, "ReusedConfig"] = {}


def _worker_name() -> str:
    """host:pid, and the Ray node when there is one (two nodes can share a host)."""
    name = f"{os.uname().nodename}:{os.getpid()}"
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        with contextlib.suppress(Exception):
            name += f"@{ray.get_runtime_context().get_node_id()[:8]}"
    return name


class ReusedConfig:
    """The DictConfig a task reads, made once per task batch: consecutive points of a sweep
    differ in a few leaves, so those are set on the previous point's config (OmegaConf builds a
    config in ~5 ms, longer than a cheap point). The config is read-only while the task runs;
    a task that writes to it, or a point whose keys differ, gets a fresh one."""

    def __init__(self) -> None:
        self.cfg = None
        self.plain: dict | None = None

    def run(self, task, plain: dict):
        from omegaconf import OmegaConf, read_write
        from omegaconf.errors import ReadonlyConfigError

        changes = None if self.plain is None else _leaf_changes(self.plain, plain)
        if changes is None:
            self.cfg = OmegaConf.create(plain, flags={"readonly": True})
        else:
            with read_write(self.cfg):
                for key, value in changes:
                    OmegaConf.update(self.cfg, key, value, merge=False)
        self.plain = plain
        try:
            return _plain_results(task(self.cfg))
        except ReadonlyConfigError:  # the task writes to its config: a fresh, writable one
            self.plain = None
            return _plain_results(task(OmegaConf.create(plain)))


def _leaf_changes(old: dict, new: dict, prefix: str = "") -> list | None:
    """(dotted key, value) of the leaves that differ; None when the key sets differ."""
    if old.keys() != new.keys():
        return None
    out: list = []
    for k, v in new.items():
        if not isinstance(k, str) or "." in k:
            return None
        w = old[k]
        if isinstance(v, dict) and isinstance(w, dict):
            sub = _leaf_changes(w, v, f"{prefix}{k}.")
            if sub is None:
                return None
            out.extend(sub)
        elif isinstance(v, dict) or isinstance(w, dict):
            return None
        elif v != w or type(v) is not type(w):
            out.append((f"{prefix}{k}", v))
    return out


def _plain_results(outcome):
    """A task's results may hold nodes of its config, which the next point changes: plain copies."""
    from omegaconf import Container, OmegaConf

    def plainify(x):
        if isinstance(x, Container):
            return OmegaConf.to_container(x, resolve=True)
        if isinstance(x, dict):
            return {k: plainify(v) for k, v in x.items()}
        if isinstance(x, list):
            return [plainify(v) for v in x]
        return x

    if isinstance(outcome, tuple):
        return (plainify(outcome[0]), *outcome[1:])
    return plainify(outcome)


def _dotted(cfg: dict, key: str):
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def colocated_units(points: list, colocate: list[str] | tuple = ()) -> list[list]:
    """Points that differ only in the ``colocate`` keys form one unit, run by one task in one
    process, so they share that process's caches (e.g. ``ray.colocate=[context]`` in a search:
    the 32K and 5M cells of a fabric and batch need the same OCS plans and schedules). Units keep
    the sweep's order (first appearance); without keys every point is its own unit."""
    if not colocate:
        return [[p] for p in points]
    import json

    units: dict[str, list] = {}
    for p in points:
        rest = json.loads(json.dumps(p.cfg, default=str))
        for key in colocate:  # drop each colocated key from the identity of the point
            parent, _, leaf = key.rpartition(".")
            node = _dotted(rest, parent) if parent else rest
            if isinstance(node, dict):
                node.pop(leaf, None)
        units.setdefault(json.dumps(rest, sort_keys=True), []).append(p)
    return list(units.values())


def affine_units(units: list[list], colocate, affinity, n_workers: int) -> list[list]:
    """Colocated units (lists of points) that differ only in the ``affinity`` keys, merged while
    the sweep keeps at least ``n_workers`` tasks: each affinity group (e.g. the cells of one
    fabric, any batch: they plan different OCS requests but share the planner's tables of
    topology facts, which a process builds once) is cut into ``ceil(n_workers / groups)`` runs of
    consecutive units, so on few workers a group runs in one process and on many the units stay
    apart (as without affinity). Units keep the sweep's order within a group; groups come in
    order of first appearance."""
    if not affinity or not units or n_workers < 1:
        return units
    unit_of = {id(u[0]): u for u in units}
    groups = [[unit_of[id(p)] for p in g] for g in colocated_units([u[0] for u in units], [*colocate, *affinity])]
    pieces = -(-n_workers // len(groups))  # ceil
    out = []
    for g in groups:
        n = min(pieces, len(g))
        bounds = [-(-k * len(g) // n) for k in range(n + 1)]  # earlier runs take the extra unit
        out.extend([p for u in g[a:b] for p in u] for a, b in zip(bounds, bounds[1:]))
    return out


class BatchSizer:
    """Points per Ray task. An int is fixed. "auto" adapts to the points' observed run time:
    the first tasks carry one unit each; after that a task carries about ``target_task_s`` of
    work (so Ray's few-ms per-task cost stays under ~1 % on millisecond points) but never more
    than a 1/(2 x workers) share of what is left, so the tail still spreads over every worker."""

    def __init__(self, batch_size: int | str | None, n_workers: int, target_task_s: float = 0.5):
        self.fixed = self.parse(batch_size)
        self.n_workers, self.target_task_s = max(1, n_workers), target_task_s
        self.points = 0
        self.wall_s = 0.0

    @staticmethod
    def parse(batch_size) -> int | None:
        """None for "auto", else the fixed number of points per task; SpecError otherwise."""
        from collectives.errors import SpecError

        if batch_size in (None, "auto"):
            return None
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise SpecError(f"ray.batch_size={batch_size!r} must be auto or a positive integer "
                            "(points per Ray task)")
        return batch_size

    def observe(self, outcomes: list[dict]) -> None:
        self.points += len(outcomes)
        self.wall_s += sum(o.get("wall_s", 0.0) for o in outcomes)

    def size(self, remaining: int) -> int:
        if self.fixed is not None:
            return self.fixed
        if not self.points:
            return 1
        per_point = max(self.wall_s / self.points, 1e-6)
        want = math.ceil(self.target_task_s / per_point)
        return max(1, min(64, want, math.ceil(remaining / (2 * self.n_workers))))


def _duration(seconds: float) -> str:
    if seconds < 100:
        return f"{seconds:.0f} s"
    if seconds < 6000:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """``done 3 · failed 0 · skipped 0 · ETA 12 s``: redrawn in place on a terminal; elsewhere
    (logs, CI) a plain line per update, at most one every ``every_s`` (and always the last)."""

    def __init__(self, total: int, todo: int, stream=None, every_s: float = 5.0, show_rate: bool = False):
        self.stream = stream if stream is not None else sys.stderr
        self.show_rate = show_rate  # large sweeps: points/s after the ETA
        self.total, self.todo, self.every_s = total, todo, every_s
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self.shown_at: float | None = None
        self.open_line = False
        self.last_text = ""
        try:
            "·".encode(getattr(self.stream, "encoding", None) or "ascii")
            self.sep = " · "
        except (UnicodeEncodeError, LookupError):
            self.sep = " | "

    def line(self, s: SweepSummary) -> str:
        ran = s.done + s.failed + s.cancelled
        left = max(0, self.todo - ran)
        if not left:
            eta = "0 s"
        elif ran:
            eta = _duration((time.monotonic() - self.t0) / ran * left)
        else:
            eta = "?"
        parts = [f"done {s.done}", f"failed {s.failed}", f"skipped {s.skipped}"]
        if s.cancelled:
            parts.append(f"cancelled {s.cancelled}")
        parts.append(f"ETA {eta}")
        elapsed = time.monotonic() - self.t0
        if self.show_rate and ran and elapsed > 0:
            parts.append(f"{ran / elapsed:,.1f} points/s")
        return self.sep.join(parts)

    def update(self, s: SweepSummary, final: bool = False) -> None:
        now = time.monotonic()
        min_gap = 0.1 if self.tty else self.every_s
        if not final and self.shown_at is not None and now - self.shown_at < min_gap:
            return
        self.shown_at = now
        if self.tty:
            n = s.done + s.failed + s.skipped + s.cancelled
            filled = int(24 * n / max(1, self.total))
            self.stream.write(f"\r\x1b[K[{'#' * filled}{'.' * (24 - filled)}] {n}/{self.total} {self.line(s)}")
            self.open_line = not final
            if final:
                self.stream.write("\n")
        else:
            text = self.line(s)
            if final and text == self.last_text:
                return
            self.stream.write(text + "\n")
            self.last_text = text
        self.stream.flush()

    def close_line(self) -> None:
        """End a half-drawn terminal line before other output."""
        if self.tty and self.open_line:
            self.stream.write("\n")
            self.stream.flush()
            self.open_line = False


class StopSignals:
    """SIGINT/SIGTERM during a sweep: the first asks for a clean stop (the driver cancels what
    is in flight, records it, prints the summary); a second one exits at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.in_point = False  # an in-process point is running: interrupt it
        self.previous: dict = {}

    def install(self) -> None:
        """(Re)install: ray.init sets its own SIGTERM handler."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in self.SIGNALS:
            old = signal.signal(sig, self._handle)
            self.previous.setdefault(sig, old)

    def restore(self) -> None:
        for sig, old in self.previous.items():
            signal.signal(sig, old)
        self.previous.clear()

    def _handle(self, signum, frame) -> None:
        if self.signum is not None:
            os._exit(128 + signum)
        self.signum = signum
        print(f"\n{signal.Signals(signum).name}: stopping the sweep (cancelling the points in flight; "
              f"send it again to exit at once)", file=sys.stderr, flush=True)
        if self.in_point:
            raise SweepStopped(signum)


def write_job_hydra(p: SweepPoint) -> None:
    """The job folder's ``.hydra/`` as Hydra writes it for a normal run: config.yaml (the job's
    config without hydra, unresolved), hydra.yaml (the hydra node, runtime.output_dir set) and
    overrides.yaml. One plain conversion and libyaml's dumper: a few ms a point, where
    OmegaConf's masked copies and dumper take ~100 ms."""
    cfg = p.job_cfg
    if cfg is None:
        return
    import yaml
    from omegaconf import OmegaConf

    from pipelines.outputs import write_atomic

    # the launcher gives a plain dict; a DictConfig (a caller's own point) is converted once
    plain = dict(cfg) if isinstance(cfg, dict) else OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
    hydra = plain.pop("hydra", None) or {}
    if hydra.get("output_subdir") is None:
        return
    hydra.setdefault("runtime", {})["output_dir"] = str(p.out_dir)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    def dump(obj) -> str:
        return yaml.dump(obj, Dumper=dumper, default_flow_style=False, allow_unicode=True, sort_keys=False)

    out = p.out_dir / str(hydra["output_subdir"])
    write_atomic(out / "config.yaml", dump(plain))
    write_atomic(out / "hydra.yaml", dump({"hydra": hydra}))
    write_atomic(out / "overrides.yaml", dump(list(hydra.get("overrides", {}).get("task", []))))


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 100 else f"{v:.4g}"
    return str(v)


def result_table(pipeline: str, rows: list[tuple[SweepPoint, str, dict]], total: int | None = None,
                 keys: list[str] | None = None) -> str:
    """Markdown table of the sweep: one row per point (swept values, main metrics, status).
    ``rows``: (point, status, flattened numeric results), at most TABLE_ROWS of ``total``
    points shown; ``keys``: the swept keys (default: those that vary over ``rows``)."""
    if keys is None:
        values: dict[str, set] = {}
        for p, _, _ in rows:
            for o in p.overrides:
                k, _, v = o.partition("=")
                if v and k.lstrip("+~").split(".")[0].split("/")[0] not in ORCHESTRATION_KEYS:
                    values.setdefault(k.lstrip("+~"), set()).add(v)
        keys = [k for k, vs in values.items() if len(vs) > 1] or list(values)  # the swept keys
    metrics = [m for m in MAIN_METRICS.get(pipeline, ()) if any(m in r for _, _, r in rows)]
    if not metrics:
        first = next((r for _, s, r in rows if r), {})
        metrics = list(first)[:4]
    cols = keys + metrics + ["status"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for p, status, res in rows[:TABLE_ROWS]:
        vals = dict(o.split("=", 1) for o in p.overrides if "=" in o)
        vals = {k.lstrip("+~"): v for k, v in vals.items()}
        cells = [vals.get(k, "") for k in keys] + [_cell(res.get(m)) for m in metrics] + [status]
        lines.append("| " + " | ".join(cells) + " |")
    total = len(rows) if total is None else total
    if total > TABLE_ROWS:
        lines.append(f"... {total - TABLE_ROWS} more points (the sweep directory's results.jsonl, each job "
                     f"folder's results.json, or MLflow)")
    return "\n".join(lines)


# a task over its deadline (its points' timeouts, twice, since a queued task waits for the one
# ahead of it, plus a worker's start-up) is cancelled with its worker: the limit for points
# that never return to Python, where the worker's own SIGALRM cannot reach them
HARD_GRACE_S = 30.0


def _cancelled(stop: StopSignals) -> dict:
    name = signal.Signals(stop.signum).name if stop.signum else "a signal"
    return {"ok": False, "cancelled": True, "error": f"cancelled: the sweep was stopped by {name}"}


def _run_in_process(pipeline: str, todo: list[int], points, timeout_s, record, stop: StopSignals,
                    summary: SweepSummary, artifacts: bool = True) -> None:
    for n, i in enumerate(todo):
        if stop.signum is not None:
            summary.not_run = len(todo) - n
            return
        p = points[i]
        try:
            stop.in_point = True
            outcome = run_points(pipeline, [p.cfg], timeout_s, artifacts)[0]
        except SweepStopped:
            outcome = _cancelled(stop)
        finally:
            stop.in_point = False
        record(p, outcome)


def _units(points, todo: list[int], colocate, affinity=(), n_workers: int = 1) -> deque:
    """Index lists of the colocated units (``colocated_units``; one point each without keys),
    merged along the ``affinity`` keys for ``n_workers`` workers (``affine_units``)."""
    if not colocate and not affinity:
        return deque([i] for i in todo)
    pts = [points[i] for i in todo]
    where = {id(p): i for p, i in zip(pts, todo)}
    units = affine_units(colocated_units(pts, list(colocate)), list(colocate), list(affinity), n_workers)
    return deque([where[id(p)] for p in unit] for unit in units)


@dataclass
class _InFlight:
    """A Ray task's points (sweep order), their positions in the sweep, its hard deadline and how
    many of its points came back already (they come back in order)."""
    group: list
    positions: list[int]
    hard: float | None
    done: int = 0

    def take(self, n: int) -> tuple[list[int], list]:
        """The positions and points of the next ``n`` outcomes; they are done from now on."""
        a, self.done = self.done, self.done + n
        return self.positions[a:self.done], self.group[a:self.done]

    def left(self) -> int:
        """How many of its points have not come back."""
        return len(self.group) - self.done

    def rest(self) -> tuple[list[int], list]:
        """The positions and points that have not come back."""
        return self.take(self.left())


class RayFeed:
    """The sweep's Ray tasks: whole colocated units, about ``BatchSizer.size()`` points a task,
    at most two tasks in flight per worker (one running, one queued: no worker waits).

    A feed can start before the driver knows which points to run (``keep_only`` later): while
    the MLflow store opens, the workers already run the sweep's first units; a point the store
    then says finished before is not recorded again (its result is dropped)."""

    def __init__(self, pipeline: str, points, candidates: list[int], ray_cfg: dict, n_workers: int, timeout_s,
                 artifacts: bool = True):
        import ray

        lean_serialization()  # before the driver's first task builds its serialization context
        self.ray, self.pipeline, self.points, self.timeout_s, self.artifacts = ray, pipeline, points, timeout_s, artifacts
        self.remote = ray.remote(num_cpus=1, max_retries=0, num_returns="streaming")(stream_points)
        self.units = _units(points, candidates, ray_cfg.get("colocate") or (), ray_cfg.get("affinity") or (), n_workers)
        self.sizer = BatchSizer(ray_cfg.get("batch_size", "auto"), n_workers)
        self.left = len(candidates)
        self.window = 2 * n_workers
        self.wanted: set[int] | None = None  # None: every candidate (not known yet)
        self.pending: dict = {}  # task -> _InFlight: only points in flight are composed

    def keep_only(self, todo: list[int]) -> None:
        """From now on run and record only ``todo`` (positions in the sweep)."""
        self.wanted = set(todo)
        self.units = deque(u for u in ([i for i in unit if i in self.wanted] for unit in self.units) if u)
        self.left = sum(len(u) for u in self.units)
        queued = {i for unit in self.units for i in unit}
        in_flight = {i for task in self.pending.values() for i in task.positions[task.done:]}
        missing = [i for i in todo if i not in queued and i not in in_flight]  # not a candidate at the start
        self.units.extend(_units(self.points, missing, ()) if missing else ())
        self.left += len(missing)

    def submit(self) -> None:
        group, positions = [], []
        want = self.sizer.size(self.left)
        while self.units and (not group or len(group) + len(self.units[0]) <= want):
            unit = self.units.popleft()
            positions.extend(unit)
            group.extend(self.points[i] for i in unit)
        self.left -= len(group)
        t = self.timeout_s
        hard = None if t is None else time.monotonic() + 2 * t * len(group) + HARD_GRACE_S
        task = self.remote.remote(self.pipeline, [p.cfg for p in group], t, self.artifacts)
        self.pending[task] = _InFlight(group, positions, hard)

    def fill(self, stop: "StopSignals | None" = None, summary: "SweepSummary | None" = None) -> None:
        while self.units and len(self.pending) < self.window and (stop is None or stop.signum is None) \
                and (summary is None or not summary.head_lost):
            self.submit()

    def recorded(self, positions: list[int], group: list, outcomes: list[dict]):
        """(point, outcome) pairs to record: those still wanted."""
        return [(p, o) for i, p, o in zip(positions, group, outcomes) if self.wanted is None or i in self.wanted]


def _run_on_ray(pipeline: str, todo: list[int], points, ray_cfg: dict, n_workers: int, timeout_s, record,
                stop: StopSignals, summary: SweepSummary, artifacts: bool = True, feed: RayFeed | None = None) -> None:
    import ray

    from pipelines.ray_cluster import HeadWatch, gcs_address

    if feed is None:
        feed = RayFeed(pipeline, points, todo, ray_cfg, n_workers, timeout_s, artifacts)
    feed.keep_only(todo)
    pending = feed.pending
    watch = HeadWatch(gcs_address())

    def record_all(positions: list[int], group: list, outcomes: list[dict]) -> None:
        for p, o in feed.recorded(positions, group, outcomes):
            record(p, dict(o))

    def drop_all(outcome: dict, cancel: bool) -> None:
        for task, flight in list(pending.items()):
            if cancel:
                with contextlib.suppress(Exception):
                    ray.cancel(task, force=True)
            positions, group = flight.rest()
            record_all(positions, group, [outcome] * len(group))
        pending.clear()

    feed.fill()
    while pending:
        if stop.signum is not None:
            drop_all(_cancelled(stop), cancel=True)
            break
        lost = watch.lost()
        if lost:
            summary.head_lost = lost
            drop_all({"ok": False, "error": f"{lost} while the point ran"}, cancel=False)
            break
        now = time.monotonic()
        for task, flight in list(pending.items()):
            if flight.hard is not None and now > flight.hard:
                with contextlib.suppress(Exception):
                    ray.cancel(task, force=True)
                del pending[task]
                positions, group = flight.rest()
                out = {"ok": False, "error": f"{timeout_error(timeout_s)} (its Ray worker was stopped)"}
                record_all(positions, group, [out] * len(group))
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5) if pending else ([], [])
        for task in ready:
            flight = pending[task]
            try:
                outcomes = ray.get(next(task))
            except StopIteration:  # the task ended: none of its points is left (else they failed)
                lost_point = {"ok": False, "error": "worker failed: its task ended without this point"}
                outcomes = [lost_point] * flight.left()
            except Exception as exc:  # a worker died: its points fail, the sweep goes on, unless the head went
                lost = watch.lost_with_worker()
                if lost:
                    summary.head_lost = lost
                    drop_all({"ok": False, "error": f"{lost} while the point ran"}, cancel=False)
                    break
                outcomes = [{"ok": False, "error": f"worker failed: {type(exc).__name__}: {exc}"}] * flight.left()
            positions, group = flight.take(len(outcomes))
            feed.sizer.observe(outcomes)
            if not flight.left():
                del pending[task]
                # the next task goes out before this one's points are written: no worker waits on the driver
                feed.fill(stop, summary)
            record_all(positions, group, outcomes)
        if summary.head_lost:
            break
        feed.fill(stop, summary)
    summary.not_run = sum(len(u) for u in feed.units)


class ListSource:
    """A list of ready SweepPoints with the interface of the launcher's lazy ``PointSource``."""

    def __init__(self, pipeline: str, points: list[SweepPoint]):
        from pipelines.tracking import common_dir, config_hash

        for p in points:
            p.cfg_hash = p.cfg_hash or config_hash(pipeline, p.cfg)
        self.points = points
        self.hashes = [p.cfg_hash for p in points]
        self.sweep_dir = common_dir(p.out_dir for p in points)

    def __len__(self) -> int:
        return len(self.points)

    def __getitem__(self, i: int) -> SweepPoint:
        return self.points[i]

    def overrides(self, i: int) -> list[str]:
        return self.points[i].overrides

    def index(self, i: int) -> int:
        return self.points[i].index


def _named(p: SweepPoint) -> SweepPoint:
    p.name = p.name or (" ".join(p.overrides) or f"point {p.index}")
    return p


class _Named:
    """Points with their display names filled in when composed."""

    def __init__(self, source):
        self.source = source

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, i: int) -> SweepPoint:
        return _named(self.source[i])


JOB_DIRS_AUTO_MAX = 2000  # sweep.job_dirs=auto: a job folder per point up to this many points
MAX_CHILD_RUNS = 2000     # tracking.max_child_runs default
TOP_K = 20                # tracking.top_k default


def job_dirs_on(sweep_cfg: dict | None, n_points: int) -> bool:
    value = (sweep_cfg or {}).get("job_dirs", "auto")
    return n_points <= JOB_DIRS_AUTO_MAX if value in (None, "auto") else bool(value)


def _metric_of(pipeline: str, tracking_cfg: dict) -> str | None:
    return tracking_cfg.get("top_k_by") or next(iter(MAIN_METRICS.get(pipeline, ())), None)


def run_sweep(pipeline: str, points, *, ray_cfg: dict, tracking_cfg: dict,
              sweep_name: str, sweep_hash: str, timeline_path: Path | None = None,
              sweep_cfg: dict | None = None, sweep_dir: Path | None = None) -> SweepSummary:
    """Run the points (a list of SweepPoints, or the launcher's lazy PointSource); SpecError
    (before anything is logged) when Ray cannot be joined."""
    from pipelines.ray_cluster import connect, target_of
    from pipelines.sweep_table import ResultsTable, finished_rows

    source = ListSource(pipeline, points) if isinstance(points, list) else points
    named = _Named(source)
    n_points = len(source)
    sweep_dir = Path(sweep_dir or source.sweep_dir or Path.cwd())
    timeout_s = point_timeout_s(sweep_cfg)
    use_ray = bool(ray_cfg.get("enabled", True))
    target = target_of(ray_cfg.get("address")) if use_ray else None
    t0, t0_epoch = time.perf_counter(), time.time()
    summary = SweepSummary()
    job_dirs = job_dirs_on(sweep_cfg, n_points)
    max_children = int(tracking_cfg.get("max_child_runs") or MAX_CHILD_RUNS)
    large = n_points > max_children  # one table artifact plus the top-k children, not a child per point
    stop = StopSignals()
    stop.install()
    n_workers = 0
    tracker = parent = writer = table = feed = None
    try:
        if target is not None and target.joins:  # a cluster we cannot join: one line, nothing logged
            target, n_workers = connect(ray_cfg)
            stop.install()
        existing: dict[str, list] = {}
        dirs = [sweep_dir]
        if tracking_cfg.get("enabled", True):
            from pipelines.tracking_process import TrackerProcess

            tracker = TrackerProcess(tracking_cfg)  # from this thread: the child dies with it
            opening = _Background(lambda: _open_tracking(tracker, sweep_hash, sweep_name, pipeline, source,
                                                         sweep_dir, large))
            if use_ray and n_workers == 0 and len(source):  # a private Ray starts while the store opens
                target, n_workers = connect(ray_cfg)
                stop.install()
            if use_ray and n_workers and len(source):  # ... and runs the first points while it still opens
                feed = _early_feed(pipeline, source, named, sweep_dir, ray_cfg, n_workers, timeout_s, job_dirs)
            parent, existing, dirs = opening.result()
            summary.parent_run_id = parent
        # resuming needs tracking (as before): without it a rerun runs every point again, and the
        # table keeps the first FINISHED line of each point
        in_table = finished_rows(dirs, full=not large) if tracker is not None else {}
        table = ResultsTable(sweep_dir, finished=set())
        stats = _Stats(n_points)

        def on_logged(item: dict, run_id) -> None:  # the writer thread: the point is in the store (or spooled)
            table.append(item["_row"])

        if tracker is not None and not large:
            writer = TrackingWriter(tracker, on_logged)
        todo = _plan(source, named, existing, in_table, tracker, writer, table, summary, stats, large, pipeline)
        progress = Progress(n_points, len(todo), show_rate=len(todo) >= 100)
        progress.update(summary)
        record = _recorder(pipeline, summary, stats, table, tracker, writer, parent, existing, job_dirs, large,
                           progress, t0_epoch, keep_timeline=job_dirs)

        if use_ray and todo:
            if n_workers == 0:
                target, n_workers = connect(ray_cfg)
                stop.install()
            _run_on_ray(pipeline, todo, named, ray_cfg, n_workers, timeout_s, record, stop, summary, job_dirs, feed)
        elif todo:
            _run_in_process(pipeline, todo, named, timeout_s, record, stop, summary, job_dirs)
        if writer is not None:
            if writer.pending():
                print(f"tracking: logging the last {writer.pending()} point(s) to MLflow", file=sys.stderr, flush=True)
            writer.close()
        summary.signal = stop.signum  # also one that came while the last points were logged
        progress.update(summary, final=True)
        summary.wall_s = time.perf_counter() - t0
        stats.wall_s = summary.wall_s
        if tracker is not None:
            if large:
                _finish_large(tracker, parent, pipeline, tracking_cfg, dirs, sweep_dir, named, source)
            tracker.finish_parent(parent, summary.as_dict())
        _write_timeline(timeline_path, summary, bool(use_ray and todo), t0_epoch)
        _print_summary(pipeline, source, named, summary, sweep_name, n_workers if use_ray and todo else 0,
                       tracker, stats, table.path)
    finally:
        if table is not None:
            table.close()
        if tracker is not None:
            tracker.close()
        stop.restore()
    return summary


def _early_feed(pipeline, source, named, sweep_dir, ray_cfg, n_workers, timeout_s, artifacts) -> RayFeed:
    """The sweep's first Ray tasks, sent before the MLflow store has said which points finished
    before (opening a new SQLite store takes seconds): the candidates are the points this sweep
    folder's table does not list as finished; ``_run_on_ray`` narrows them to the real plan."""
    from pipelines.sweep_table import finished_rows

    done = finished_rows([sweep_dir], full=False)
    candidates = [i for i, h in enumerate(source.hashes) if h not in done]
    feed = RayFeed(pipeline, named, candidates, ray_cfg, n_workers, timeout_s, artifacts)
    feed.fill()
    return feed


class _Background:
    """``fn()`` on a thread; ``result()`` waits and returns it, or raises what it raised
    (SystemExit from a one-line user error included)."""

    def __init__(self, fn) -> None:
        self.value = self.error = None
        self.thread = threading.Thread(target=self._run, args=(fn,), name="gx-background", daemon=True)
        self.thread.start()

    def _run(self, fn) -> None:
        try:
            self.value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
            self.error = exc

    def result(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.value


@dataclass
class _Stats:
    """What the driver keeps of the points: counts, busy time, workers, the first table rows."""
    n_points: int
    work_s: float = 0.0
    ran: int = 0
    wall_s: float = 0.0
    workers: set = field(default_factory=set)
    rows: dict = field(default_factory=dict)  # index -> (status, metrics), first TABLE_ROWS points only

    def keep(self, index: int, status: str, metrics: dict) -> None:
        if len(self.rows) < TABLE_ROWS or index in self.rows:
            self.rows[index] = (status, metrics)


def _open_tracking(tracker, sweep_hash, sweep_name, pipeline, source, sweep_dir, large):
    from collectives.errors import SpecError
    from pipelines.outputs import user_error
    from pipelines.tracking import sweep_params

    try:  # store unreachable, or another driver runs this sweep: one line, exit 2
        return tracker.open_sweep_state(sweep_hash, sweep_name, pipeline,
                                        swept=sweep_params(source.overrides(i) for i in range(len(source))),
                                        n_points=len(source), sweep_dir=sweep_dir,
                                        hashes=None if large else set(source.hashes))
    except SpecError as exc:
        user_error(str(exc))


def _plan(source, named, existing, in_table, tracker, writer, table, summary, stats, large, pipeline) -> list[int]:
    """Which points run: not those FINISHED before, in the store or in a results table. A
    finished point missing from one of them is copied there (never computed twice)."""
    from pipelines.sweep_table import table_row

    todo = []
    for i, h in enumerate(source.hashes):
        runs = existing.get(h, [])
        finished = [r for r in runs if r.info.status == "FINISHED"]
        row = in_table.get(h)
        if not finished and row is None:
            todo.append(i)
            continue
        summary.skipped += 1
        metrics = dict(finished[0].data.metrics) if finished else dict(row.get("metrics") or {})
        stats.keep(source.index(i), "SKIPPED (finished before)", metrics)
        if finished:
            tracker.remove_unfinished(runs)  # a killed earlier rerun may have left one behind
        if row is None:  # in the store, not in a table: the table lists every point
            table.append(table_row(named[i].index, h, named[i].name, "FINISHED", metrics))
        elif writer is not None and not finished:  # in a table, not in the store: log it from the row
            p = named[i]
            writer.put({"parent_id": tracker.parent_id, "pipeline": pipeline, "cfg_hash": h, "name": p.name,
                        "params": p.cfg, "results": metrics, "wall_s": row.get("wall_s"),
                        "stale": runs, "_row": row})
    return todo


def _recorder(pipeline, summary, stats, table, tracker, writer, parent, existing, job_dirs, large, progress,
              t0_epoch, keep_timeline):
    from pipelines.outputs import write_outputs
    from pipelines.sweep_table import table_row
    from pipelines.tracking import numeric_metrics

    def record(p: SweepPoint, outcome: dict) -> None:
        if keep_timeline:
            summary.timeline.append({"index": p.index, "point": p.name, "ok": outcome["ok"],
                                     "worker": outcome.get("worker"), "wall_s": outcome.get("wall_s"),
                                     "start_s": None if "started" not in outcome else outcome["started"] - t0_epoch})
        stats.ran += 1
        stats.work_s += outcome.get("wall_s") or 0.0
        if outcome.get("worker"):
            stats.workers.add(outcome["worker"])
        metrics: dict = {}
        if outcome["ok"]:
            metrics = numeric_metrics(outcome["results"])
            if job_dirs:
                write_outputs(p.out_dir, outcome["results"], outcome["artifacts"])
            summary.done += 1
            status = "FINISHED"
        else:
            if job_dirs:
                p.out_dir.mkdir(parents=True, exist_ok=True)
            if outcome.get("cancelled"):
                summary.cancelled += 1
            else:
                summary.failed += 1
            summary.errors[p.index] = outcome["error"]
            status = "CANCELLED" if outcome.get("cancelled") else "FAILED"
        stats.keep(p.index, status, metrics)
        if job_dirs:
            write_job_hydra(p)
        row = table_row(p.index, p.cfg_hash, p.name, status, metrics, wall_s=outcome.get("wall_s"),
                        worker=outcome.get("worker"), error=outcome.get("error"))
        if writer is not None:  # the table row follows once the store has the point
            writer.put({"parent_id": parent, "pipeline": pipeline, "cfg_hash": p.cfg_hash, "name": p.name,
                        "params": p.cfg, "results": outcome.get("results"),
                        "artifact_dir": p.out_dir if outcome["ok"] and job_dirs else None,
                        "error": None if outcome["ok"] else outcome["error"], "stale": existing.get(p.cfg_hash),
                        "out_dir": p.out_dir if job_dirs else None, "wall_s": outcome.get("wall_s"), "_row": row})
        else:
            table.append(row)
        progress.update(summary)

    return record


def _finish_large(tracker, parent, pipeline, tracking_cfg, dirs, sweep_dir, named, source) -> None:
    """A sweep over ``tracking.max_child_runs`` points: the whole table (every point once) as
    the parent's artifact, and the ``tracking.top_k`` best points as child runs."""
    from pipelines.sweep_table import top_rows, write_dedup_csv

    if parent is None or tracker.down:
        return
    csv_path = sweep_dir / "sweep_results.csv"
    n = write_dedup_csv(dirs, csv_path)
    tracker.log_table(parent, csv_path, n)
    metric = _metric_of(pipeline, tracking_cfg)
    k = int(tracking_cfg.get("top_k", TOP_K) or 0)
    if not metric or k <= 0:
        return
    where = {source.index(i): i for i in range(len(source))}
    best = set()
    for row in top_rows(dirs, metric, k):
        i = where.get(row["index"])
        if i is None or source.hashes[i] != row["cfg_hash"]:
            continue  # a table of another composition of the sweep: its index means another point
        p = named[i]
        best.add(p.cfg_hash)
        tracker.log_point(parent, pipeline=pipeline, cfg_hash=p.cfg_hash, name=p.name, params=p.cfg,
                          results=row.get("metrics"), wall_s=row.get("wall_s"))
    # a stopped run's top k that the whole sweep outranks: the parent keeps the sweep's top k only
    tracker.remove_children_except(parent, best)


def _write_timeline(path: Path | None, summary: SweepSummary, ray_used: bool, started_epoch: float) -> None:
    """``sweep_timeline.json``: the sweep's wall time, when it started (epoch s; the points'
    ``start_s`` count from there) and each point's worker, start and wall time."""
    if path is None or not summary.timeline:
        return
    import json

    from pipelines.outputs import write_atomic

    write_atomic(path, json.dumps({"wall_s": summary.wall_s, "ray": ray_used, "started_epoch_s": started_epoch,
                                   "points": summary.timeline}, indent=1) + "\n")


def rerun_note(summary: SweepSummary, total: int, tracked: bool) -> str | None:
    """What the same command will do next time, when something is left to run."""
    finished = summary.done + summary.skipped
    if finished == total:
        return None
    if not tracked:
        return f"tracking is off, so a rerun runs all {total} points again (with tracking it skips finished ones)"
    return f"a rerun of the same command skips the {finished} finished point(s) and runs the other {total - finished}"


def _print_summary(pipeline: str, source, named, summary: SweepSummary, sweep_name: str,
                   n_workers: int, tracker, stats: _Stats, table_path: Path) -> None:
    busy = ""
    if n_workers and stats.ran and summary.wall_s > 0:
        busy = (f"; Ray workers busy {100 * stats.work_s / (n_workers * summary.wall_s):.0f} % of the sweep's "
                f"wall time ({len(stats.workers)} of {n_workers} used)")
    rate = f", {stats.ran / summary.wall_s:,.1f} points/s" if stats.ran and summary.wall_s > 0 else ""
    extra = "".join(f", {n} {what}" for n, what in ((summary.cancelled, "cancelled"), (summary.not_run, "not run")) if n)
    err = sys.stderr
    print(f"sweep {sweep_name}: {summary.done} done, {summary.failed} failed, {summary.skipped} skipped{extra} "
          f"in {summary.wall_s:.1f} s{rate}{busy}", file=err)
    for idx, msg in sorted(summary.errors.items())[:TABLE_ROWS]:
        print(f"  point #{idx} {'cancelled' if msg.startswith('cancelled') else 'failed'}: {msg}", file=err)
    if len(summary.errors) > TABLE_ROWS:
        print(f"  ... {len(summary.errors) - TABLE_ROWS} more failed point(s), listed in {table_path}", file=err)
    if summary.signal is not None:
        print(f"stopped by {signal.Signals(summary.signal).name}: {summary.cancelled} point(s) in flight cancelled, "
              f"{summary.not_run} not started", file=err)
    if summary.head_lost:
        print(f"stopped: {summary.head_lost}; the points in flight are recorded as failed, {summary.not_run} "
              f"not started", file=err)
    note = rerun_note(summary, len(source), tracker is not None)
    if note:
        print(note, file=err)
    if tracker is not None:
        print(tracker.closing_line(), file=err)
    print(f"results table: {table_path} (one line per point); peak driver memory {peak_rss_mib():,.0f} MiB",
          file=err)
    err.flush()
    shown = range(min(len(source), TABLE_ROWS))
    table = [(named[i], *stats.rows.get(named[i].index, ("NOT RUN", {}))) for i in shown]
    keys = _swept_keys(source)
    print(result_table(pipeline, table, total=len(source), keys=keys), flush=True)


def peak_rss_mib() -> float:
    """The driver's peak resident memory: ``VmHWM`` of its own address space on Linux. Not
    ``ru_maxrss``, which keeps the peak of the process that started the driver when that one was
    larger (a fork, then exec: 1 GiB under a pytest worker for a 50 MiB driver)."""
    import resource

    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _swept_keys(source) -> list[str]:
    values: dict[str, set] = {}
    for i in range(len(source)):
        for o in source.overrides(i):
            k, _, v = o.partition("=")
            if v and k.lstrip("+~").split(".")[0].split("/")[0] not in ORCHESTRATION_KEYS:
                values.setdefault(k.lstrip("+~"), set()).add(v)
    return [k for k, vs in values.items() if len(vs) > 1] or list(values)
