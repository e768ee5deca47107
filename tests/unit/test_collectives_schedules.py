"""Unit tests for the schedule registry (collectives.schedules)."""

from fractions import Fraction

import pytest

from collectives.errors import SpecError
from collectives.schedule import Schedule
from collectives.schedules import SCHEDULES, lookup, normalize_collective, schedules_for
from collectives.topology import block_fold, folded_cube, hypercube, ring, with_folds

ISSUE_NAMES = {"one_shot", "one_shot_dvo", "recursive_doubling", "coset_factored", "coset_factored_parallel", "rs_ag",
               "rs_ag_parallel", "ring", "two_shot", "halving_doubling", "bruck", "bruck_radix", "bruck_parallel",
               "direct"}


def test_registry_has_every_issue_name():
    assert set(SCHEDULES.names()) == ISSUE_NAMES


def test_collectives_served():
    assert set(schedules_for("allreduce")) == {"one_shot", "one_shot_dvo", "recursive_doubling", "coset_factored",
                                               "coset_factored_parallel", "rs_ag", "rs_ag_parallel", "ring",
                                               "two_shot", "halving_doubling"}
    assert set(schedules_for("alltoall")) == {"bruck", "bruck_radix", "bruck_parallel", "direct"}
    assert {"ring", "recursive_doubling", "one_shot", "one_shot_dvo", "coset_factored",
            "coset_factored_parallel"} <= set(schedules_for("allgather"))
    assert "one_shot_dvo" in schedules_for("reducescatter")
    assert SCHEDULES.get("ring").collectives == ("allgather", "allreduce", "reducescatter")
    assert SCHEDULES.get("bruck").primary == "alltoall"


def test_lookup_errors_are_spec_errors():
    with pytest.raises(SpecError, match="unknown schedule"):
        lookup("allreduce", "nope")
    with pytest.raises(SpecError, match="does not implement"):
        lookup("alltoall", "rs_ag")
    with pytest.raises(SpecError, match="collective"):
        normalize_collective("broadcast")
    assert normalize_collective("all-reduce") == "allreduce"


def test_recursive_doubling_is_not_credited_with_folds():
    # A.2: 'crediting recursive doubling with a folded diameter it cannot use' must not happen
    fq = folded_cube(3)
    assert fq.diameter == 2
    assert lookup("allreduce", "recursive_doubling").closed_form(fq).h == 3


def test_invalid_combinations_are_rejected_not_priced():
    alg = lookup("allreduce", "two_shot")
    assert not alg.valid(hypercube(3))
    assert "complete graph" in alg.why_invalid(hypercube(3))
    with pytest.raises(SpecError, match="cannot run"):
        alg.closed_form(hypercube(3))
    with pytest.raises(SpecError, match="cannot run"):
        alg.build(hypercube(3))
    assert alg.valid(block_fold((3,)))
    # circulants are not cubes: only ring and one-shot schedules run there (A.6)
    r = ring(8)
    assert {n for n in schedules_for("allreduce") if lookup("allreduce", n).valid(r)} == {"one_shot", "one_shot_dvo",
                                                                                          "ring"}


def test_entry_defaults_to_primary_collective():
    e = SCHEDULES.get("coset_factored_parallel")
    assert e.closed_form(hypercube(3)) == e.closed_form(hypercube(3), "allreduce")
    assert e.closed_form(hypercube(3), "allgather").v == Fraction(7, 24)


def test_build_returns_schedule_data():
    s = lookup("allreduce", "coset_factored_parallel").build(with_folds(hypercube(4), [0b1111]))
    assert isinstance(s, Schedule)
    assert s.name == "coset_factored_parallel" and s.collective == "allreduce" and s.n_ranks == 16
    assert len(s.phases) == 3
    t = s.phases[0].transfers[0]
    assert t.dst == t.src ^ t.edge and t.fraction == Fraction(1, 3) and t.reduce


def test_parallel_rs_ag_divides_eq4_by_layers_on_uniform_fold():
    t = block_fold((2, 2, 2))
    plain = lookup("allreduce", "rs_ag").closed_form(t)
    par = lookup("allreduce", "rs_ag_parallel").closed_form(t)
    assert plain.h == par.h == 6
    assert par.v == plain.v / 3


def test_bruck_parallel_is_priced_by_the_narrowest_layer():
    t = block_fold((4, 3))  # K16 □ K8, Q7[4, 3]
    assert lookup("alltoall", "bruck_parallel").closed_form(t).v == Fraction(1, 8)
    assert lookup("alltoall", "bruck_radix").closed_form(t).v == Fraction(1, 16) + Fraction(1, 8)


def test_parallel_rs_ag_keeps_plain_order_when_rotation_does_not_pay():
    # found by the property test: radices (8, 4, 2) — rotated equal pieces would cost 41/96 sigma
    # per half against 11/32 for the plain order, so the parallel variant keeps one piece
    from collectives.layers import parallel_pieces, rotated_max_volume, rs_volume, _rs_piece
    from collectives.topology import CayleyTopology

    assert rotated_max_volume((8, 4, 2), _rs_piece) > rs_volume((8, 4, 2))
    assert parallel_pieces((8, 4, 2), "rs") == 1 and parallel_pieces((4, 4), "rs") == 2
    t = CayleyTopology(n_bits=6, generators=(1, 2, 4, 8, 16, 17, 30, 32, 39, 43, 52))
    assert lookup("allreduce", "rs_ag_parallel").closed_form(t).v <= lookup("allreduce", "rs_ag").closed_form(t).v
