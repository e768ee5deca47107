"""Event-driven execution of a plan against a network model (paper 003, Section 4.3, B.4).

Each track (distinct rank behaviour) issues its entries in order, as from one stream. A
compute entry starts when the previous one ends; the first kernel after a collective (and the
first of the step) pays the in-graph launch overhead once per execution window (B.3). A
collective is registered with the network model -- with every concurrent group of its axis --
once all tracks have reached it (``earliest_start_s`` = the latest arrival); when nothing else
can be registered the executor calls ``advance()`` and substitutes the reported end time into
the entries that depend on it. Without HOP-B nothing overlaps a collective, so in decode every
collective blocks all tracks and the step is the sum of kernel, launch and collective times
along the latest-arriving track (B.4).

The executor calls ``network.prepare(plan.demand, world)`` itself (``prepare=False`` leaves it to
the caller); a collective outside the declared demand raises (``check_in_demand``). A completion's
``planning_s`` (online AlltoAllv planning on PCIe) is charged on the critical path and reported
apart from the data movement, under ``planning`` in the breakdown. The same executor runs decode
steps (``gxnet.plan``) and expert-parallel prefill/decode phases (``gxnet.ep_phase``).

Without a trace (every split of a search) a model whose calls are priced independently
(``fabrics.network.protocol.IndependentCalls``) is walked by ``_execute_independent``: the
same numbers, to the bit, with each plan entry priced once and the kernels between collectives
summed once per walk; any other model goes through ``register`` / ``advance`` for every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from fabrics.network.protocol import CollectiveCall, Completion, IndependentCalls, NetworkModel, check_in_demand
from gxnet.plan import BREAKDOWN_KEYS, CollectiveEntry, ExecutionPlan

_NO_ARGS: dict = {}


class CallTiming(NamedTuple):
    """One executed collective: where it sat, when it started, what it cost (s)."""

    name: str  # the plan entry's name (e.g. "dispatch", "combine", a graph node)
    section: str
    region: str
    axis: str
    collective: str
    start_s: float
    communication_s: float  # data movement on the critical path
    planning_s: float  # online planning charged before it
    schedule: str


class TraceEvent(NamedTuple):
    """One timed slice of the Chrome trace: ``track`` is a distinct rank behaviour.

    A NamedTuple (immutable, and several times cheaper to create than a frozen dataclass: a
    Megatron 5T step records ~3,300 of them)."""

    track: str
    name: str
    cat: str  # "compute" | "collective"
    start_s: float
    dur_s: float
    args: dict = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class StepResult:
    decode_step_s: float
    interactivity_tok_s_user: float  # 1 / step
    throughput_tok_s: float  # batch / step
    breakdown_s: dict  # attention, ffn, communication, fixed (launches), other (embedding, LM head)
    memory_bytes_per_rank: int
    collective_time_s: dict  # (region, axis, collective) -> seconds per step
    collective_calls: int
    tracks: tuple
    events: list
    call_log: tuple = ()  # (entry, section, start, communication, planning, schedule) per executed collective

    @property
    def calls(self) -> tuple[CallTiming, ...]:
        """Every executed collective, in order (built on demand: a decode step has hundreds)."""
        return tuple(CallTiming(e.name, sec, e.region, e.axis, e.collective, start, moved, plan_s, sched)
                     for e, sec, start, moved, plan_s, sched in self.call_log)

    def summary(self) -> dict:
        return {
            "decode_step_s": self.decode_step_s,
            "interactivity_tok_s_user": self.interactivity_tok_s_user,
            "throughput_tok_s": self.throughput_tok_s,
            "breakdown_s": dict(self.breakdown_s),
            "memory_bytes_per_rank": self.memory_bytes_per_rank,
            "collective_time_s": [
                {"region": r, "axis": a, "collective": c, "time_s": t}
                for (r, a, c), t in self.collective_time_s.items()],
            "collective_calls": self.collective_calls,
            "tracks": [{"name": t.name, "ranks": t.ranks, "active_experts": t.active_experts} for t in self.tracks],
        }


class _Waiter:
    """Registers calls and advances the network model until a given call has completed."""

    def __init__(self, network: NetworkModel):
        self.network = network
        self.done: dict[int, Completion] = {}

    def wait(self, call_id: int) -> Completion:
        while call_id not in self.done:
            completions = self.network.advance()
            if not completions:
                raise RuntimeError(f"network model advanced without completing pending call {call_id}")
            for c in completions:
                self.done[c.call_id] = c
        return self.done.pop(call_id)


def _run_call(e: CollectiveEntry, key: tuple, call_id: int, earliest: float, section: str, plan: ExecutionPlan,
              waiter: "_Waiter", checked: set, coll_time: dict, breakdown: dict, calls: list) -> tuple[Completion, float]:
    """Register one collective once every track has reached it, wait for its completion and book
    its time; returns the completion and the end of the call."""
    call = CollectiveCall(call_id=call_id, region=e.region, axis=e.axis, collective=e.collective,
                          groups=e.groups, payload_bytes=e.payload_bytes, demand=e.demand)
    if id(e) not in checked:
        check_in_demand(call, plan.demand)
        checked.add(id(e))
    waiter.network.register(call, earliest)
    c = waiter.wait(call_id)
    end = max(c.end_s, earliest)
    moved = end - earliest - c.planning_s
    coll_time[key] = coll_time.get(key, 0.0) + moved
    breakdown["communication"] += moved
    if c.planning_s:
        breakdown["planning"] = breakdown.get("planning", 0.0) + c.planning_s
    calls.append((e, section, earliest, moved, c.planning_s, c.schedule))
    return c, end


def execute(plan: ExecutionPlan, network: NetworkModel, *, prepare: bool = True, trace: bool = True) -> StepResult:
    d = plan.deployment
    if prepare:
        network.prepare(plan.demand, d.world)
    if not trace:
        if isinstance(network, IndependentCalls):
            return _execute_independent(plan, network)
        return _execute_untraced(plan, network)
    launch = d.accelerator.in_graph_launch_s if plan.window_launch_s is None else plan.window_launch_s
    window_floor = plan.window_floor_s  # engines (gxnet.kernels): persistent kernels pay their floor per window
    n = len(plan.tracks)
    names = [t.name for t in plan.tracks]
    t = [0.0] * n
    opens_window = [True] * n
    pending = [dict.fromkeys(("attention", "ffn", "fixed", "kernel_floor", "other"), 0.0) for _ in range(n)]
    breakdown = dict.fromkeys(plan.breakdown_keys, 0.0)
    calls: list[tuple] = []
    coll_time: dict[tuple[str, str, str], float] = {}
    events: list[TraceEvent] = []
    waiter = _Waiter(network)
    checked: set[int] = set()
    compute_args: dict[tuple[int, int], dict] = {}
    call_id = 0

    def settle(i: int) -> None:
        for k, v in pending[i].items():
            if v:
                breakdown[k] += v
        for p in pending:
            for k in p:
                p[k] = 0.0

    for sec in plan.sections:
        for rep in range(sec.repeat):
            for e in sec.entries:
                if isinstance(e, CollectiveEntry):
                    earliest = max(t)
                    settle(t.index(earliest))  # the latest-arriving track is on the critical path
                    c, end = _run_call(e, (e.region, e.axis, e.collective), call_id, earliest, sec.name, plan, waiter,
                                       checked, coll_time, breakdown, calls)
                    call_id += 1
                    if trace:
                        args = {"axis": e.axis, "payload_bytes": e.payload_bytes, "groups": len(e.groups),
                                "ranks": len(e.groups[0]), "schedule": c.schedule, "layer": rep,
                                "section": sec.name}
                        if c.planning_s:
                            args["planning_s"] = c.planning_s
                        start = max(c.start_s, earliest)
                        for i in range(n):
                            events.append(TraceEvent(names[i], f"{e.collective}[{e.axis}]", "collective",
                                                     start, end - start, args))
                    t = [end] * n
                    opens_window = [True] * n
                    continue
                for i in range(n):
                    if opens_window[i]:
                        if trace:
                            events.append(TraceEvent(names[i], "launch", "compute", t[i], launch + window_floor, _NO_ARGS))
                        t[i] += launch + window_floor
                        pending[i]["fixed"] += launch
                        pending[i]["kernel_floor"] += window_floor
                        opens_window[i] = False
                    dur = e.durations_s[i]
                    if trace:
                        key = (id(e), i)
                        args = compute_args.get(key)
                        if args is None:  # static per entry and track: built once, shared by layers
                            args = compute_args[key] = {"region": e.region, "flops": e.flops[i],
                                                        "hbm_bytes": e.hbm_bytes[i], "section": sec.name}
                        events.append(TraceEvent(names[i], e.kernel, "compute", t[i], dur, args))
                    t[i] += dur
                    floor = e.floor_s[i] if e.floor_s else 0.0
                    pending[i][e.category] += dur - floor if floor else dur
                    pending[i]["kernel_floor"] += floor
    step = max(t)
    settle(t.index(step))
    return StepResult(
        decode_step_s=step,
        interactivity_tok_s_user=1.0 / step,
        throughput_tok_s=d.batch / step,
        breakdown_s=breakdown,
        memory_bytes_per_rank=plan.memory_bytes_per_rank,
        collective_time_s=coll_time,
        collective_calls=call_id,
        tracks=plan.tracks,
        events=events,
        call_log=tuple(calls),
    )


_PENDING = ("attention", "ffn", "fixed", "kernel_floor", "other")  # the order ``settle`` adds them in


def _execute_untraced(plan: ExecutionPlan, network: NetworkModel) -> StepResult:
    """``execute`` without a trace (every Helix split of a search): the same float operations on
    each track in the same order, so the same bits, with each section's entries sorted out once
    (not once per layer) and the pending parts as lists. Every track opens a window at the same
    entries (the step start and after each collective), so one flag serves them all."""
    d = plan.deployment
    launch = d.accelerator.in_graph_launch_s if plan.window_launch_s is None else plan.window_launch_s
    window_floor = plan.window_floor_s
    opening = launch + window_floor
    n = len(plan.tracks)
    tracks = range(n)
    slot = {k: i for i, k in enumerate(_PENDING)}
    zeros = (0.0,) * len(_PENDING)
    pend = [list(zeros) for _ in tracks]
    breakdown = dict.fromkeys(plan.breakdown_keys, 0.0)
    calls: list[tuple] = []
    coll_time: dict[tuple[str, str, str], float] = {}
    waiter = _Waiter(network)
    checked: set[int] = set()
    call_id = 0
    t, opens = [0.0] * n, True

    def settle(i: int) -> None:
        for k, v in zip(_PENDING, pend[i]):
            if v:
                breakdown[k] += v
        for p in pend:
            p[:] = zeros

    for sec in plan.sections:
        ops = [(e, (e.region, e.axis, e.collective)) if isinstance(e, CollectiveEntry)
               else (None, slot[e.category], e.durations_s, e.floor_s) for e in sec.entries]
        for _ in range(sec.repeat):
            for op in ops:
                e = op[0]
                if e is None:  # a kernel on every track
                    _, k, durations, floors = op
                    if opens:
                        for i in tracks:
                            t[i] += opening
                            pend[i][2] += launch
                            pend[i][3] += window_floor
                        opens = False
                    for i in tracks:
                        dur = durations[i]
                        t[i] += dur
                        floor = floors[i] if floors else 0.0
                        p = pend[i]
                        p[k] += dur - floor if floor else dur
                        p[3] += floor
                    continue
                earliest = max(t)
                settle(t.index(earliest))  # the latest-arriving track is on the critical path
                _, end = _run_call(e, op[1], call_id, earliest, sec.name, plan, waiter, checked, coll_time,
                                   breakdown, calls)
                call_id += 1
                t, opens = [end] * n, True
    step = max(t)
    settle(t.index(step))
    return StepResult(decode_step_s=step, interactivity_tok_s_user=1.0 / step, throughput_tok_s=d.batch / step,
                      breakdown_s=breakdown, memory_bytes_per_rank=plan.memory_bytes_per_rank,
                      collective_time_s=coll_time, collective_calls=call_id, tracks=plan.tracks, events=[],
                      call_log=tuple(calls))


def _execute_independent(plan: ExecutionPlan, network: IndependentCalls) -> StepResult:
    """``_execute_untraced`` on a model that prices calls independently (``IndependentCalls``: a
    call completes at its start plus a price of the call alone, with no planning time), with the
    same float operations in the same order, so the same bits, and less done per layer:

    * the model is asked once per plan entry and walk (``_entry_price``); each call's end and
      time are computed here as ``register`` and ``_run_call`` compute them, and every call's
      schedule is booked in the model's report (at the end, in first-call order: the same dict);
    * every collective settles and clears the pending parts of all tracks, and every track opens
      a window after it, so the kernels between two collectives (a *segment*: runs of kernels,
      possibly across a layer or section boundary) add the same parts to zeros every time: they
      are summed once per distinct segment, and each track's clock goes through the segment's
      durations in order (``_Segments``)."""
    d = plan.deployment
    launch = d.accelerator.in_graph_launch_s if plan.window_launch_s is None else plan.window_launch_s
    n = len(plan.tracks)
    segments = _Segments(n, launch, plan.window_floor_s)
    known = segments.known
    breakdown = dict.fromkeys(plan.breakdown_keys, 0.0)
    calls: list[tuple] = []
    coll_time: dict[tuple[str, str, str], float] = {}
    used: dict[tuple[str, str, str], str] = {}
    communication = breakdown["communication"]
    call_id = 0
    start, seg = 0.0, ()  # every track's clock is ``start`` at the step start and after each collective
    for sec in plan.sections:
        head, ops, tail = segments.layout(sec)
        name = sec.name
        for _ in range(sec.repeat):
            if not ops:  # kernels only: they join the next collective's segment
                seg += head
                continue
            for op in ops:
                e, key, price, segment = op
                if segment is None:  # the section's first collective: the kernels since the last one
                    runs = seg + head
                    segment = known.get(runs) or segments.segment(runs)
                durations, parts = segment
                if n == 2:  # max() and list.index() of the general case, on two clocks
                    x = y = start
                    for dur in durations[0]:  # each track through the segment's kernels, in order
                        x += dur
                    for dur in durations[1]:
                        y += dur
                    earliest, latest = (y, parts[1]) if y > x else (x, parts[0])
                else:
                    t = _clocks(durations, start)
                    earliest = max(t)
                    latest = parts[t.index(earliest)]
                for k, v in latest:  # the latest-arriving track is on the critical path
                    breakdown[k] += v
                if price is None:
                    price = op[2] = _entry_price(network, plan, e, call_id)
                duration, schedule = price
                start = earliest + duration  # _run_call's arithmetic: max(end, earliest), planning_s = 0
                if earliest > start:
                    start = earliest
                moved = start - earliest - 0.0
                coll_time[key] = coll_time.get(key, 0.0) + moved
                communication += moved
                used[key] = schedule
                calls.append((e, name, earliest, moved, 0.0, schedule))
                call_id += 1
            seg = tail
    t, parts = segments.walk(seg, start)
    step = max(t)
    for k, v in parts[t.index(step)]:
        breakdown[k] += v
    breakdown["communication"] = communication
    for key, schedule in used.items():
        network.book(key, schedule)
    return StepResult(decode_step_s=step, interactivity_tok_s_user=1.0 / step, throughput_tok_s=d.batch / step,
                      breakdown_s=breakdown, memory_bytes_per_rank=plan.memory_bytes_per_rank,
                      collective_time_s=coll_time, collective_calls=call_id, tracks=plan.tracks, events=[],
                      call_log=tuple(calls))


def _entry_price(network: IndependentCalls, plan: ExecutionPlan, e: CollectiveEntry, call_id: int) -> tuple[float, str]:
    """(duration s, schedule) of the entry's call, checked against the demand as ``_run_call``
    checks it."""
    call = CollectiveCall(call_id=call_id, region=e.region, axis=e.axis, collective=e.collective,
                          groups=e.groups, payload_bytes=e.payload_bytes, demand=e.demand)
    check_in_demand(call, plan.demand)
    return network.call_price(call)


def _clocks(durations: list, start: float) -> list[float]:
    """Each track's clock from ``start`` through its durations, in order."""
    out = []
    for seq in durations:
        x = start
        for dur in seq:
            x += dur
        out.append(x)
    return out


