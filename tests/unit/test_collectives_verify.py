"""Unit tests for the data-flow executor (collectives.verify): it must catch broken schedules."""

import dataclasses
from fractions import Fraction

import pytest

from collectives.schedule import Phase, Transfer
from collectives.schedules import lookup
from collectives.topology import block_fold, hypercube, with_folds
from collectives.verify import ScheduleError, execute


def _mutate(schedule, phase_idx, fn):
    phases = list(schedule.phases)
    phases[phase_idx] = Phase(transfers=tuple(fn(list(phases[phase_idx].transfers))))
    return dataclasses.replace(schedule, phases=tuple(phases))


def test_report_counts_phases_volume_ports():
    t = hypercube(3)
    r = execute(lookup("allreduce", "recursive_doubling").build(t), t, keep_edge_loads=True)
    assert (r.h, r.v, r.u) == (3, Fraction(3), 3)
    assert r.transfers == 24
    assert r.phase_volumes == (1, 1, 1)
    assert r.edge_loads[0][(0, 1)] == 1


def test_dropped_transfer_breaks_allreduce():
    t = hypercube(3)
    s = _mutate(lookup("allreduce", "recursive_doubling").build(t), 1, lambda ts: ts[1:])
    with pytest.raises(ScheduleError, match="exact sum"):
        execute(s, t)


def test_double_counting_is_detected():
    t = hypercube(3)
    s = lookup("allreduce", "recursive_doubling").build(t)
    # run phase 0 twice: every contribution is counted twice
    s = dataclasses.replace(s, phases=(s.phases[0],) + s.phases)
    with pytest.raises(ScheduleError):
        execute(s, t)


def test_transfer_over_a_missing_edge_is_rejected():
    t = hypercube(3)
    bad = Transfer(src=0, dst=3, edge=3, fraction=Fraction(1), chunks=(0,), reduce=True)
    s = _mutate(lookup("allreduce", "recursive_doubling").build(t), 0, lambda ts: ts + [bad])
    with pytest.raises(ScheduleError, match="not a generator"):
        execute(s, t)


def test_declared_bytes_must_match_chunks():
    t = hypercube(3)
    s = lookup("allreduce", "coset_factored_parallel").build(t)
    s = _mutate(s, 0, lambda ts: [dataclasses.replace(ts[0], fraction=Fraction(1))] + ts[1:])
    with pytest.raises(ScheduleError, match="declares"):
        execute(s, t)


def test_sending_blocks_not_held_is_rejected():
    t = hypercube(3)
    s = lookup("allgather", "recursive_doubling").build(t)
    s = dataclasses.replace(s, phases=tuple(reversed(s.phases)))  # big phase first: blocks not yet there
    with pytest.raises(ScheduleError, match="does not hold"):
        execute(s, t)


def test_alltoall_misrouted_block_is_detected():
    t = block_fold((2, 1))
    s = lookup("alltoall", "bruck_radix").build(t)
    s = dataclasses.replace(s, phases=s.phases[:-1])
    with pytest.raises(ScheduleError, match="destination"):
        execute(s, t)


def test_reducescatter_and_contributions_forms():
    t = with_folds(hypercube(4), [0b1111])
    for coll, name in (("reducescatter", "coset_factored_parallel"), ("allreduce", "one_shot"),
                       ("allreduce", "one_shot_dvo"), ("alltoall", "direct")):
        r = execute(lookup(coll, name).build(t), t, seed=3)
        assert r.h >= 2


def test_schedule_for_wrong_size_is_rejected():
    s = lookup("allreduce", "recursive_doubling").build(hypercube(3))
    with pytest.raises(ScheduleError):
        execute(s, hypercube(4))


def test_a_phase_reads_the_buffers_as_they_were_at_its_start():
    """Phases are synchronous: two ranks that swap a chunk by storing each other's value end with
    the other's old value, whatever order the transfers are applied in."""
    import numpy as np

    from collectives.verify import _apply_partial

    acc = np.array([[[1, 2]], [[30, 40]]], dtype=np.int64)  # 2 ranks x 1 chunk x 2 elements
    src, dst, ch = np.array([0, 1]), np.array([1, 0]), np.array([0, 0])
    out = _apply_partial(acc.copy(), src, dst, ch, np.array([False, False]), 0)
    assert out.tolist() == [[[30, 40]], [[1, 2]]]
    out = _apply_partial(acc.copy(), src, dst, ch, np.array([True, True]), 0)  # both reduce: both hold the sum
    assert out.tolist() == [[[31, 42]], [[31, 42]]]


def test_the_first_bad_transfer_of_a_phase_is_the_one_reported():
    t = hypercube(3)
    s = lookup("allreduce", "recursive_doubling").build(t)
    wrong_size = dataclasses.replace(s.phases[0].transfers[2], fraction=Fraction(7))
    wrong_edge = Transfer(src=0, dst=3, edge=3, fraction=Fraction(1), chunks=(0,), reduce=True)
    s = _mutate(s, 0, lambda ts: ts[:2] + [wrong_size] + ts[3:] + [wrong_edge])
    with pytest.raises(ScheduleError, match="phase 0: transfer .* declares 7 sigma"):
        execute(s, t)
