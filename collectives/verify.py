"""Data-flow executor: runs a ``Schedule`` on real per-rank numpy buffers (paper 003, Appendix
A.2 'Binding the cost model to execution', C.2).

It checks, phase by phase, that every transfer uses an existing logical edge and only sends data
its sender holds at the start of the phase (phases are synchronous, Eq. 10's assumption), and
at the end that the collective means what it should:

- all-reduce: every rank holds the exact element-wise sum of all inputs (integer data, so
  "exact" is exact; a double-counted contribution changes the result);
- reduce-scatter: rank r holds the exact sum of everyone's chunk r;
- all-gather: every rank holds every rank's block; all-to-all: rank d holds block (s, d) of
  every s (the transposed blocks).

Meanwhile it counts bytes (as exact fractions of sigma) per logical edge (sender, generator)
per phase, and returns the executed h (phases), v (sum over phases of the most loaded edge,
Eq. 10) and u (logical ports a rank drives, sending or receiving).

Buffer forms (``schedule.meta['form']``): ``partial`` — chunk c of a rank's running partial
sum, ``reduce=True`` adds, ``False`` overwrites; ``blocks`` — immutable blocks identified by id
that ranks forward (gathers, all-to-all); ``contributions`` — all-reduce by forwarding the
unreduced inputs (one-shot), each block is one rank's whole input, summed locally at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from itertools import chain
from operator import attrgetter

import numpy as np

from collectives.schedule import Schedule


class ScheduleError(AssertionError):
    """The schedule is wrong (a bug in a schedule builder, not a user error)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionReport:
    h: int
    v: Fraction  # multiples of sigma
    u: int
    transfers: int
    phase_volumes: tuple[Fraction, ...]  # most loaded edge per phase
    edge_loads: tuple[dict, ...] = ()  # per phase {(src, edge): Fraction}, only if requested


