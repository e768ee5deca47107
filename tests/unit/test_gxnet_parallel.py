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


def test_dp_attention_degrees_and_groups():
    from gxnet.parallel import ParallelSpec

    p = ParallelSpec(scheme="dp_attention", dpa=4, tpa=2, ep=8)
    assert (p.world, p.kvp, p.tpa, p.ep, p.tpe) == (8, 4, 2, 8, 1)
    assert p.axis_size("dpa") == 4 and p.groups("dpa") == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert p.as_dict()["dpa"] == 4 and "DPA4" in p.label()


@pytest.mark.parametrize("kw, words", [
    (dict(dpa=8), ["dp_attention needs", "ep"]),
    (dict(dpa=8, ep=8, kvp=2), ["parallel.kvp=2", "dpa"]),
    (dict(dpa=6, ep=2), ["dpa=6", "power of two"]),
    (dict(dpa=2, ep=8), ["EP*TPE", "DPA*TPA=2*1=2"]),
])
def test_dp_attention_bad_degrees(kw, words):
    from collectives.errors import SpecError
    from gxnet.parallel import ParallelSpec

    with pytest.raises(SpecError) as e:
        ParallelSpec(scheme="dp_attention", **kw)
    assert all(w in str(e.value) for w in words), str(e.value)
