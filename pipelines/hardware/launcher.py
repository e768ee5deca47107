"""Start one process per rank and watch them: a dead or hung rank ends the replay, never a hang.

``launch(plans, world, options)`` starts ``world`` processes (torch.multiprocessing's
forkserver context: CUDA-safe), each running ``replay_worker.spawn_entry``. The parent polls two things:

- exit codes: a rank that exited non-zero is *dead*. Ranks that merely raised because a peer
  vanished (exit ``WORKER_ERROR_EXIT`` after reporting their exception) are looked past, so the
  message names the rank that died first ("rank 3 died (exit 9) during activation 2 of variopath");
- progress: every rank stores (plan, iteration, activation, state) in a shared array at each
  step; if no rank has moved for ``timeout_s``, the rank furthest behind is named ("rank 3 timed
  out after 30 s in activation 2 of variopath"). Start-up (torch import, rendezvous) gets
  ``startup_timeout_s``.

On failure every other rank is terminated and ``ReplayFailure`` is raised (a runtime failure,
not a user error: exit code 1, no results written). The process group's own timeout is set
above the watchdog's so the parent always decides first.

The ranks die with their parent: SIGTERM/SIGINT on the parent stop every rank before it exits
(exit 128 + signal); if the parent is killed outright, each rank goes within a second, by the
kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG)``, Linux; the ranks' parent is the
forkserver, which exits with the replay parent once the ranks let go of its "alive" pipe) and
by a thread watching the replay parent. Without this a rank waits out its collective timeout
(minutes) as an orphan.
"""

from __future__ import annotations

import contextlib
import os
import queue as queue_mod
import signal
import socket
import sys
import threading
import time

from pipelines.hardware.replay_worker import (PROGRESS_FIELDS, STATE_FINISHED, STATE_START, WORKER_ERROR_EXIT,
                                              spawn_entry)


class ReplayFailure(RuntimeError):
    """A rank died or hung; the message names it and where it was."""


def free_port(addr: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def where(progress: tuple[int, int, int, int], names: list[str]) -> str:
    plan, it, act, state = progress
    if state == STATE_START or plan < 0:
        return "start-up"
    if plan >= len(names) or state == STATE_FINISHED:
        return "shutdown"
    return f"activation {act} of {names[plan]} (iteration {it})"


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent exits (prctl(2), Linux
    only); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _release_forkserver() -> None:
    """A forkserver child inherits the forkserver's "alive" pipe, which keeps the forkserver (the
    rank's parent) running while any rank does; let go of it so the forkserver exits with the
    replay parent and the parent-death signal reaches the rank."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
        server._forkserver_alive_fd = None


def _exit_when_gone(pid: int, every_s: float = 0.5) -> None:
    while _alive(pid):
        time.sleep(every_s)
    os._exit(1)


def rank_entry(replay_parent: int, *args) -> None:
    """Process target of every rank: die with the replay parent, then run the rank. Two ways, so
    either suffices: the kernel's parent-death signal (the forkserver, the rank's parent, exits
    with the replay parent) and a thread that watches the replay parent."""
    die_with_parent()
    _release_forkserver()
    threading.Thread(target=_exit_when_gone, args=(replay_parent,), daemon=True, name="replay-parent").start()
    if not _alive(replay_parent):  # the parent went before prctl took effect
        os._exit(1)
    spawn_entry(*args)


class ReplayStopped(SystemExit):
    """SIGTERM/SIGINT on the replay parent: the ranks are stopped, then the parent exits."""


@contextlib.contextmanager
def stop_ranks_on_signal():
    """SIGTERM/SIGINT raise ReplayStopped in the parent, so launch()'s cleanup stops the ranks."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum, frame):
        print(f"error: replay stopped by {signal.Signals(signum).name}; stopping its ranks", file=sys.stderr,
              flush=True)
        raise ReplayStopped(128 + signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _snapshot(shared, world: int) -> list[tuple[int, int, int, int]]:
    return [tuple(shared[r * PROGRESS_FIELDS:(r + 1) * PROGRESS_FIELDS]) for r in range(world)]


def launch(plans: list[dict], world: int, options: dict, *, timeout_s: float, startup_timeout_s: float = 180.0,
           poll_s: float = 0.05) -> list[list[dict]]:
    """Run the replay; returns per rank its list of per-plan reports."""
    import torch.multiprocessing as mp

    # forkserver: a clean server process imports torch once and forks every rank from it (CUDA-safe
    # like spawn, since importing torch does not initialise CUDA; N ranks do not pay N torch imports)
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "pipelines.hardware.replay_worker",
                                "pipelines.hardware.launcher"])
    addr = "127.0.0.1"
    port = free_port(addr)
    shared = ctx.Array("q", [0] * (world * PROGRESS_FIELDS), lock=False)
    for r in range(world):
        shared[r * PROGRESS_FIELDS + 3] = STATE_START
        shared[r * PROGRESS_FIELDS] = -1
    q = ctx.Queue()
    names = [p["name"] for p in plans]
    procs = [ctx.Process(target=rank_entry, args=(os.getpid(), r, world, addr, port, plans, options, shared, q),
                         daemon=True) for r in range(world)]
    with stop_ranks_on_signal():
        return _watch(procs, q, shared, world, names, timeout_s, startup_timeout_s, poll_s)


def _watch(procs, q, shared, world: int, names: list[str], timeout_s: float, startup_timeout_s: float,
           poll_s: float) -> list[list[dict]]:
    """Start the ranks and watch them until they all report, one dies or all stall."""
    reports: dict[int, list] = {}
    errors: dict[int, str] = {}

    def drain(wait_s: float = 0.0) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                kind, rank, payload = q.get(timeout=max(0.0, deadline - time.monotonic()) or 0.001)
            except queue_mod.Empty:
                return
            (reports if kind == "report" else errors)[rank] = payload

    try:
        for p in procs:
            p.start()
        last = _snapshot(shared, world)
        moved_at = time.monotonic()
        while True:
            drain(poll_s)
            now = time.monotonic()
            codes = [p.exitcode for p in procs]
            dead = [r for r, c in enumerate(codes) if c not in (None, 0)]
            if dead:
                drain(0.5)  # let ranks that raised because of the dead one report it
                codes = [p.exitcode for p in procs]
                dead = [r for r, c in enumerate(codes) if c not in (None, 0)]
                first = [r for r in dead if codes[r] != WORKER_ERROR_EXIT and r not in errors] or dead
                r = first[0]
                detail = f": {errors[r]}" if r in errors else ""
                raise ReplayFailure(f"rank {r} died (exit {codes[r]}) during {where(_snapshot(shared, world)[r], names)}{detail}")
            if all(c == 0 for c in codes):
                drain(1.0)
                missing = [r for r in range(world) if r not in reports]
                if missing:
                    raise ReplayFailure(f"rank {missing[0]} exited without a report")
                return [reports[r] for r in range(world)]
            snap = _snapshot(shared, world)
            if snap != last:
                last, moved_at = snap, now
            started = all(s[3] != STATE_START for s in snap)
            limit = timeout_s if started else max(startup_timeout_s, timeout_s)
            if now - moved_at > limit:
                r = min(range(world), key=lambda k: (snap[k], k))  # furthest behind
                raise ReplayFailure(f"rank {r} timed out after {limit:g} s in {where(snap[r], names)}")
    finally:
        _stop(procs, q)


def _stop(procs, q) -> None:
    for p in procs:
        if p.pid is not None and p.is_alive():
            p.terminate()
    for p in procs:
        if p.pid is None:
            continue
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    q.close()
