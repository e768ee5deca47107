"""Simlette layer 3: executing a collective schedule on the engine (paper 003, Section 3.4, C.1).

Phase dependency, per rank (precise form of "phases are serialised"):

* a rank enters phase 0 when its call starts;
* on entering phase k at time t it injects all its phase-k transfers, in the order the schedule
  lists them (they become ready at its first port after the source latency);
* it enters phase k+1 at max(t, last arrival of the phase-k transfers *into* it); a rank that
  receives nothing in phase k moves on at t, right after injecting its own phase-k sends;
* it is done when it enters phase h; the call completes when all ranks of all its groups are
  done (persistent kernels: complete when the last data arrives, Appendix C.4).

Under contention-free conditions every rank of a symmetric schedule enters phase k+1 at the same
time, which is the phase barrier the analytical model assumes (Eq. 10). Zero-byte and self
transfers are skipped. Group-local rank i runs on accelerator ``groups[g][i]`` (layer 2: worker
allocation is the mapping the caller passes in).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from collectives.schedule import Schedule
from fabrics.network.simlette.engine import RESPONSE, Engine, Message


@dataclass(frozen=True, slots=True)
class Plan:
    """Per phase and local rank: the (dst, bytes) sends in order and the count of inbound transfers."""

    n_ranks: int
    sends: tuple[tuple[tuple[tuple[int, int], ...], ...], ...]
    incount: tuple[tuple[int, ...], ...]


def plan_of(schedule: Schedule, sigma_bytes: int) -> Plan:
    n = schedule.n_ranks
    sends, incount = [], []
    size_of: dict[tuple[int, int], int] = {}  # few distinct fractions; Fraction arithmetic is slow
    for phase in schedule.phases:
        out = [[] for _ in range(n)]
        cnt = [0] * n
        for tr in phase.transfers:
            f = tr.fraction
            key = (f.numerator, f.denominator)
            nbytes = size_of.get(key)
            if nbytes is None:
                nbytes = size_of[key] = ceil(f * sigma_bytes)
            if nbytes <= 0 or tr.src == tr.dst:
                continue
            out[tr.src].append((tr.dst, nbytes))
            cnt[tr.dst] += 1
        sends.append(tuple(tuple(o) for o in out))
        incount.append(tuple(cnt))
    return Plan(n_ranks=n, sends=tuple(sends), incount=tuple(incount))


def plan_of_arrays(phases, n_ranks: int, sigma_bytes: int) -> Plan:
    """The same plan from ``fabrics.scaleup.native.PhaseArrays`` (the analytical fabric model's form of a
    native or planned schedule); transfers keep their order. Fractions are floats there, so the
    byte count is rounded up with a tolerance of a millionth of a byte (exact fractions of sigma
    land on integers)."""
    sends, incount = [], []
    size_of: dict[float, int] = {}
    for ph in phases:
        out = [[] for _ in range(n_ranks)]
        cnt = [0] * n_ranks
        for src, dst, f in zip(ph.src.tolist(), ph.dst.tolist(), ph.fraction.tolist()):
            nbytes = size_of.get(f)
            if nbytes is None:
                nbytes = size_of[f] = ceil(f * sigma_bytes - 1e-6)
            if nbytes <= 0 or src == dst:
                continue
            out[src].append((dst, nbytes))
            cnt[dst] += 1
        sends.append(tuple(tuple(o) for o in out))
        incount.append(tuple(cnt))
    return Plan(n_ranks=n_ranks, sends=tuple(sends), incount=tuple(incount))


class CallRun:
    """One collective call (all its groups) in flight on an engine."""

    def __init__(self, engine: Engine, plan: Plan, groups: tuple[tuple[int, ...], ...], start_s: float, on_done,
                 tag=None, barrier: bool = False):
        self.engine = engine
        self.plan = plan
        self.groups = groups
        self.start_s = start_s
        self.on_done = on_done
        self.tag = tag
        self.h = len(plan.sends)
        n = plan.n_ranks
        self.phase = [[-1] * n for _ in groups]
        self.entered = [[0.0] * n for _ in groups]
        self.remaining = [[list(plan.incount[k]) for k in range(self.h)] for _ in groups]
        self.arrival = [[[0.0] * n for _ in range(self.h)] for _ in groups]
        self.pending_ranks = n * len(groups)
        self.end_s = start_s
        self.responses = engine.params.write_responses
        self.src_latency = engine.params.source_latency_s
        # group barrier between phases (native EPS kernels): ranks done with phase k and the
        # latest arrival among them, per group
        self.barrier = barrier
        self.waiting = [[0] * self.h for _ in groups]
        self.latest = [[0.0] * self.h for _ in groups]
        engine.at(start_s, self._start, priority=0)  # URGENT: call starts precede port events at equal times

    def _start(self, _arg) -> None:
        for g in range(len(self.groups)):
            for r in range(self.plan.n_ranks):
                self._enter(g, r, 0)

    def _enter_ev(self, grk) -> None:
        self._enter(*grk)

    def _enter(self, g: int, r: int, k: int) -> None:
        eng = self.engine
        now = eng.env._now
        self.phase[g][r] = k
        self.entered[g][r] = now
        if k == self.h:
            self.pending_ranks -= 1
            if now > self.end_s:
                self.end_s = now
            if self.pending_ranks == 0:
                self.on_done(self)
            return
        accs = self.groups[g]
        src = accs[r]
        ready = now + self.src_latency
        on_arrival = self._arrived
        for dst, nbytes in self.plan.sends[k][r]:
            eng.inject(Message(src, accs[dst], on_arrival, (g, dst, k)), nbytes, ready)
        if self.remaining[g][k][r] == 0:
            self._phase_done(g, r, k, self.arrival[g][k][r], now)

    def _phase_done(self, g: int, r: int, k: int, t: float, now: float) -> None:
        """Rank r of group g has sent its phase-k data and received all of its own at t."""
        if t < now:
            t = now
        if not self.barrier:
            self.engine.at(t, self._enter_ev, (g, r, k + 1))
            return
        if t > self.latest[g][k]:
            self.latest[g][k] = t
        self.waiting[g][k] += 1
        if self.waiting[g][k] == self.plan.n_ranks:
            t = self.latest[g][k]
            for rr in range(self.plan.n_ranks):
                self.engine.at(t, self._enter_ev, (g, rr, k + 1))

    def _arrived(self, msg: Message) -> None:
        g, r, k = msg.token
        arr = self.arrival[g][k]
        if msg.arrival > arr[r]:
            arr[r] = msg.arrival
        rem = self.remaining[g][k]
        rem[r] -= 1
        if rem[r] == 0 and self.phase[g][r] == k:
            self._phase_done(g, r, k, arr[r], self.engine.env._now)
        if self.responses:
            # posted write completion: one TL flit back on the response channel; nobody waits for it
            self.engine.inject(Message(msg.dst, msg.src, _ignore, None, RESPONSE), 1, msg.arrival)


def _ignore(msg: Message) -> None:
    return None
