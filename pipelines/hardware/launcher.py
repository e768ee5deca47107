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
"""

from __future__ import annotations

import queue as queue_mod
import socket
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


def _snapshot(shared, world: int) -> list[tuple[int, int, int, int]]:
    return [tuple(shared[r * PROGRESS_FIELDS:(r + 1) * PROGRESS_FIELDS]) for r in range(world)]


def launch(plans: list[dict], world: int, options: dict, *, timeout_s: float, startup_timeout_s: float = 180.0,
           poll_s: float = 0.05) -> list[list[dict]]:
    """Run the replay; returns per rank its list of per-plan reports."""
    import torch.multiprocessing as mp

    # forkserver: a clean server process imports torch once and forks every rank from it (CUDA-safe
    # like spawn, since importing torch does not initialise CUDA; N ranks do not pay N torch imports)
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "pipelines.hardware.replay_worker"])
    addr = "127.0.0.1"
    port = free_port(addr)
    shared = ctx.Array("q", [0] * (world * PROGRESS_FIELDS), lock=False)
    for r in range(world):
        shared[r * PROGRESS_FIELDS + 3] = STATE_START
        shared[r * PROGRESS_FIELDS] = -1
    q = ctx.Queue()
    names = [p["name"] for p in plans]
    procs = [ctx.Process(target=spawn_entry, args=(r, world, addr, port, plans, options, shared, q), daemon=True)
             for r in range(world)]
    for p in procs:
        p.start()
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

    last = _snapshot(shared, world)
    moved_at = time.monotonic()
    try:
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
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        q.close()
