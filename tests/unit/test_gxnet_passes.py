"""One test group per pass (decode, precision, sharding, collective insertion, fusion, resources,
roofline) and the pass manager."""

from collections import Counter

import pytest
import sympy as sp

from gxnet.graph import build_model_graph
from gxnet.ir import B, EP, KVP, TPA, TPE, R_rows, S, Tq
from gxnet.passes import Pass, PassError, PassManager, standard_pipeline
from gxnet.passes.collectives import conversion_steps, insert_collectives
from gxnet.passes.decode import specialize_decode
from gxnet.passes.fusion import fuse_windows, kernels_of
from gxnet.passes.precision import assign_precision
from gxnet.passes.resources import annotate_resources
from gxnet.passes.roofline import annotate_roofline
from gxnet.passes.sharding import shard
from gxnet.ir import Placement
from gxnet.precision import PrecisionSpec
from gxnet.testing import accelerator, model

FP4 = PrecisionSpec()
M5T = model("megatron_5t")
HELIX = dict(zip((KVP, TPA, EP, TPE), (4, 128, 64, 8)))


def _upto(name, scheme="helix", m=M5T):
    g = build_model_graph(m)
    steps = [("decode", specialize_decode), ("precision", lambda g: assign_precision(g, FP4)),
             ("sharding", lambda g: shard(g, scheme)), ("collectives", lambda g: insert_collectives(g, FP4)),
             ("fusion", fuse_windows), ("resources", annotate_resources)]
    for n, f in steps:
        g = f(g)
        if n == name:
            return g
    raise KeyError(name)


def test_decode_fixes_one_new_token_per_user():
    g = _upto("decode")
    assert all(Tq not in sp.sympify(s).free_symbols for t in g.tensors.values() for s in t.shape)
    assert g.tensors["x"].shape == (B, 1, 8192) and g.attrs["phase"] == "decode"


def test_precision_sets_widths_by_role():
    g = _upto("precision")
    assert g.tensors["L0.w_qkv"].bits == 4 and g.tensors["L0.kv"].bits == 4
    assert g.tensors["L0.lse"].bits == 8 and g.attrs["comm_bits"] == 4
    g16 = assign_precision(specialize_decode(build_model_graph(M5T)), PrecisionSpec.preset("bf16"))
    assert g16.tensors["L0.lse"].bits == 32 and g16.attrs["comm_bits"] == 16


def test_helix_sharding_places_kv_by_sequence_and_head():
    g = _upto("sharding")
    kv = g.tensors["L0.kv"]
    assert kv.placement.axes_of("S") == ("kvp",) and kv.placement.axes_of("Hkv") == ("tpa",)
    assert kv.local_shape[1] == sp.ceiling(S / KVP) and kv.local_shape[2] == 128 / TPA
    assert g.tensors["L0.o_part"].placement.partial == ("kvp",)
    assert g.tensors["L0.a"].placement.partial_kind == "sum"
    assert g.tensors["L0.y"].local_shape[0] == R_rows  # busiest-rank rows (B.2)
    combine = next(n for _, n in g.nodes() if n.op == "attn_combine")
    assert set(combine.attrs["requires"]) == {"L0.o_part", "L0.lse"}


def test_collective_insertion_gives_table1_structure():
    g = _upto("collectives")
    colls = [(s.name, n.region, n.op, n.attrs["axis"]) for s, n in g.collectives()]
    assert colls == [
        ("decoder_block", "attention", "alltoall", "kvp"),
        ("decoder_block", "attention", "allreduce", "world"),
        ("decoder_block", "ffn", "allreduce", "tpe"),
        ("decoder_block", "ffn", "allgather", "ep"),
        ("lm_head", "lm_head", "allgather", "world"),
    ]
    pay = {n.attrs["axis"] + n.op: n.attrs["payload_bytes"] for _, n in g.collectives()}
    vals = {**HELIX, B: 1, R_rows: 1}
    assert pay["kvpalltoall"].subs(vals) == 66
    assert pay["worldallreduce"].subs(vals) == 4096
    assert pay["epallgather"].subs(vals) == 64 * 8192 // 2
    # consumers now read the converted tensors, never the partial ones
    assert not any("requires" in n.attrs for _, n in g.nodes())


def test_tp_ep_has_no_kvp_exchange():
    g = _upto("collectives", scheme="tp_ep")
    assert [(n.op, n.attrs["axis"]) for _, n in g.collectives()] == [
        ("allreduce", "world"), ("allreduce", "tp"), ("allgather", "ep"), ("allgather", "world")]


