"""Simlette's event core: ports, credits and flits on a ``simpy.Environment`` (paper 003, 5.2, C.5).

Design, for speed and for the deferred latency accounting of Appendix C.5:

* No SimPy processes. Every output port (= simulator link) is a small state machine driven by
  raw events pushed onto the environment's queue; a handful of callbacks do all the work.
* Deferred accounting: when a port puts data on its link, the data is handed to the next stage
  *at once*, stamped with the time it will be ready there (end of serialization + cable +
  switch / pass-through, or + sink latency at the destination). Simulated time advances only
  where the paper says it does: before a port puts data on its link (waiting for the data to
  be ready, for the port to be free, or for a credit), during serialization, and on arrival.
  So no latency is ever paid twice, and most hops cost a single event.
* Units: in **flit** mode a port sends one DL flit per event; in **optimized** mode it sends a
  whole message share (all flits of one message that take the same path) per event, charging
  its serialization at once. A downstream port may start a unit once its first flit is ready
  (cut-through at flit granularity, as flit mode does), so both modes give the same times when
  ports are not shared; under contention optimized mode serves whole units in FIFO order
  instead of interleaving flits, which changes who finishes first but not when a port drains.
* Credits (Section 5.2): each link has a receive buffer at its far end, counted in DL flits,
  per channel (0 = request, 1 = response). A port needs a credit per flit before it sends;
  the slot frees when the flit leaves the buffer (a switch starts forwarding it, or the
  destination consumes it on arrival), and the credit is back at the sender after the link's
  ``credit_return_s``. A port that waits for credits accumulates *credit-stall* time.
  ``buffer_bytes=None`` disables credits (unlimited buffers).
* Spraying: a message's DL flits go round-robin over the routing alternatives, with one
  pointer per ``fabric.spray_key`` (per source on EPS), so rails are balanced deterministically.
* Wire bytes: a message occupies whole 64 B TL flits; TL flits are packed ten to a 640 B DL flit,
  and a message's last DL flit is only as long as its TL flits (no padding on the wire).
"""

from __future__ import annotations

import bisect
from collections import deque
from heapq import heappop, heappush
from math import inf

import simpy

from fabrics.network.simlette.params import SimletteParams
from fabrics.network.simlette.routing import SimFabric

REQUEST, RESPONSE = 0, 1
_PRIO = 1  # simpy.events.NORMAL


class _Ev:
    """A minimal SimPy-compatible event (what ``Environment.step`` needs: callbacks and _ok)."""

    __slots__ = ("callbacks", "_ok", "_value", "arg")

    def __init__(self, callback, arg):
        self.callbacks = [callback]
        self._ok = True
        self._value = None
        self.arg = arg


class Message:
    """One transfer between two accelerators; ``on_arrival(msg)`` fires when its last byte is scheduled to arrive."""

    __slots__ = ("src", "dst", "channel", "remaining", "arrival", "on_arrival", "token")

    def __init__(self, src: int, dst: int, on_arrival, token, channel: int = REQUEST):
        self.src = src
        self.dst = dst
        self.channel = channel
        self.remaining = 0
        self.arrival = 0.0
        self.on_arrival = on_arrival
        self.token = token


class _Unit:
    """What sits in a port queue: ``nflits`` flits of one message on one path, ready at ``ready``."""

    __slots__ = ("ready", "msg", "path", "hop", "nbytes", "nflits", "last")

    def __init__(self, ready, msg, path, hop, nbytes, nflits, last):
        self.ready = ready
        self.msg = msg
        self.path = path
        self.hop = hop
        self.nbytes = nbytes
        self.nflits = nflits
        self.last = last  # bytes of this unit's final flit (<= one DL flit)


