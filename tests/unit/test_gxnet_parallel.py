import itertools

import pytest

from collectives.errors import SpecError
from gxnet.parallel import ParallelSpec


def test_helix_groups_partition_the_world():
    p = ParallelSpec(kvp=4, tpa=128, ep=64, tpe=8)
    for axis, (g, r) in {"world": (1, 512), "kvp": (128, 4), "tpa": (4, 128), "ep": (8, 64), "tpe": (64, 8)}.items():
        groups = p.groups(axis)
        assert (len(groups), len(groups[0])) == (g, r)
        assert sorted(itertools.chain(*groups)) == list(range(512))
    # a KVP group differs only in its KVP coordinate: ranks kvp_i * TPA + tpa_i
    assert p.groups("kvp")[3] == (3, 131, 259, 387)
    assert p.groups("tpe")[1] == tuple(range(8, 16))


def test_tp_ep_maps_onto_the_four_degrees():
    p = ParallelSpec(scheme="tp_ep", tp=8, ep=64)
    assert (p.kvp, p.tpa, p.ep, p.tpe, p.world) == (1, 512, 64, 8, 512)
    assert p.groups("tp") == p.groups("tpe") and p.ffn_tensor_axis == "tp"


@pytest.mark.parametrize("kw, words", [
    (dict(kvp=3, tpa=128, ep=64, tpe=8), ["parallel.kvp=3", "power of two"]),
    (dict(kvp=4, tpa=128, ep=64, tpe=4), ["KVP*TPA=4*128=512", "EP*TPE=64*4=256"]),
    (dict(kvp=4, tpa=128, ep=64), ["parallel.tpe"]),
    (dict(scheme="pipeline", kvp=1, tpa=1, ep=1, tpe=1), ["parallel.scheme='pipeline'"]),
    (dict(scheme="tp_ep", tp=8), ["tp_ep needs"]),
    (dict(scheme="tp_ep", tp=8, ep=8, kvp=2), ["parallel.kvp=2 contradicts"]),
    (dict(kvp=1, tpa=8, ep=8, tpe=1, tp=8), ["only for scheme tp_ep"]),
])
def test_bad_parallel_specs(kw, words):
    with pytest.raises(SpecError) as e:
        ParallelSpec(**kw)
    assert all(w in str(e.value) for w in words), str(e.value)