def test_conversion_rules():
    part = Placement((("A", ("tpa",)),), ("kvp",), "softmax")
    want = Placement((("A", ("tpa", "kvp")),))
    assert [s[:2] for s in conversion_steps(part, want)] == [("alltoall", ("kvp",))]
    y = Placement((("Rw", ("ep",)),), ("tpe",), "sum")
    assert [s[:2] for s in conversion_steps(y, Placement())] == [("allreduce", ("tpe",)), ("allgather", ("ep",))]
    rs = conversion_steps(Placement((), ("tpe",), "sum"), Placement((("H", ("tpe",)),)))
    assert [s[0] for s in rs] == ["reducescatter"]
    with pytest.raises(ValueError, match="no collective converts"):
        conversion_steps(Placement(), Placement((("H", ("tpe",)),)))


def test_fusion_numbers_windows_between_collectives():
    g = _upto("fusion")
    block = g.sections[1]
    windows = {n.name: n.attrs["window"] for n in block.nodes if not n.is_collective}
    assert windows["L0.flash_decode"] == 0 and windows["L0.o_proj"] == 1
    assert windows["L0.experts"] == 2 and windows["L0.expert_sum"] == 4
    kernels = [k for k, _ in kernels_of(block)]
    assert kernels == ["qkv_proj", "flash_decode", "@collective", "o_proj", "@collective", "router",
                       "expert_gemm", "@collective", "@collective", "expert_combine"]


def test_resources_flash_decode_reads_the_local_kv_shard():
    g = _upto("resources")
    fd = next(n for _, n in g.nodes() if n.op == "flash_attention")
    vals = {**HELIX, B: 1, S: 5_000_000}
    kv_bytes = 1 * (5_000_000 / 4) * 1 * 2 * 64 * 0.5  # one KV head per rank, FP4
    assert float(fd.attrs["hbm_bytes"].subs(vals)) == pytest.approx(kv_bytes, rel=1e-3)
    assert float(fd.attrs["flops"].subs(vals)) == 4 * 1 * 2 * 64 * 1_250_000  # 2 local Q heads


def test_roofline_uses_the_accelerator_steps():
    acc = accelerator("rx00")
    g = annotate_roofline(_upto("resources"), acc)
    fd = next(n for _, n in g.nodes() if n.op == "flash_attention")
    vals = {**HELIX, B: 1, S: 5_000_000}
    t = float(fd.attrs["time_s"].subs(vals))
    assert t == pytest.approx(80e6 / (22e12 * 0.9), rel=1e-3)  # step basis: 128 x 80 MB > 100 MB
    from dataclasses import replace
    g_k = annotate_roofline(_upto("resources"), replace(acc, efficiency_basis="kernel"))
    fd_k = next(n for _, n in g_k.nodes() if n.op == "flash_attention")
    assert float(fd_k.attrs["time_s"].subs(vals)) == pytest.approx(80e6 / (22e12 * 0.75), rel=1e-3)


def test_pass_manager_names_the_failing_pass():
    def broken(g):
        raise ZeroDivisionError("boom")

    pm = PassManager([Pass("decode", specialize_decode), Pass("broken_pass", broken)])
    with pytest.raises(PassError, match="pass 'broken_pass' failed: boom"):
        pm.run(build_model_graph(M5T))


def test_pass_manager_checks_invariants_after_each_pass():
    def drop_collectives(g):
        from dataclasses import replace
        return replace(g, sections=tuple(replace(s, nodes=tuple(n for n in s.nodes if not n.is_collective))
                                         for s in g.sections))

    passes = standard_pipeline("helix", FP4)[:4] + [Pass("dropper", drop_collectives)]
    with pytest.raises(PassError, match="after pass 'dropper'.*dropped"):
        PassManager(passes, check_invariants=True).run(build_model_graph(M5T))
    ok = PassManager(standard_pipeline("helix", FP4, accelerator("rx00")), check_invariants=True,
                     bindings={**HELIX, B: 4, S: 1000})
    ok.run(build_model_graph(M5T))
    assert [n for n, _ in ok.history] == ["input", "decode", "precision", "sharding[helix]",
                                          "collective_insertion", "fusion", "resources", "roofline"]


def test_mla_sharding_and_absorbed_attention_cost():
    from gxnet.ir import KVP, TPA
    from gxnet.testing import model

    m = model("deepseek_v3")
    g = PassManager(standard_pipeline("helix", PrecisionSpec.preset("fp8"), None)).run(build_model_graph(m))
    kv = g.tensors["L0.kv"]
    assert kv.placement.axes_of("S") == ("kvp",) and kv.local_shape[1:] == (sp.ceiling(S / KVP), 576)
    fd = next(n for _, n in g.nodes() if n.name == "L0.flash_decode")
    # scores over latent + rope (576), values over the latent (512), per local head and position
    assert sp.simplify(fd.attrs["flops"] - 2 * B * (128 / TPA) * sp.ceiling(S / KVP) * (576 + 512)) == 0
    # the partial latent outputs are exchanged over KVP, then heads split over TPA x KVP
    a2a = [n for _, n in g.collectives() if n.op == "alltoall"]
    assert a2a and all(n.attrs["axis"] == "kvp" for n in a2a)
    assert g.tensors["L0.ol"].placement.axes_of("Hq") == ("tpa", "kvp")
