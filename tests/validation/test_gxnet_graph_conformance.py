"""Graph invariants after every pass over varied models, schemes, splits and batches
(hypothesis), and the demand read off the graph against an independent formula."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gxnet.plan import deployment_demand
from gxnet.graph import build_model_graph
from gxnet.ir import EP, KVP, TPA, TPE, B, R_rows, S
from gxnet.moe import moe_load
from gxnet.passes import PassManager, standard_pipeline
from gxnet.precision import PrecisionSpec
from gxnet.splits import helix_splits
from gxnet.testing import accelerator, deployment, model

MODELS = ["megatron_235b", "megatron_1t", "megatron_5t", "gpt_oss_120b", "gpt_oss_1t_like", "gpt_oss_5p3_like"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(MODELS), idx=st.integers(0, 1000), batch=st.sampled_from([1, 2, 4, 16]))
def test_invariants_hold_after_every_pass(name, idx, batch):
    m = model(name)
    splits = helix_splits(m, 64)
    s = splits[idx % len(splits)]
    load = moe_load(batch, m.top_k, m.experts, s.ep)
    binds = {KVP: s.kvp, TPA: s.tpa, EP: s.ep, TPE: s.tpe, B: batch, S: 4096, R_rows: load.busiest_rows}
    pm = PassManager(standard_pipeline("helix", PrecisionSpec(), accelerator("rx00")),
                     check_invariants=True, bindings=binds)
    pm.run(build_model_graph(m))  # raises PassError naming the pass on any violation


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(["megatron_5t", "gpt_oss_5p3_like", "megatron_1t"]), idx=st.integers(0, 1000),
       batch=st.sampled_from([1, 2, 3, 8]), bf16=st.booleans())
def test_demand_matches_independent_formulas(name, idx, batch, bf16):
    m = model(name)
    splits = helix_splits(m, 512)
    s = splits[idx % len(splits)]
    prec = PrecisionSpec.preset("bf16") if bf16 else PrecisionSpec()
    d = deployment(name, parallel=(s.kvp, s.tpa, s.ep, s.tpe), batch=batch, context=100_000, precision=prec)
    rows = {(r.region, r.axis): r for r in deployment_demand(d)}
    act = prec.comm_bits / 8
    r = moe_load(batch, m.top_k, m.experts, s.ep).busiest_rows
    expect = {
        ("attention", "world"): batch * m.hidden * act,
        ("attention", "kvp"): batch * (m.q_heads // s.tpa) * (m.head_dim * act + prec.softmax_stat_bits / 8),
        ("ffn", "tpe"): r * m.hidden * act,
        ("ffn", "ep"): s.ep * r * m.hidden * act,
        ("lm_head", "world"): batch * 512 * -(-m.vocab // 512) * act,
    }
    for key, payload in expect.items():
        row = rows[key]
        if row.ranks == 1:
            assert row.collective == "none" and row.payload_bytes == 0
        else:
            assert row.payload_bytes == payload, key
            assert row.calls_per_step == (1 if key[0] == "lm_head" else m.layers)
