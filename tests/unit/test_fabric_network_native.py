"""fabrics.scaleup.native: native EPS schedules as arrays equal the library's executable schedules."""

from collections import Counter

import pytest

from collectives.errors import SpecError
from collectives.schedules import SCHEDULES
from fabrics.scaleup.native import NATIVE_SCHEDULES, library_phases, native_phases, native_schedules, native_topology


def per_phase(phases):
    """Per phase: bytes (as fractions of σ) per ordered pair — what pricing sees."""
    out = []
    for ph in phases:
        c = Counter()
        for s, d, f in zip(ph.src.tolist(), ph.dst.tolist(), ph.fraction.tolist()):
            c[(s, d)] += f
        out.append({k: round(v, 12) for k, v in c.items()})
    return out


CASES = [(c, s) for c, names in NATIVE_SCHEDULES.items() for s in names]


@pytest.mark.parametrize("collective, schedule", CASES)
@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_native_arrays_equal_library_schedule(collective, schedule, n):
    lib = SCHEDULES.get(schedule).build(native_topology(schedule, n), collective)
    assert per_phase(native_phases(collective, schedule, n)) == per_phase(library_phases(lib))


def test_native_volumes():
    n = 8
    (one,) = native_phases("allreduce", "one_shot", n)
    assert one.fraction.sum() == pytest.approx(n * (n - 1))  # σ to each of n−1 peers, from every rank
    two = native_phases("allreduce", "two_shot", n)
    assert len(two) == 2 and all(p.fraction.sum() == pytest.approx(n - 1) for p in two)
    assert len(native_phases("allreduce", "halving_doubling", n)) == 6  # 2·log2 n
    (a2a,) = native_phases("alltoall", "direct", n)
    assert a2a.src.size == n * (n - 1) and set(a2a.fraction.tolist()) == {1 / n}


def test_alltoallv_is_priced_as_alltoall():
    assert native_schedules("alltoallv") == native_schedules("alltoall")
    assert native_phases("alltoallv", "direct", 4)[0].src.size == 12


@pytest.mark.parametrize("collective, schedule, n, needle", [
    ("allreduce", "rs_ag_parallel", 8, "not a native"),
    ("alltoall", "one_shot", 8, "not a native"),
    ("allreduce", "one_shot", 6, "power-of-two"),
    ("broadcast", "one_shot", 8, "not a native"),
])
def test_bad_native_requests_are_spec_errors(collective, schedule, n, needle):
    with pytest.raises(SpecError, match=needle):
        native_phases(collective, schedule, n)
