"""collectives/alltoallv/validity.py: Σ X(E) = D, contention-freedom, relay causality."""

import dataclasses

import numpy as np

from collectives.alltoallv.activations import Activation, AlltoallvSchedule, Lane
from collectives.alltoallv.channels import ChannelTopology, PathOption


def topo():
    def opts(i, j):
        return (PathOption(src=i, dst=j, kind="PXB", resources=(f"g{i}", "L", f"h{j}"), shared=("L",), rate_Bps=1.0),
                PathOption(src=i, dst=j, kind="NIC", resources=(f"g{i}", f"n{i}{j}", f"h{j}"), shared=(f"n{i}{j}",), rate_Bps=1.0))
    return ChannelTopology(name="t", n_ranks=3, groups=((0,), (1,), (2,)),
                           paths={(i, j): opts(i, j) for i in range(3) for j in range(3) if i != j})


def sched(acts, demand, channels=True):
    return AlltoallvSchedule(scheduler="t", platform="t", n_ranks=3, demand=np.array(demand), channels=channels,
                             activations=tuple(Activation(lanes=tuple(a)) for a in acts))


D = [[0, 5, 0], [0, 0, 7], [0, 0, 0]]


def test_valid_schedule_passes():
    t = topo()
    s = sched([[Lane(src=0, dst=1, path=t.options(0, 1)[0], bytes=5), Lane(src=1, dst=2, path=t.options(1, 2)[1], bytes=7)]], D)
    from collectives.alltoallv.validity import check_schedule
    assert check_schedule(s, t).valid


def test_shared_resource_twice_is_contention_and_invalid_for_channels():
    from collectives.alltoallv.validity import check_schedule
    t = topo()
    lanes = [Lane(src=0, dst=1, path=t.options(0, 1)[0], bytes=5), Lane(src=1, dst=2, path=t.options(1, 2)[0], bytes=7)]
    r = check_schedule(sched([lanes], D), t)
    assert not r.contention_free and not r.valid
    r2 = check_schedule(sched([lanes], D, channels=False), t)
    assert r2.valid and not r2.contention_free  # a baseline may contend; the evaluator shows it


def test_wrong_volumes_and_foreign_paths_are_caught():
    from collectives.alltoallv.validity import check_schedule
    t = topo()
    short = sched([[Lane(src=0, dst=1, path=t.options(0, 1)[0], bytes=4), Lane(src=1, dst=2, path=t.options(1, 2)[1], bytes=7)]], D)
    assert not check_schedule(short, t).demand_exact
    alien = dataclasses.replace(t.options(0, 1)[0], resources=("zz",), shared=())
    bad = sched([[Lane(src=0, dst=1, path=alien, bytes=5)], [Lane(src=1, dst=2, path=t.options(1, 2)[1], bytes=7)]], D)
    assert not check_schedule(bad, t).paths_known


def test_relays_must_hold_data_before_forwarding():
    from collectives.alltoallv.validity import check_schedule
    t = topo()
    d = [[0, 0, 6], [0, 0, 0], [0, 0, 0]]
    hop1 = Lane(src=0, dst=1, path=t.options(0, 1)[1], bytes=6, origin=0, final=2)
    hop2 = Lane(src=1, dst=2, path=t.options(1, 2)[1], bytes=6, origin=0, final=2)
    good = check_schedule(sched([[hop1], [hop2]], d, channels=False), t)
    assert good.valid
    same_stage = check_schedule(sched([[hop1, hop2]], d, channels=False), t)
    assert not same_stage.causal and not same_stage.valid
    stranded = check_schedule(sched([[hop1]], d, channels=False), t)
    assert not stranded.valid
