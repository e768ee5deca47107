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
    ports: list[set] = [set() for _ in range(n)]
    n_transfers = 0
    frac_of: dict[int, Fraction] = {}

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
        held = _initial_blocks(collective, form, n, pieces)
        n_values = n if form == "contributions" else schedule.n_chunks
        values = rng.integers(0, 1000, size=(n_values, elements), dtype=np.int64)
    else:
        raise ScheduleError(f"unknown buffer form {form!r}")

    for k, phase in enumerate(schedule.phases):
        counts: dict[tuple[int, int], int] = {}
        if form in ("partial", "moves"):
            src_l, dst_l, ch_l, red_l = [], [], [], []
        else:
            additions = []
        for t in phase.transfers:
            n_transfers += 1
            if t.edge not in gens:
                raise ScheduleError(f"phase {k}: edge {t.edge} is not a generator of {topology.describe()}")
            if not (0 <= t.src < n) or topology.add(t.src, t.edge) != t.dst:
                raise ScheduleError(f"phase {k}: {t.src}->{t.dst} is not the logical edge {t.edge}")
            nc = len(t.chunks)
            want = frac_of.get(nc)
            if want is None:
                want = frac_of[nc] = cf * nc
            if t.fraction != want:
                raise ScheduleError(
                    f"phase {k}: transfer {t.src}->{t.dst} declares {t.fraction} sigma but carries "
                    f"{len(t.chunks)} chunks of {cf}"
                )
            key = (t.src, t.edge)
            counts[key] = counts.get(key, 0) + nc
            ports[t.src].add(t.edge)
            ports[t.dst].add(topology.sub(0, t.edge))
            if form in ("partial", "moves"):
                src_l.extend([t.src] * nc)
                dst_l.extend([t.dst] * nc)
                ch_l.extend(t.chunks)
                red_l.extend([t.reduce] * nc)
            else:
                if t.reduce:
                    raise ScheduleError(f"phase {k}: a {form} schedule cannot reduce in transit")
                if not held[t.src].issuperset(t.chunks):
                    missing = sorted(set(t.chunks) - held[t.src])[:5]
                    raise ScheduleError(f"phase {k}: rank {t.src} sends blocks {missing} it does not hold")
                additions.append((t.dst, t.chunks))
        if form == "partial" and src_l:
            acc = _apply_partial(acc, np.array(src_l), np.array(dst_l), np.array(ch_l, dtype=np.int64),
                                 np.array(red_l, dtype=bool), k)
        elif form == "moves" and src_l:
            src_a, ch_a = np.array(src_l), np.array(ch_l, dtype=np.int64)
            if np.any(np.array(red_l)):
                raise ScheduleError(f"phase {k}: an all-to-all cannot reduce in transit")
            wrong = loc[ch_a] != src_a
            if wrong.any():
                i = int(np.argmax(wrong))
                raise ScheduleError(f"phase {k}: rank {src_a[i]} sends block {ch_a[i]} held by rank {loc[ch_a[i]]}")
            if np.bincount(ch_a, minlength=1).max() > 1:
                raise ScheduleError(f"phase {k}: a block is sent twice in one phase")
            loc[ch_a] = np.array(dst_l)
        elif form not in ("partial", "moves"):
            for dst, chunks in additions:
                held[dst].update(chunks)
        peak = max(counts.values()) if counts else 0
        phase_volumes.append(cf * peak)
        if keep_edge_loads:
            loads_out.append({key: cf * c for key, c in counts.items()})

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
        u=max(len(p) for p in ports),
        transfers=n_transfers,
        phase_volumes=tuple(phase_volumes),
        edge_loads=tuple(loads_out),
    )


def _apply_partial(acc, src, dst, ch, red, k):
    new = acc.copy()
    store = ~red
    if store.any():
        keys = dst[store] * acc.shape[1] + ch[store]
        if np.bincount(keys, minlength=1).max() > 1:
            raise ScheduleError(f"phase {k}: two transfers overwrite the same chunk of one rank")
        if red.any():
            rkeys = dst[red] * acc.shape[1] + ch[red]
            if np.intersect1d(keys, rkeys).size:
                raise ScheduleError(f"phase {k}: a chunk is both overwritten and reduced in one phase")
        new[dst[store], ch[store]] = acc[src[store], ch[store]]
    if red.any():
        np.add.at(new, (dst[red], ch[red]), acc[src[red], ch[red]])
    return new


def _initial_blocks(collective, form, n, pieces):
    if form == "contributions":
        return [{r} for r in range(n)]
    if collective == "allgather":
        return [{p * n + r for p in range(pieces)} for r in range(n)]
    if collective == "alltoall":
        return [{(p * n + s) * n + d for p in range(pieces) for d in range(n)} for s in range(n)]
    raise ScheduleError(f"blocks form is not defined for {collective}")


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
        for r in range(n):
            got = values[np.fromiter(sorted(held[r]), dtype=np.int64)].sum(axis=0)
            if len(held[r]) != n or not np.array_equal(got, total):
                raise ScheduleError(f"all-reduce: rank {r} holds {len(held[r])} of {n} contributions")
        return
    for r in range(n):
        if collective == "allgather":
            need = np.arange(n * pieces, dtype=np.int64)  # output buffer: every rank's block
        else:  # alltoall: block (s, r) of every source s (the transposed blocks)
            need = np.array([(p * n + s) * n + r for p in range(pieces) for s in range(n)], dtype=np.int64)
        missing = set(need.tolist()) - held[r]
        if missing:
            raise ScheduleError(f"{collective}: rank {r} misses blocks {sorted(missing)[:5]}")
        out = values[need]  # the assembled receive buffer
        if out.shape[0] != need.size:
            raise ScheduleError(f"{collective}: rank {r} receive buffer has the wrong size")
