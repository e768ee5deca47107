"""A sweep's MLflow tracker in a process of its own, beside the driver (used by ``pipelines.sweep``).

Importing MLflow and opening a new SQLite store cost the driver ≈ 2.3 CPU s, logging a child run
20–40 ms (measured: docs/benchmarks.md); in the driver that work holds its GIL while Ray starts
and takes a core from the workers while they run. Here a child process runs the real
:class:`~pipelines.tracking.Tracker` at a lower CPU priority (:data:`NICE`), so it mostly uses
the CPU the workers leave idle. The driver keeps a :class:`TrackerProcess`, with the methods the
sweep calls; each call goes over a pipe and is answered in turn. Runs come back as
:class:`RunRef` (what the sweep reads of a run); the driver never imports MLflow, and on a local
SQLite store neither does the child (it writes the rows itself: ``pipelines.mlflow_direct``).

What the Tracker guarantees still holds. The child takes the sweep's lock (its file names the
driver) and dies with the driver (a parent-death signal on Linux, else the end of its input), so
a killed driver leaves no lock. SIGINT and SIGTERM are the driver's: the child ignores them, and
the stopped driver still finishes its parent run through it. The one-line errors of the start
(store unreachable, sweep locked) are raised in the driver as before. If the child dies
mid-sweep, the driver says so once, marks tracking down and spools every later point as the
Tracker does when its store fails (``gx sync`` or a rerun logs them).
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from pipelines.collector import pace_collector
from pipelines.tracking import SpoolingTracker, StoreUnavailable, default_uri, project_env

# The child opens the store at the driver's priority: the driver records no point before the
# store has said which finished before, so opening must not wait for idle CPU (on a busy host it
# would wait for the whole sweep). It then logs at niceness 19: CPU weight 15 against a
# niceness-0 worker's 1024 (Linux CFS), so logging runs on the CPU the workers leave idle.
OPEN_NICE, NICE = 0, 19
_HEADER = struct.Struct("!I")
_EOF = object()
# what the driver may ask; the tracker's state the child sends back with every answer
CALLS = ("log_point", "remove_unfinished", "log_table", "remove_children_except", "finish_parent")
STATE = ("down", "unlogged", "logged", "parent_id", "report_pid", "sweep_hash", "sweep_name", "swept", "n_points",
         "sweep_dir", "writer")


@dataclass(frozen=True, slots=True)
class RunInfo:
    run_id: str
    status: str
    start_time: int | None


@dataclass(frozen=True, slots=True)
class RunData:
    metrics: dict
    tags: dict


@dataclass(frozen=True, slots=True)
class RunRef:
    """What the sweep reads of an MLflow run (``run.info.status``, ``run.data.metrics``, ...)."""
    info: RunInfo
    data: RunData


def run_ref(run) -> RunRef:
    return RunRef(RunInfo(run.info.run_id, run.info.status, run.info.start_time),
                  RunData(dict(run.data.metrics), dict(run.data.tags)))


def _send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream):
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return _EOF
    (size,) = _HEADER.unpack(head)
    data = stream.read(size)
    return _EOF if len(data) < size else pickle.loads(data)


def _ended(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


class _Gone(Exception):
    """The tracking process is no longer there."""


class TrackerProcess(SpoolingTracker):
    """The driver's side: the sweep's calls of a Tracker, answered by the child process."""

    def __init__(self, tracking_cfg: dict):
        self.uri = tracking_cfg.get("uri") or default_uri()
        self.experiment = tracking_cfg.get("experiment") or "gxnet"
        self.cfg = {"uri": self.uri, "experiment": self.experiment, "report": bool(tracking_cfg.get("report", True)),
                    "sqlite_wal": bool(tracking_cfg.get("sqlite_wal", True)),
                    "sqlite_direct": bool(tracking_cfg.get("sqlite_direct", True))}
        self.down: str | None = None
        self.unlogged = self.logged = 0
        self.parent_id = self.report_pid = self.sweep_hash = self.sweep_name = self.n_points = None
        self.writer: str | None = None  # how the child writes the store ("direct" or "mlflow"), once it is open
        self.swept: dict = {}
        self.sweep_dir: Path | None = None
        self._lock = threading.Lock()
        # started by the caller's thread: the child's parent-death signal follows that thread
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "pipelines.tracking_process", str(os.getpid()),
                                          str(OPEN_NICE), str(NICE)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=project_env())
        except OSError as exc:
            raise StoreUnavailable(f"tracking store {self.uri}: its tracking process could not start ({exc}); "
                                   "run with tracking.enabled=false") from None

    def _call(self, method: str, *args, **kwargs):
        with self._lock:
            reply = _EOF
            if self.proc.poll() is None:
                try:
                    _send(self.proc.stdin, (method, args, kwargs))
                    reply = _receive(self.proc.stdout)
                except (OSError, ValueError, EOFError, pickle.UnpicklingError):  # a pipe cut mid-answer
                    reply = _EOF
            if reply is _EOF:
                self._lost()
                raise _Gone
        ok, result, state = reply
        for key, value in (state or {}).items():
            setattr(self, key, value)
        if not ok:
            raise result
        return result

    def _exit_code(self) -> int | None:
        """The child's exit status; its pipe can close a moment before the kernel reports it."""
        try:
            return self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return None

    def _lost(self) -> None:
        if self.down:
            return
        self.down = f"its tracking process {_ended(self._exit_code())}"
        where = f"; results stay on disk under {self.sweep_dir}" if self.sweep_dir else ""
        print(f"warning: tracking store {self.uri}: {self.down}; going on without it{where}; rerun the same "
              f"sweep or run `gx sync` to upload what is missing", file=sys.stderr)

    # -- what the sweep calls -------------------------------------------------------------
    def open_sweep_state(self, sweep_hash: str, name: str, pipeline: str, **kwargs) -> tuple:
        """``tracking.open_sweep_state`` in the child: (parent, children as RunRefs, dirs)."""
        try:
            return self._call("open_sweep_state", self.cfg, sweep_hash, name, pipeline, **kwargs)
        except _Gone:
            raise StoreUnavailable(f"tracking store {self.uri}: the tracking process {_ended(self._exit_code())} "
                                   "before the store opened; see the messages above, or run with "
                                   "tracking.enabled=false") from None

    def log_point(self, parent_id, **kwargs) -> str | None:
        try:
            return self._call("log_point", parent_id, **kwargs)
        except _Gone:  # as the Tracker does with a store that failed: on disk, listed to sync
            fields = ("pipeline", "cfg_hash", "name", "params", "error", "wall_s", "out_dir")
            record = self.point_record(**{k: kwargs.get(k) for k in fields})
            self.spool(record, kwargs.get("out_dir"))
            return None

    def _best_effort(self, method: str, *args, **kwargs) -> None:
        try:
            self._call(method, *args, **kwargs)
        except _Gone:
            pass

    def remove_unfinished(self, runs) -> None:
        self._best_effort("remove_unfinished", runs)

    def log_table(self, parent_id, path: Path, n_points: int) -> None:
        self._best_effort("log_table", parent_id, path, n_points)

    def remove_children_except(self, parent_id, keep: set[str]) -> None:
        self._best_effort("remove_children_except", parent_id, keep)

    def finish_parent(self, parent_id, summary: dict | None) -> None:
        self._best_effort("finish_parent", parent_id, summary)

    def close(self) -> None:
        """The child releases the sweep's lock and exits (waited for)."""
        with self._lock:
            if self.proc.poll() is None:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- the child ---------------------------------------------------------------------------

