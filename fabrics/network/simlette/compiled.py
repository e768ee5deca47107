"""Simlette's engine on the compiled port loop (``engine_core.c``).

:class:`CompiledEngine` keeps :class:`Engine`'s interface (``at``, ``inject``, ``run``, ``stop``,
``pending``, ``idle``, ``stats``, ``events``, ``last_credit_return_s``, ``env``) and its injection
logic (wire bytes, the flit split, spraying pointers), but the event queue, the port queues, the
units and the credits live in the extension's ``Core``: the loops of ``Engine._run_unlimited`` and
``Engine._run_limited`` run in C and come back to Python only for the collective runner's
callbacks and for a message's arrival. The same events run in the same order with the same float
operations, so every time and statistic is bit-identical to the Python engine's
(``tests/unit/test_simlette_compiled.py`` runs the recorded reference cases through both).

:func:`make_engine` picks the engine: the compiled one when the extension is built (and not
switched off with ``CORE.use(False)``), else :class:`Engine`.
"""

from __future__ import annotations

from itertools import count

import simpy

from collectives.compiled import OptionalExtension
from fabrics.network.simlette.engine import Engine, Message
from fabrics.network.simlette.params import SimletteParams
from fabrics.network.simlette.routing import SimFabric

CORE = OptionalExtension("fabrics.network.simlette._engine_core", abi=2)
CALLBACK, ARRIVAL = 1, 2  # Core.run's codes (0: no event left)


def engine_kind() -> str:
    """Which engine :func:`make_engine` builds: "compiled" (the extension is built and not switched
    off) or "python"."""
    return "compiled" if CORE.load() is not None else "python"


def make_engine(fabric: SimFabric, params: SimletteParams, env: simpy.Environment | None = None) -> Engine:
    """The compiled engine where the extension is built, else the Python one."""
    if engine_kind() == "python":
        return Engine(fabric, params, env)
    return CompiledEngine(fabric, params, env, CORE.load())


class CompiledEngine(Engine):
    """:class:`Engine` with its state in the compiled ``Core``."""

    def __init__(self, fabric: SimFabric, params: SimletteParams, env: simpy.Environment | None, module):
        super().__init__(fabric, params, env)
        # the fabric's own after_s and credit_return_s lists: an OCS fabric fills a link's entries
        # when it first routes through it, and the core reads them when it first sees a path
        self.core = module.Core(fabric.n_links, self.inv_rate, self.after, self.flit_mode, self.dl,
                                self.capacity if self.limited else -1, self.chunk_flits if self.limited else 1,
                                fabric.credit_return_s)
        self._msgs: list[Message | None] = []
        self._callbacks: dict[int, tuple] = {}
        self._cid = count(1)

    def at(self, t: float, callback, arg=None, priority: int = 1) -> None:
        c = next(self._cid)
        self._callbacks[c] = (callback, arg)
        self.core.at(t, c, priority == 0)

    def pending(self) -> bool:
        return self.core.pending()

    def _enqueue_all(self, shares, paths, msg: Message, ready: float) -> None:
        mid = self.core.enqueue_all(self.env._now, ready, msg.remaining, shares, paths, msg.channel)  # remaining: wire bytes
        msgs = self._msgs
        if mid == len(msgs):
            msgs.append(msg)
        else:
            msgs[mid] = msg

    def _loop(self) -> None:
        """Engine.run's loop (the collector paused around it): the compiled one."""
        env, core, callbacks, msgs = self.env, self.core, self._callbacks, self._msgs
        run = core.run
        while True:
            code, now, x, arrival, remaining = run()
            env._now = now
            if code == CALLBACK:
                cb, arg = callbacks.pop(x)
                cb(arg)
            elif code == ARRIVAL:
                msg = msgs[x]
                msgs[x] = None
                msg.remaining, msg.arrival = remaining, arrival
                msg.on_arrival(msg)
            else:
                break
            if self.stop:
                core.settle()  # the arrival's event ends as in the Python loop, then the run stops
                break
        self.events = core.events()
        self.last_credit_return_s = core.last_credit_return()

    def idle(self) -> bool:
        return self.core.idle(self.env._now)

    def stats(self) -> dict:
        sent, busy, stall = self.core.stats()
        return {"bytes": sent, "busy_s": busy, "stall_s": stall}