def execute(schedule: Schedule, topology, *, seed: int = 0, elements: int = 2,
            keep_edge_loads: bool = False) -> ExecutionReport:
    meta = schedule.meta
    form = meta.get("form", "partial")
    cf = Fraction(meta.get("chunk_fraction", Fraction(1, schedule.n_chunks)))
    pieces = int(meta.get("pieces", 1))
    n = schedule.n_ranks
    if n != topology.n_ranks:
        raise ScheduleError(f"schedule for {n} ranks run on a topology of {topology.n_ranks}")
    gens = set(topology.generators)
    rng = np.random.default_rng(seed)
    collective = schedule.collective

    phase_volumes: list[Fraction] = []
    loads_out: list[dict] = []
    n_transfers = 0

    if form == "partial":
        acc = rng.integers(0, 1000, size=(n, schedule.n_chunks, elements), dtype=np.int64)
        total = acc.sum(axis=0)
    elif form == "blocks" and collective == "alltoall":
        # all-to-all blocks *move*: each has one location, so holdings are one array
        form = "moves"
        block_ids = np.arange(schedule.n_chunks, dtype=np.int64)
        loc = (block_ids // n) % n  # block (piece*N + s)*N + d starts at s
        values = rng.integers(0, 1000, size=(schedule.n_chunks, elements), dtype=np.int64)
        send_buf = values.copy()
    elif form in ("blocks", "contributions"):
        n_values = n if form == "contributions" else schedule.n_chunks
        held = _initial_blocks(collective, form, n, pieces, n_values)
        values = rng.integers(0, 1000, size=(n_values, elements), dtype=np.int64)
    else:
        raise ScheduleError(f"unknown buffer form {form!r}")

    gens_arr = np.fromiter(gens, np.int64, len(gens))
    port_stride = max(n, int(gens_arr.max()) + 1) if len(gens_arr) else n  # port ids: generators, their inverses
    port_codes: list[np.ndarray] = []  # rank * port_stride + port, per phase (unique)
    for k, phase in enumerate(schedule.phases):
        tr = phase.transfers
        if not tr:
            phase_volumes.append(cf * 0)
            if keep_edge_loads:
                loads_out.append({})
            continue
        n_transfers += len(tr)
        src, dst, edge, chunks, nc = _columns(tr)
        first = _first_bad_transfer(k, tr, src, dst, edge, nc, gens_arr, topology, n, cf)
        ch_c = np.fromiter(chain.from_iterable(chunks), np.int64, int(nc.sum()))  # every chunk id sent, in order
        if form in ("blocks", "contributions"):
            # an earlier transfer's holding error comes before a later one's link or size error
            arrived = _blocks_of_phase(k, tr, held, form, src, dst, ch_c, nc, len(tr) if first is None else first[0])
        if first is not None:
            raise ScheduleError(first[1])
        keys = src * port_stride + edge
        uniq, inv = np.unique(keys, return_inverse=True)
        sums = np.bincount(inv, weights=nc).astype(np.int64)  # chunks per logical edge (sender, generator)
        port_codes.append(np.unique(np.concatenate((keys, dst * port_stride + topology.sub(0, edge)))))
        if form in ("partial", "moves"):
            src_c, dst_c = np.repeat(src, nc), np.repeat(dst, nc)
            red_c = np.repeat(np.fromiter(map(_REDUCE, tr), bool, len(tr)), nc)
        if form == "partial":
            acc = _apply_partial(acc, src_c, dst_c, ch_c, red_c, k)
        elif form == "moves":
            if red_c.any():
                raise ScheduleError(f"phase {k}: an all-to-all cannot reduce in transit")
            wrong = loc[ch_c] != src_c
            if wrong.any():
                i = int(np.argmax(wrong))
                raise ScheduleError(f"phase {k}: rank {src_c[i]} sends block {ch_c[i]} held by rank {loc[ch_c[i]]}")
            if np.bincount(ch_c, minlength=1).max() > 1:
                raise ScheduleError(f"phase {k}: a block is sent twice in one phase")
            loc[ch_c] = dst_c
        else:
            held[arrived] = True  # after the phase: what arrives is sent on from the next phase
        phase_volumes.append(cf * int(sums.max()))
        if keep_edge_loads:
            loads_out.append({(int(key) // port_stride, int(key) % port_stride): cf * int(c) for key, c in zip(uniq, sums)})

    if form == "partial":
        _check_partial(collective, acc, total, n, pieces)
    elif form == "moves":
        dst_of = block_ids % n
        misplaced = np.nonzero(loc != dst_of)[0]
        if misplaced.size:
            b = int(misplaced[0])
            raise ScheduleError(f"alltoall: block {b} ends at rank {loc[b]}, not at its destination {dst_of[b]}")
        # assemble every rank's receive buffer from the blocks that arrived: the transpose
        order = np.lexsort((block_ids // n % n, block_ids // (n * n), loc))
        recv = values[order].reshape(n, -1, elements)
        expect = send_buf[np.argsort(dst_of, kind="stable")].reshape(n, -1, elements)
        if not np.array_equal(np.sort(recv, axis=1), np.sort(expect, axis=1)):
            raise ScheduleError("alltoall: receive buffers are not the transposed send buffers")
    else:
        _check_blocks(collective, form, held, values, n, pieces)
    return ExecutionReport(
        h=sum(1 for p in schedule.phases if p.transfers),
        v=sum(phase_volumes, Fraction(0)),
        u=_most_ports(port_codes, port_stride),
        transfers=n_transfers,
        phase_volumes=tuple(phase_volumes),
        edge_loads=tuple(loads_out),
    )


_SRC, _DST, _EDGE, _CHUNKS, _FRACTION, _REDUCE = map(attrgetter, ("src", "dst", "edge", "chunks", "fraction", "reduce"))


def _columns(transfers):
    """A phase's transfers as columns: sources, destinations, edges, chunk tuples, chunk counts."""
    m = len(transfers)
    chunks = list(map(_CHUNKS, transfers))
    return (np.fromiter(map(_SRC, transfers), np.int64, m), np.fromiter(map(_DST, transfers), np.int64, m),
            np.fromiter(map(_EDGE, transfers), np.int64, m), chunks, np.fromiter(map(len, chunks), np.int64, m))


def _first_bad_transfer(k, transfers, src, dst, edge, nc, gens_arr, topology, n, cf):
    """(index, message) of the first transfer that uses a non-generator edge, a link that is not
    that edge, or declares other bytes than it carries (checked in this order); None if none."""
    not_gen = ~np.isin(edge, gens_arr)
    in_range = (src >= 0) & (src < n)
    not_link = ~in_range | (topology.add(np.where(in_range, src, 0), edge) != dst)
    # builders share one Fraction object per size, so each distinct object is checked once: it
    # must be a whole number of chunks, the number its transfers carry
    fractions = list(map(_FRACTION, transfers))
    ids, first_of, inv = np.unique(np.fromiter(map(id, fractions), np.int64, len(fractions)),
                                   return_index=True, return_inverse=True)
    declared = np.empty(len(ids), dtype=np.int64)
    for u, i in enumerate(first_of.tolist()):
        try:
            chunks = Fraction(fractions[i]) / cf
        except (TypeError, ValueError):  # not a number of sigma at all (e.g. NaN)
            declared[u] = -1
            continue
        declared[u] = chunks.numerator if chunks.denominator == 1 else -1
    bad_size = declared[inv] != nc
    bad = np.flatnonzero(not_gen | not_link | bad_size)
    if not bad.size:
        return None
    i = int(bad[0])
    t = transfers[i]
    if not_gen[i]:
        return i, f"phase {k}: edge {t.edge} is not a generator of {topology.describe()}"
    if not_link[i]:
        return i, f"phase {k}: {t.src}->{t.dst} is not the logical edge {t.edge}"
    return i, (f"phase {k}: transfer {t.src}->{t.dst} declares {t.fraction} sigma but carries "
               f"{len(t.chunks)} chunks of {cf}")


def _blocks_of_phase(k, transfers, held, form, src, dst, blk, nc, upto):
    """(receivers, blocks) index arrays of a block-forwarding phase, each transfer checked to
    send only blocks its sender holds at the start of the phase and never to reduce; of the first
    ``upto`` transfers, the first that does not is reported."""
    n_blocks = held.shape[1]
    senders = np.repeat(src, nc)
    known = (blk >= 0) & (blk < n_blocks)
    has = np.zeros(len(blk), dtype=bool)
    has[known] = held[senders[known], blk[known]]
    lacking = np.zeros(len(transfers), dtype=bool)
    lacking[np.repeat(np.arange(len(transfers)), nc)[~has]] = True
    reduces = np.fromiter(map(_REDUCE, transfers), bool, len(transfers))
    bad = np.flatnonzero((reduces | lacking)[:upto])
    if bad.size:
        t = transfers[int(bad[0])]
        if t.reduce:
            raise ScheduleError(f"phase {k}: a {form} schedule cannot reduce in transit")
        missing = sorted({c for c in t.chunks if not (0 <= c < n_blocks and held[t.src, c])})[:5]
        raise ScheduleError(f"phase {k}: rank {t.src} sends blocks {missing} it does not hold")
    return np.repeat(dst, nc), blk


def _most_ports(port_codes, port_stride) -> int:
    """The most logical ports (generators sent on or received from) any rank drives."""
    if not port_codes:
        return 0
    codes = np.unique(np.concatenate(port_codes))
    return int(np.bincount(codes // port_stride).max())


def _apply_partial(acc, src, dst, ch, red, k):
    """One synchronous phase on the partial sums, in place: every value sent is read before any
    is written, so a phase sees the buffers as they were at its start."""
    store = ~red
    sent = acc[src, ch]  # a copy: the values at the start of the phase
    if store.any():
        keys = dst[store] * acc.shape[1] + ch[store]
        if np.bincount(keys, minlength=1).max() > 1:
            raise ScheduleError(f"phase {k}: two transfers overwrite the same chunk of one rank")
        if red.any():
            rkeys = dst[red] * acc.shape[1] + ch[red]
            if np.intersect1d(keys, rkeys).size:
                raise ScheduleError(f"phase {k}: a chunk is both overwritten and reduced in one phase")
        acc[dst[store], ch[store]] = sent[store]
    if red.any():
        np.add.at(acc, (dst[red], ch[red]), sent[red])
    return acc


def _initial_blocks(collective, form, n, pieces, n_blocks):
    """Which blocks each rank holds before the first phase: (ranks x blocks) booleans."""
    held = np.zeros((n, n_blocks), dtype=bool)
    ranks = np.arange(n)
    if form == "contributions":
        held[ranks, ranks] = True
    elif collective == "allgather":
        for p in range(pieces):
            held[ranks, p * n + ranks] = True
    elif collective == "alltoall":
        for p in range(pieces):
            for d in range(n):
                held[ranks, (p * n + ranks) * n + d] = True
    else:
        raise ScheduleError(f"blocks form is not defined for {collective}")
    return held


def _check_partial(collective, acc, total, n, pieces):
    if collective == "allreduce":
        bad = np.nonzero((acc != total[None]).any(axis=(1, 2)))[0]
        if bad.size:
            raise ScheduleError(f"all-reduce: ranks {bad[:5].tolist()} do not hold the exact sum")
    elif collective == "reducescatter":
        for r in range(n):
            owned = [p * n + r for p in range(pieces)]
            if not np.array_equal(acc[r, owned], total[owned]):
                raise ScheduleError(f"reduce-scatter: rank {r} does not hold the exact sum of its chunk")
    else:
        raise ScheduleError(f"partial form is not defined for {collective}")


def _check_blocks(collective, form, held, values, n, pieces):
    if form == "contributions":  # one-shot all-reduce: sum what arrived, locally
        total = values.sum(axis=0)
        counts = held.sum(axis=1)
        got = held.astype(np.int64) @ values  # each rank's sum of the contributions it holds (exact)
        bad = np.flatnonzero((counts != n) | (got != total[None]).any(axis=1))
        if bad.size:
            r = int(bad[0])
            raise ScheduleError(f"all-reduce: rank {r} holds {counts[r]} of {n} contributions")
        return
    for r in range(n):
        if collective == "allgather":
            need = np.arange(n * pieces, dtype=np.int64)  # output buffer: every rank's block
        else:  # alltoall: block (s, r) of every source s (the transposed blocks)
            need = np.array([(p * n + s) * n + r for p in range(pieces) for s in range(n)], dtype=np.int64)
        absent = need[(need >= held.shape[1]) | ~held[r, np.minimum(need, held.shape[1] - 1)]]
        if absent.size:
            raise ScheduleError(f"{collective}: rank {r} misses blocks {absent[:5].tolist()}")
        out = values[need]  # the assembled receive buffer
        if out.shape[0] != need.size:
            raise ScheduleError(f"{collective}: rank {r} receive buffer has the wrong size")
