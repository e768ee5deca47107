"""Simlette's event core: ports, credits and flits on a ``simpy.Environment`` (paper 003, 5.2, C.5).

Design, for speed and for the deferred latency accounting of Appendix C.5:

* No SimPy processes. Every output port (= simulator link) is a small state machine driven by
  raw events in SimPy's order (time, priority, insertion count), so events at equal times run
  in the order SimPy would run them. A port event is a bare link id in a per-time FIFO, handled
  inline by the loop of ``run`` (no event object, no callback call); only the collective
  runner's events (call starts, phase entries) are callbacks. The environment's clock
  (``env.now``) is kept for those callbacks. The order is part of the model: units with equal
  ready times queue at a port in the order their events ran, so an engine that skipped or
  merged events (e.g. sent a port's next unit without waking it) would break ties differently
  and change results; this one keeps every event and makes each cheap. The same loops also run
  compiled (``compiled.py``, ``engine_core.c``; bit-identical), and these are their reference
  and fallback.
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
import gc
from collections import deque
from heapq import heappop, heappush
from itertools import count
from math import inf

import simpy

from fabrics.network.simlette.params import SimletteParams
from fabrics.network.simlette.routing import SimFabric

REQUEST, RESPONSE = 0, 1

# A unit - what sits in a port queue: ``nflits`` flits of one message on one path, ready at
# ``ready`` - is a list (cheaper to make and to read than an object in the hot loop):
READY, MSG, PATH, HOP, NBYTES, NFLITS, LAST = range(7)  # LAST: bytes of its final flit (<= one DL flit)


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


class Engine:
    """Ports, buffers and credits of one fabric; messages are injected by the collective runner."""

    def __init__(self, fabric: SimFabric, params: SimletteParams, env: simpy.Environment | None = None):
        self.env = env if env is not None else simpy.Environment()
        # The event queue, in SimPy's order (time, priority, insertion count): a heap of the distinct
        # pending times and, per time, a FIFO of its events - URGENT ones first, then NORMAL ones in
        # insertion order. Collective schedules make most events share their time with thousands
        # of others (lock-step ports), so most pushes and pops are a dict lookup and a deque append
        # or popleft instead of a heap operation. An event is a link id >= 0 (wake that port) or
        # -c (run callback c).
        self._times: list[float] = []
        self._buckets: dict[float, deque] = {}
        self._urgent: dict[float, int] = {}  # time -> URGENT events still at the front of its FIFO
        self._callbacks: dict[int, tuple] = {}  # c -> (callback, arg, urgent)
        self._cid = count(1)
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
        self._splits: dict[tuple[int, int], tuple] = {}  # (payload bytes, paths) -> _split
        self.per_source = params.spray == "source"
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
    def at(self, t: float, callback, arg=None, priority: int = 1) -> None:
        """Run ``callback(arg)`` at absolute simulated time ``t`` (>= now); priority 0 = SimPy URGENT
        (before every NORMAL event at ``t``, after the URGENT ones already there)."""
        c = next(self._cid)
        urgent = priority == 0
        self._callbacks[c] = (callback, arg, urgent)
        if not urgent:
            self._push(t, -c)
            return
        b = self._buckets.get(t)
        if b is None:
            self._push(t, -c)
            self._urgent[t] = 1
        else:
            i = self._urgent.get(t, 0)
            b.insert(i, -c)
            self._urgent[t] = i + 1

    def _push(self, t: float, event: int) -> None:
        b = self._buckets.get(t)
        if b is None:
            self._buckets[t] = deque((event,))
            heappush(self._times, t)
        else:
            b.append(event)

    def pending(self) -> bool:
        """Whether any event is still queued."""
        return any(self._buckets.values())

    def _ensure_wake(self, link: int, t: float) -> None:
        self._wake_by(link, t, self.env._now)

    def _wake_by(self, link: int, t: float, now: float) -> None:
        """Make sure ``link`` wakes at ``t`` or earlier (but not before ``now``); ``_push`` inlined."""
        wake_at = self.wake_at
        if now <= wake_at[link] <= t:
            return
        wake_at[link] = t
        b = self._buckets.get(t)
        if b is None:
            self._buckets[t] = deque((link,))
            heappush(self._times, t)
        else:
            b.append(link)

    # --- injection --------------------------------------------------------------------------
    def inject(self, msg: Message, nbytes: int, ready_s: float) -> None:
        """Split ``msg`` (``nbytes`` payload) into DL flits sprayed over its paths; ready at ``ready_s``."""
        fabric = self.fabric
        src, dst = msg.src, msg.dst
        P = fabric.n_paths(src, dst)
        split = self._splits.get((nbytes, P))
        if split is None:
            split = self._splits[(nbytes, P)] = self._split(nbytes, P)
        wire, nfl, shares = split
        msg.remaining = wire
        ptr = 0
        if P > 1:
            key = fabric.spray_key(src, dst)
            if self.per_source:
                ptr = self.spray.get(key, 0) % P  # P differs by destination (racks)
            self.spray[key] = (ptr + nfl) % P
        self._enqueue_all(shares, fabric.paths(src, dst, ptr, len(shares)), msg, ready_s)

    def _split(self, nbytes: int, P: int) -> tuple[int, int, tuple]:
        """(wire bytes, DL flits, per-path shares) of an ``nbytes`` message sprayed over P paths.

        A share is (bytes, flits, bytes of its last flit); path i of the round gets every P-th flit,
        so the first ``extra`` paths carry one flit more, and the share holding the message's last
        flit ends short (no padding on the wire)."""
        tl, dl = self.tl, self.dl
        wire = -(-nbytes // tl) * tl if nbytes > tl else tl
        nfl = -(-wire // dl)
        last = wire - dl * (nfl - 1)
        if P == 1 or nfl == 1:
            return wire, nfl, ((wire, nfl, last),)
        base, extra = divmod(nfl, P)
        shares = [(flits * dl, flits, dl) for flits in (base + (1 if i < extra else 0) for i in range(min(nfl, P)))]
        last_i = (nfl - 1) % P
        flits = shares[last_i][1]
        shares[last_i] = ((flits - 1) * dl + last, flits, last)
        return wire, nfl, tuple(shares)

    def _enqueue_all(self, shares, paths, msg: Message, ready: float) -> None:
        """Queue one unit per (bytes, flits, last-flit bytes) share on the first link of its path, in order."""
        queues, busy_until, wake_at, push = self.queues, self.busy_until, self.wake_at, self._push
        now = self.env._now
        for (nbytes, nflits, last), path in zip(shares, paths):
            unit = [ready, msg, path, 0, nbytes, nflits, last]
            link = path[0]
            q = queues[link]
            if q is None:
                q = queues[link] = deque()
            if q and q[-1][READY] > ready:
                self._insert_sorted(q, unit)
            else:
                q.append(unit)
            t = busy_until[link]
            head = q[0][READY]
            if head > t:
                t = head
            if t < now:
                t = now
            w = wake_at[link]
            if not now <= w <= t:
                wake_at[link] = t
                push(t, link)

    @staticmethod
    def _insert_sorted(q: deque, unit: list) -> None:
        # rare: keep FIFO-by-ready order (latencies into a port are normally equal)
        ready = unit[READY]
        i = len(q)
        while i > 0 and q[i - 1][READY] > ready:
            i -= 1
        q.insert(i, unit)

    def _enqueue(self, unit: list) -> None:
        link = unit[PATH][unit[HOP]]
        q = self.queues[link]
        if q is None:
            q = self.queues[link] = deque()
        if q and q[-1][READY] > unit[READY]:
            self._insert_sorted(q, unit)
        else:
            q.append(unit)
        head = q[0][READY]
        t = self.busy_until[link]
        if head > t:
            t = head
        now = self.env._now
        self._ensure_wake(link, t if t > now else now)

    # --- the port, with credits (finite buffers) --------------------------------------------
    def _try_start(self, link: int, now: float) -> None:
        bu = self.busy_until[link]
        if bu > now:
            self._wake_by(link, bu, now)
            return
        q = self.queues[link]
        if not q:
            return
        u = q[0]
        if u[READY] > now:
            self._wake_by(link, u[READY], now)
            return
        dl = self.dl
        if self.flit_mode:
            nfl = 1
            size = dl if u[NFLITS] > 1 else u[LAST]
        else:
            nfl = u[NFLITS]
            size = u[NBYTES]
        msg = u[MSG]
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
                self._wake_by(link, rq[0][0], now)
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
        whole = nfl == u[NFLITS]
        chunk_last = u[LAST] if whole or (self.flit_mode and u[NFLITS] == 1) else dl
        if whole:
            q.popleft()
        else:
            u[NFLITS] -= nfl
            u[NBYTES] -= size
        path = u[PATH]
        hop = u[HOP]
        after = self.after[link]
        if hop > 0:
            # the data leaves the buffer of the previous link as it goes out here
            prev = path[hop - 1]
            self._credit_back(ch, prev, end - chunk_last * inv + self.fabric.credit_return_s[prev], nfl)
        if hop + 1 < len(path):
            first = (dl if nfl > 1 else size) * inv
            if whole:
                u[READY] = now + first + after
                u[HOP] = hop + 1
                self._enqueue(u)
            else:
                self._enqueue([now + first + after, msg, path, hop + 1, size, nfl, chunk_last])
        else:
            arrival = end + after
            self._credit_back(ch, link, arrival + self.fabric.credit_return_s[link], nfl)
            msg.remaining -= size
            if arrival > msg.arrival:
                msg.arrival = arrival
            if msg.remaining <= 0:
                msg.on_arrival(msg)
        if q:
            self._wake_by(link, end, now)

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
        """Run events until a runner sets ``self.stop`` or nothing is left to do."""
        self.stop = False
        # the run allocates one small list per unit (per flit in flit mode) and frees it by
        # reference counting; the cyclic collector would walk the millions of live ones again and
        # again (a third of the optimized mode's time) for nothing, so it pauses while we run
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._loop()
        finally:
            if collecting:
                gc.enable()

    def _loop(self) -> None:
        if self.limited:
            self._run_limited()
        else:
            self._run_unlimited()

    def _run_limited(self) -> None:
        env = self.env
        times, buckets, urgent, callbacks = self._times, self._buckets, self._urgent, self._callbacks
        wake_at = self.wake_at
        try_start = self._try_start
        n = 0
        stop = False
        while times and not stop:
            now = times[0]
            env._now = now
            b = buckets[now]
            while b:
                link = b.popleft()
                n += 1
                if link < 0:
                    cb, arg, urg = callbacks.pop(-link)
                    if urg:
                        urgent[now] -= 1
                    cb(arg)
                else:
                    if wake_at[link] == now:
                        wake_at[link] = inf
                    try_start(link, now)
                if self.stop:
                    stop = True
                    break
            if not b:
                heappop(times)
                del buckets[now]
                urgent.pop(now, None)
        self.events += n

    def _run_unlimited(self) -> None:
        """The port loop without credits, inlined (the hot loop of both modes): ``_try_start``
        without credits, float expressions in its order (same bits), ``_push`` inlined."""
        env = self.env
        times, buckets, urgent, callbacks = self._times, self._buckets, self._urgent, self._callbacks
        wake_at = self.wake_at
        busy_until = self.busy_until
        queues = self.queues
        inv_rate = self.inv_rate
        after_s = self.after
        bytes_sent = self.bytes_sent
        busy_s = self.busy_s
        flit = self.flit_mode
        dl = self.dl
        n = 0
        stop = False
        now = env._now
        while times and not stop:
            now = times[0]
            b = buckets[now]
            while b:
                link = b.popleft()
                n += 1
                if link < 0:
                    env._now = now
                    cb, arg, urg = callbacks.pop(-link)
                    if urg:
                        urgent[now] -= 1
                    cb(arg)
                    if self.stop:
                        stop = True
                        break
                    continue
                if wake_at[link] == now:
                    wake_at[link] = inf
                bu = busy_until[link]
                pq = queues[link]
                if bu > now or not pq or pq[0][0] > now:  # busy, nothing queued, head not ready (READY)
                    if bu > now:
                        self._wake_by(link, bu, now)
                    elif pq:
                        self._wake_by(link, pq[0][0], now)
                    continue
                u = pq[0]
                inv = inv_rate[link]
                path = u[2]  # PATH
                hop = u[3] + 1  # HOP of the next stage
                after = after_s[link]
                if flit and u[5] > 1:  # NFLITS: one DL flit leaves, the unit stays at the head
                    size = dl
                    u[5] -= 1
                    u[4] -= size  # NBYTES
                    ser = size * inv
                    end = now + ser
                    nxt = [end + after, u[1], path, hop, size, 1, size] if hop < len(path) else None
                else:
                    pq.popleft()
                    size = u[4]
                    ser = size * inv
                    end = now + ser
                    if hop < len(path):
                        u[0] = now + ((dl if u[5] > 1 else size) * inv) + after
                        u[3] = hop
                        nxt = u
                    else:
                        nxt = None
                busy_until[link] = end
                bytes_sent[link] += size
                busy_s[link] += ser
                if nxt is not None:
                    nl = path[hop]
                    nq = queues[nl]
                    if nq is None:
                        nq = queues[nl] = deque()
                    ready = nxt[0]
                    if nq and nq[-1][0] > ready:
                        self._insert_sorted(nq, nxt)
                    else:
                        nq.append(nxt)
                    t = busy_until[nl]
                    if nq[0][0] > t:
                        t = nq[0][0]
                    if t < now:
                        t = now
                    if not now <= wake_at[nl] <= t:
                        wake_at[nl] = t
                        wb = buckets.get(t)
                        if wb is None:
                            buckets[t] = deque((nl,))
                            heappush(times, t)
                        else:
                            wb.append(nl)
                else:
                    msg = u[1]
                    arrival = end + after
                    msg.remaining -= size
                    if arrival > msg.arrival:
                        msg.arrival = arrival
                    if msg.remaining <= 0:
                        env._now = now
                        msg.on_arrival(msg)
                        stop = self.stop  # finish this event as below, then stop
                if pq:  # the same push as the downstream one above: _wake_by inlined twice, on purpose
                    if not now <= wake_at[link] <= end:
                        wake_at[link] = end
                        wb = buckets.get(end)
                        if wb is None:
                            buckets[end] = deque((link,))
                            heappush(times, end)
                        else:
                            wb.append(link)
                if stop:
                    break
            if not b:
                heappop(times)
                del buckets[now]
                urgent.pop(now, None)
        env._now = now
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
