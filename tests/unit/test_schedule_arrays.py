"""``collectives.schedules.arrays`` gives, for every schedule it covers, exactly the (src, dst,
fraction) arrays of the built schedule (``fabrics.scaleup.native.library_phases``): same phases,
same transfers in the same order, the same floats."""

import numpy as np
import pytest

from collectives.schedules import SCHEDULES, schedules_for
from collectives.schedules.arrays import schedule_arrays
from collectives.topology import CayleyTopology, hypercube
from fabrics.scaleup.native import library_phases


def _block_fold(sizes):
    gens, off = [], 0
    for k in sizes:
        gens += [m << off for m in range(1, 1 << k)]
        off += k
    return CayleyTopology(n_bits=sum(sizes), generators=tuple(gens))


TOPOLOGIES = [hypercube(1), hypercube(3), hypercube(5), _block_fold((2,)), _block_fold((2, 2)), _block_fold((3, 2)),
              _block_fold((2, 2, 1)), _block_fold((3, 3)), _block_fold((4, 2)),
              CayleyTopology(n_bits=4, generators=(1, 2, 4, 8, 15)),  # folded cube
              CayleyTopology(n_bits=4, generators=(1, 2, 4, 8, 3))]  # a fold that tiles nothing extra


def _cases():
    for topo in TOPOLOGIES:
        for collective in ("allreduce", "allgather", "reducescatter", "alltoall"):
            for name in schedules_for(collective):
                if SCHEDULES.get(name).valid(topo, collective):
                    yield topo, collective, name


@pytest.mark.parametrize("topo", TOPOLOGIES, ids=lambda t: t.describe())
def test_arrays_equal_built_schedules(topo):
    covered = 0
    for t, collective, name in _cases():
        if t is not topo:
            continue
        arrays = schedule_arrays(name, collective, topo)
        if arrays is None:
            continue
        covered += 1
        built = library_phases(SCHEDULES.get(name).build(topo, collective))
        assert len(arrays) == len(built), (name, collective)
        for (src, dst, frac), ph in zip(arrays, built):
            assert src.dtype == ph.src.dtype and frac.dtype == ph.fraction.dtype
            assert np.array_equal(src, ph.src) and np.array_equal(dst, ph.dst), (name, collective)
            assert np.array_equal(frac, ph.fraction), (name, collective)
    assert covered >= 8


def test_covers_the_planned_schedules():
    """The schedules OCS plans choose are all covered (else their pricing builds Transfers)."""
    topo = _block_fold((2, 2))
    for name, collective in (("coset_factored_parallel", "allreduce"), ("coset_factored_parallel", "allgather"),
                             ("one_shot_dvo", "allreduce"), ("one_shot_dvo", "allgather"),
                             ("bruck_parallel", "alltoall"), ("direct", "alltoall"), ("rs_ag_parallel", "allreduce")):
        assert schedule_arrays(name, collective, topo) is not None