def _portable(exc: BaseException) -> BaseException:
    """The exception itself when it survives pickling (SpecError and its kin do), else its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - e.g. an MLflow exception with extra constructor arguments
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _state(tracker) -> dict | None:
    return None if tracker is None else {k: getattr(tracker, k) for k in STATE}


def serve(inp, out, driver_pid: int, nice: int) -> None:
    """Answer the driver's calls until its pipe closes; from the first answer on, at ``nice``."""
    tracker = None
    while True:
        msg = _receive(inp)
        if msg is _EOF:
            break
        method, args, kwargs = msg
        try:
            if method == "open_sweep_state":
                from pipelines.tracking import open_sweep_state, open_tracker

                tracker = open_tracker(args[0], direct=True)
                tracker.owner_pid = driver_pid  # the sweep's lock names the driver, the process a user stops
                parent, existing, dirs = open_sweep_state(tracker, *args[1:], **kwargs)
                result = (parent, {h: [run_ref(r) for r in runs] for h, runs in existing.items()}, dirs)
                _renice(nice)
            elif method in CALLS and tracker is not None:
                result = getattr(tracker, method)(*args, **kwargs)
            else:
                raise RuntimeError(f"tracking process: unknown call {method!r}")
            reply = (True, result, _state(tracker))
        except BaseException as exc:  # noqa: BLE001 - raised again in the driver
            reply = (False, _portable(exc), _state(tracker))
        _send(out, reply)
    if tracker is not None:
        tracker.close()


def _die_with(driver_pid: int) -> None:
    """SIGKILL when the driver's thread that started this process ends (Linux), as an
    in-process tracker would end with it; elsewhere the closed pipe ends the loop."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != driver_pid:  # the driver ended before the signal was armed
        os._exit(0)


def _renice(nice: int) -> None:
    try:
        os.nice(nice - os.nice(0))
    except OSError:
        pass


def main(argv: list[str]) -> None:
    driver_pid, open_nice, nice = int(argv[1]), int(argv[2]), int(argv[3])
    for sig in (signal.SIGINT, signal.SIGTERM):  # the driver stops the sweep and finishes it through us
        signal.signal(sig, signal.SIG_IGN)
    _die_with(driver_pid)
    _renice(open_nice)
    pace_collector()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # print() goes to the driver's stderr; the answers have the pipe to themselves
    serve(sys.stdin.buffer, out, driver_pid, nice)
    sys.stderr.flush()
    os._exit(0)  # every answer is sent and the lock released: skip tearing down MLflow's modules (≈ 0.9 s)


if __name__ == "__main__":  # the module by its name, so what it pickles unpickles in the driver (not __main__.RunRef)
    from pipelines.tracking_process import main as module_main

    module_main(sys.argv)