class _Segments:
    """The kernels of one walk as runs and segments (``_execute_independent``).

    ``layout(section)``, once per walk: ``(head, ops, tail)``, the runs of consecutive kernels
    (by number) before the section's first collective and after its last, and per collective
    ``[entry, demand key, price or None, segment]``: the segment of the kernels since the
    previous collective of the section (None for the first, whose kernels start in the previous
    layer or section). ``walk(runs, start)``: the track clocks after the segment made of
    ``runs``, from ``start`` (the traced loop's additions: the window opening, then each kernel),
    and per track the segment's nonzero pending parts in ``_PENDING`` order, as ``settle`` adds
    them."""

    def __init__(self, n: int, launch: float, window_floor: float):
        self.tracks = range(n)
        self.launch, self.window_floor = launch, window_floor
        self.opening = launch + window_floor
        self.runs: list[list] = []  # run number -> its kernel entries
        self._layouts: dict[int, tuple] = {}
        self.known: dict[tuple, tuple] = {(): ([()] * n, [()] * n)}  # runs -> (durations, parts) per track

    def layout(self, sec) -> tuple[tuple, list, tuple]:
        hit = self._layouts.get(id(sec))
        if hit is None:
            head, ops, runs, after_kernel = None, [], [], False  # runs: since the last collective
            for e in sec.entries:
                if isinstance(e, CollectiveEntry):
                    segment = None if head is None else self.segment(tuple(runs))
                    head = tuple(runs) if head is None else head
                    ops.append([e, (e.region, e.axis, e.collective), None, segment])
                    runs, after_kernel = [], False
                elif after_kernel:
                    self.runs[runs[-1]].append(e)
                else:
                    runs.append(len(self.runs))
                    self.runs.append([e])
                    after_kernel = True
            hit = (tuple(runs), [], ()) if head is None else (head, ops, tuple(runs))
            self._layouts[id(sec)] = hit
        return hit

    def walk(self, runs: tuple, start: float) -> tuple[list, list]:
        durations, parts = self.segment(runs)
        return _clocks(durations, start), parts

    def segment(self, runs: tuple) -> tuple[list, list]:
        """Per track: (opening, kernel durations...) and the pending parts summed from zero in
        the traced loop's order; kept in ``known`` (no kernels: no window opens)."""
        hit = self.known.get(runs)
        if hit is not None:
            return hit
        kernels = [e for r in runs for e in self.runs[r]]
        slot = {k: i for i, k in enumerate(_PENDING)}
        durations, parts = [], []
        for i in self.tracks:
            p = [0.0] * len(_PENDING)
            p[2] += self.launch
            p[3] += self.window_floor
            for e in kernels:
                dur = e.durations_s[i]
                floor = e.floor_s[i] if e.floor_s else 0.0
                p[slot[e.category]] += dur - floor if floor else dur
                p[3] += floor
            durations.append((self.opening, *(e.durations_s[i] for e in kernels)))
            parts.append(tuple((k, v) for k, v in zip(_PENDING, p) if v))
        self.known[runs] = durations, parts
        return durations, parts
