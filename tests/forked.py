"""Run a pipeline's entry point in a forked child of the test process, as a subprocess would.

The child starts from this process's imports (no interpreter start, no Hydra / NumPy / SymPy /
gxnet imports: ~2 s per run on a slow 2-core host) but is its own process: its exit status,
stdout and stderr are its own, files it writes land where a CLI run writes them, and whatever
state it changes dies with it. Tests whose subject is the process boundary itself (the ``gx``
launcher, Ray, MLflow, torch.distributed) still start real subprocesses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path


def _child(entry: Callable[[], None], argv: list[str], cwd: Path, env: dict[str, str], timeout_s: int,
           out: Path, err: Path) -> None:
    """In the forked child: run the entry point; exit with its status (never returns)."""
    code = 1
    try:
        os.chdir(cwd)
        for fd, path in ((1, out), (2, err)):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(timeout_s)
        os.environ.update(env)
        sys.argv = argv
        entry()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - a traceback on stderr is what a test reports
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_forked(entry: Callable[[], None], argv: list[str], *, cwd: Path, env: dict[str, str] | None = None,
               timeout_s: float = 300) -> tuple[subprocess.CompletedProcess, int]:
    """``(CompletedProcess, peak RSS in bytes)`` of ``entry()`` run in a forked child with
    ``sys.argv = argv`` in ``cwd``; a child past ``timeout_s`` is killed (SIGALRM) and raises
    ``subprocess.TimeoutExpired`` as ``subprocess.run`` would."""
    with tempfile.TemporaryDirectory(prefix="gx-forked-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(entry, argv, cwd, env or {}, max(1, int(timeout_s)), out, err)
        _, status, usage = os.wait4(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
    if code == -signal.SIGALRM:
        raise subprocess.TimeoutExpired(argv, timeout_s, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(argv, code, stdout, stderr), usage.ru_maxrss * 1024
