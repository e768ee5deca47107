from dataclasses import replace

from gxnet.graph import build_model_graph
from gxnet.invariants import check_graph
from gxnet.ir import B, EP, KVP, TPA, TPE, S, frozen
from gxnet.passes import PassManager, standard_pipeline
from gxnet.precision import PrecisionSpec
from gxnet.testing import model

M = model("megatron_5t")


def _sharded():
    return PassManager(standard_pipeline("helix", PrecisionSpec())[:3]).run(build_model_graph(M))


def test_valid_graphs_pass():
    g = _sharded()
    assert check_graph(g, bindings={KVP: 4, TPA: 128, EP: 64, TPE: 8, B: 1, S: 10}) == []


def test_non_dividing_shard_is_reported():
    problems = check_graph(_sharded(), bindings={KVP: 2, TPA: 256, EP: 64, TPE: 8, B: 1, S: 10})
    assert any("Hkv=128 is sharded over tpa=256" in p for p in problems), problems


def test_shape_disagreement_is_reported():
    g = _sharded()
    t = dict(g.tensors)
    t["L0.h"] = replace(t["L0.h"], shape=(B, 1, 4096))
    assert any("dim H is" in p for p in check_graph(g.with_tensors(t)))


def test_partial_consumed_by_compute_is_reported():
    g = _sharded()
    g2 = g.map_nodes(lambda s, n: n.with_attrs(requires=frozen({})) if n.op == "add" else n)
    assert any("still partial" in p for p in check_graph(g2))


def test_unknown_tensor_is_reported():
    g = _sharded()
    g2 = g.map_nodes(lambda s, n: replace(n, inputs=n.inputs + ("ghost",)) if n.op == "router" else n)
    assert any("unknown tensor 'ghost'" in p for p in check_graph(g2))
