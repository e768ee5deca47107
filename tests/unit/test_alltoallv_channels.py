"""collectives/alltoallv/channels.py and activations.py: the abstraction and schedule data."""

import json

import numpy as np
import pytest

from collectives.alltoallv.activations import Activation, AlltoallvSchedule, Lane
from collectives.alltoallv.channels import ChannelTopology, PathOption, nearest_first
from collectives.errors import SpecError


def opt(i, j, kind="PXB", res=("L",), rate=1.0):
    return PathOption(src=i, dst=j, kind=kind, resources=tuple(res), shared=tuple(res), rate_Bps=rate)


def test_path_option_validation():
    with pytest.raises(SpecError, match="kind"):
        opt(0, 1, kind="XYZ")
    with pytest.raises(SpecError, match="self-transfer"):
        opt(1, 1)
    with pytest.raises(SpecError, match="rate"):
        opt(0, 1, rate=0.0)
    with pytest.raises(SpecError, match="subset"):
        PathOption(src=0, dst=1, kind="PIX", resources=("a",), shared=("b",), rate_Bps=1.0)


def test_nearest_first_prefers_kind_then_rate():
    paths = (opt(0, 1, "NIC", ("n",), 9.0), opt(0, 1, "PXB", ("p",), 1.0), opt(0, 1, "PXB", ("q",), 2.0))
    assert [p.resources for p in nearest_first(paths)] == [("q",), ("p",), ("n",)]


def test_topology_validation():
    paths = {(i, j): (opt(i, j),) for i in range(2) for j in range(2) if i != j}
    ChannelTopology(name="t", n_ranks=2, groups=((0,), (1,)), paths=paths)
    with pytest.raises(SpecError, match="partition"):
        ChannelTopology(name="t", n_ranks=2, groups=((0,),), paths=paths)
    with pytest.raises(SpecError, match="no path"):
        ChannelTopology(name="t", n_ranks=2, groups=((0,), (1,)), paths={(0, 1): paths[(0, 1)]})
    with pytest.raises(SpecError, match="equal group sizes"):
        ChannelTopology(name="t", n_ranks=3, groups=((0, 1), (2,)),
                        paths={(i, j): (opt(i, j),) for i in range(3) for j in range(3) if i != j})


def test_schedule_json_and_shared_phase_view():
    d = np.array([[0, 8], [4, 0]])
    acts = (Activation(lanes=(Lane(src=0, dst=1, path=opt(0, 1), bytes=8), Lane(src=1, dst=0, path=opt(1, 0, res=("M",)), bytes=4))),)
    s = AlltoallvSchedule(scheduler="x", platform="p", n_ranks=2, demand=d, activations=acts, channels=True)
    j = json.loads(json.dumps(s.to_json()))
    assert j["world_size"] == 2 and j["demand_bytes"] == [[0, 8], [4, 0]]
    assert j["activations"][0]["lanes"][0] == {"src": 0, "dst": 1, "origin": 0, "final": 1, "bytes": 8,
                                               "path": {"kind": "PXB", "resources": ["L"], "rate_Bps": 1.0}}
    phases = s.as_phases()
    assert phases.collective == "alltoallv" and len(phases.phases) == 1
    assert [t.fraction * phases.meta["sigma_bytes"] for t in phases.phases[0].transfers] == [8, 4]