class Engine:
    """Ports, buffers and credits of one fabric; messages are injected by the collective runner."""

    def __init__(self, fabric: SimFabric, params: SimletteParams, env: simpy.Environment | None = None):
        self.env = env if env is not None else simpy.Environment()
        self._queue = self.env._queue  # raw heap: events are pushed at absolute times (exact, no now+delay rounding)
        self._eid = self.env._eid
        self.fabric = fabric
        self.params = params
        n = fabric.n_links
        self.flit_mode = params.mode == "flit"
        self.tl = params.tl_flit_bytes
        self.dl = params.dl_flit_bytes
        self.inv_rate = [1.0 / r for r in fabric.rate_Bps]
        self.after = fabric.after_s
        self.queues: list[deque | None] = [None] * n
        self.busy_until = [0.0] * n
        self.wake_at = [inf] * n
        self.bytes_sent = [0] * n
        self.busy_s = [0.0] * n
        self.spray: dict = {}
        self.per_source = params.spray == "source"
        self._wake_cb = self._wake if params.buffer_flits is not None else self._wake_fast
        self.events = 0
        cap = params.buffer_flits
        self.limited = cap is not None
        if self.limited:
            self.capacity = cap
            self.chunk_flits = max(1, cap // 16)
            self.credits = [[cap] * n, [cap] * n]  # per channel
            self.returns: list[list[deque]] = [[deque() for _ in range(n)], [deque() for _ in range(n)]]
            self.waiting = [False] * n
            self.stall_since: list[float | None] = [None] * n
            self.stall_s = [0.0] * n
        self.last_credit_return_s = 0.0
        self.stop = False

    # --- scheduling -------------------------------------------------------------------------
    def at(self, t: float, callback, arg=None, priority: int = _PRIO) -> None:
        """Run ``callback(event)`` at absolute simulated time ``t`` (>= now)."""
        heappush(self._queue, (t, priority, next(self._eid), _Ev(callback, arg)))

    def _ensure_wake(self, link: int, t: float) -> None:
        now = self.env._now
        w = self.wake_at[link]
        if now <= w <= t:
            return
        self.wake_at[link] = t
        heappush(self._queue, (t, _PRIO, next(self._eid), _Ev(self._wake_cb, link)))

    def _wake(self, ev) -> None:
        link = ev.arg
        if self.wake_at[link] == self.env._now:
            self.wake_at[link] = inf
        self._try_start(link)

    def _wake_fast(self, ev) -> None:
        """``_wake`` + ``_try_start`` for unlimited buffers, inlined: the hot loop of flit mode.

        Same semantics as ``_try_start`` without credits (tests compare both paths)."""
        link = ev.arg
        now = self.env._now
        wake_at = self.wake_at
        if wake_at[link] == now:
            wake_at[link] = inf
        busy_until = self.busy_until
        bu = busy_until[link]
        if bu > now:
            self._ensure_wake(link, bu)
            return
        q = self.queues[link]
        if not q:
            return
        u = q[0]
        if u.ready > now:
            self._ensure_wake(link, u.ready)
            return
        inv = self.inv_rate[link]
        path = u.path
        hop = u.hop
        msg = u.msg
        if self.flit_mode and u.nflits > 1:
            size = self.dl
            u.nflits -= 1
            u.nbytes -= size
            ser = size * inv
            end = now + ser
            nxt = _Unit(end + self.after[link], msg, path, hop + 1, size, 1, size) if hop + 1 < len(path) else None
        else:
            q.popleft()
            size = u.nbytes
            ser = size * inv
            end = now + ser
            if hop + 1 < len(path):
                u.ready = now + ((self.dl if u.nflits > 1 else size) * inv) + self.after[link]
                u.hop = hop + 1
                nxt = u
            else:
                nxt = None
        busy_until[link] = end
        self.bytes_sent[link] += size
        self.busy_s[link] += ser
        queue = self._queue
        if nxt is not None:
            nl = path[hop + 1]
            nq = self.queues[nl]
            if nq is None:
                nq = self.queues[nl] = deque()
            ready = nxt.ready
            if nq and nq[-1].ready > ready:
                i = len(nq)
                while i > 0 and nq[i - 1].ready > ready:
                    i -= 1
                nq.insert(i, nxt)
            else:
                nq.append(nxt)
            t = busy_until[nl]
            h = nq[0].ready
            if h > t:
                t = h
            if t < now:
                t = now
            w = wake_at[nl]
            if not now <= w <= t:
                wake_at[nl] = t
                heappush(queue, (t, _PRIO, next(self._eid), _Ev(self._wake_fast, nl)))
        else:
            arrival = end + self.after[link]
            msg.remaining -= size
            if arrival > msg.arrival:
                msg.arrival = arrival
            if msg.remaining <= 0:
                msg.on_arrival(msg)
        if q:
            w = wake_at[link]
            if not now <= w <= end:
                wake_at[link] = end
                heappush(queue, (end, _PRIO, next(self._eid), _Ev(self._wake_fast, link)))

    # --- injection --------------------------------------------------------------------------
    def inject(self, msg: Message, nbytes: int, ready_s: float) -> None:
        """Split ``msg`` (``nbytes`` payload) into DL flits sprayed over its paths; ready at ``ready_s``."""
        tl, dl = self.tl, self.dl
        wire = -(-nbytes // tl) * tl if nbytes > tl else tl
        msg.remaining = wire
        nfl = -(-wire // dl)
        last = wire - dl * (nfl - 1)
        fabric = self.fabric
        src, dst = msg.src, msg.dst
        P = fabric.n_paths(src, dst)
        key = fabric.spray_key(src, dst)
        ptr = self.spray.get(key, 0) % P if self.per_source else 0  # P differs by destination (racks)
        if P == 1:
            self._enqueue(_Unit(ready_s, msg, fabric.path(src, dst, 0), 0, wire, nfl, last))
            return
        self.spray[key] = (ptr + nfl) % P
        if nfl == 1:
            self._enqueue(_Unit(ready_s, msg, fabric.path(src, dst, ptr), 0, wire, 1, last))
            return
        base, extra = divmod(nfl, P)
        last_i = (nfl - 1) % P
        for i in range(min(nfl, P)):
            count = base + (1 if i < extra else 0)
            if i == last_i:
                unit = _Unit(ready_s, msg, fabric.path(src, dst, (ptr + i) % P), 0, (count - 1) * dl + last, count, last)
            else:
                unit = _Unit(ready_s, msg, fabric.path(src, dst, (ptr + i) % P), 0, count * dl, count, dl)
            self._enqueue(unit)

    def _enqueue(self, unit: _Unit) -> None:
        link = unit.path[unit.hop]
        q = self.queues[link]
        if q is None:
            q = self.queues[link] = deque()
        if q and q[-1].ready > unit.ready:
            # rare: keep FIFO-by-ready order (latencies into a port are normally equal)
            i = len(q)
            while i > 0 and q[i - 1].ready > unit.ready:
                i -= 1
            q.insert(i, unit)
        else:
            q.append(unit)
        head = q[0].ready
        t = self.busy_until[link]
        if head > t:
            t = head
        now = self.env._now
        self._ensure_wake(link, t if t > now else now)

    # --- the port ---------------------------------------------------------------------------
    def _try_start(self, link: int) -> None:
        now = self.env._now
        bu = self.busy_until[link]
        if bu > now:
            self._ensure_wake(link, bu)
            return
        q = self.queues[link]
        if not q:
            return
        u = q[0]
        if u.ready > now:
            self._ensure_wake(link, u.ready)
            return
        dl = self.dl
        if self.flit_mode:
            nfl = 1
            size = dl if u.nflits > 1 else u.last
        else:
            nfl = u.nflits
            size = u.nbytes
        msg = u.msg
        if self.limited:
            ch = msg.channel
            rq = self.returns[ch][link]
            credits = self.credits[ch]
            c = credits[link]
            while rq and rq[0][0] <= now:
                c += rq.popleft()[1]
            if c < 1:
                credits[link] = c
                if self.stall_since[link] is None:
                    self.stall_since[link] = now
                if rq:
                    self._ensure_wake(link, rq[0][0])
                else:
                    self.waiting[link] = True
                return
            since = self.stall_since[link]
            if since is not None:
                self.stall_s[link] += now - since
                self.stall_since[link] = None
            if nfl > c or nfl > self.chunk_flits:
                # optimized mode under credits: send at most 1/16 of the buffer per event so that
                # several chunks are in flight, as flits would be; the rest stays at the head
                nfl = min(c, self.chunk_flits)
                size = nfl * dl
            credits[link] = c - nfl
        inv = self.inv_rate[link]
        ser = size * inv
        end = now + ser
        self.busy_until[link] = end
        self.bytes_sent[link] += size
        self.busy_s[link] += ser
        whole = nfl == u.nflits
        chunk_last = u.last if whole or (self.flit_mode and u.nflits == 1) else dl
        if whole:
            q.popleft()
        else:
            u.nflits -= nfl
            u.nbytes -= size
        path = u.path
        hop = u.hop
        after = self.after[link]
        if self.limited and hop > 0:
            # the data leaves the buffer of the previous link as it goes out here
            prev = path[hop - 1]
            self._credit_back(ch, prev, end - chunk_last * inv + self.fabric.credit_return_s[prev], nfl)
        if hop + 1 < len(path):
            first = (dl if nfl > 1 else size) * inv
            if whole:
                u.ready = now + first + after
                u.hop = hop + 1
                self._enqueue(u)
            else:
                self._enqueue(_Unit(now + first + after, msg, path, hop + 1, size, nfl, chunk_last))
        else:
            arrival = end + after
            if self.limited:
                self._credit_back(ch, link, arrival + self.fabric.credit_return_s[link], nfl)
            msg.remaining -= size
            if arrival > msg.arrival:
                msg.arrival = arrival
            if msg.remaining <= 0:
                msg.on_arrival(msg)
        if q:
            self._ensure_wake(link, end)

    def _credit_back(self, ch: int, link: int, t: float, n: int) -> None:
        rq = self.returns[ch][link]
        if rq and rq[-1][0] > t:
            bisect.insort(rq, (t, n))
        else:
            rq.append((t, n))
        if t > self.last_credit_return_s:
            self.last_credit_return_s = t
        if self.waiting[link]:
            self.waiting[link] = False
            now = self.env._now
            self._ensure_wake(link, t if t > now else now)

    # --- running ----------------------------------------------------------------------------
    def run(self) -> None:
        """Step the environment until a runner sets ``self.stop`` or nothing is left to do."""
        # Environment.step without its per-call overhead: our events never fail and never stop
        # the environment, so popping and calling back is all a step does here.
        q = self._queue
        env = self.env
        pop = heappop
        self.stop = False
        n = 0
        while q and not self.stop:
            env._now, _, _, ev = pop(q)
            n += 1
            callbacks, ev.callbacks = ev.callbacks, None
            for cb in callbacks:
                cb(ev)
        self.events += n

    def idle(self) -> bool:
        """No data queued or in flight on any port (credits may still be travelling back)."""
        now = self.env._now
        return all(not q for q in self.queues if q is not None) and all(b <= now for b in self.busy_until)

    def stats(self) -> dict:
        """Per-link bytes, busy time and credit-stall time (for utilisation reports)."""
        return {
            "bytes": list(self.bytes_sent),
            "busy_s": list(self.busy_s),
            "stall_s": list(self.stall_s) if self.limited else [0.0] * len(self.bytes_sent),
        }
