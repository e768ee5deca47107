from gxnet.plan import deployment_demand
from gxnet.parallel import ParallelSpec
from gxnet.deployment import Deployment
from gxnet.testing import accelerator, deployment, model


def _rows(d):
    return {(r.region, r.axis): r for r in deployment_demand(d)}


def test_rows_have_mesh_consistent_groups():
    d = deployment(parallel=(4, 128, 16, 32))
    for r in deployment_demand(d):
        assert r.groups * r.ranks == 512
        assert (r.calls_per_step == 0) == (r.collective == "none") == (r.payload_bytes == 0)


def test_single_rank_axes_carry_nothing():
    d = deployment(world=512, parallel=(512, 1, 256, 2), batch=1, context=5_000_000)
    rows = _rows(d)
    assert rows[("attention", "tpa")].collective == "none"
    assert rows[("attention", "kvp")].collective == "alltoall" and rows[("attention", "kvp")].ranks == 512
    d1 = deployment(world=512, parallel=(4, 128, 512 // 2, 2), batch=1)
    assert _rows(d1)[("ffn", "tpe")].ranks == 2


def test_payloads_are_batch_linear_except_moe():
    p = {b: _rows(deployment(parallel=(4, 128, 64, 8), batch=b)) for b in (1, 2, 8)}
    for key in (("attention", "world"), ("attention", "kvp"), ("lm_head", "world")):
        assert p[8][key].payload_bytes == 8 * p[1][key].payload_bytes
    assert p[8][("ffn", "ep")].payload_bytes < 8 * p[1][("ffn", "ep")].payload_bytes


def test_tp_ep_demand():
    d = Deployment(model=model("qwen3_30b_a3b"), accelerator=accelerator("h200"), world=8,
                   parallel=ParallelSpec(scheme="tp_ep", tp=2, ep=4), batch=4, context_tokens=8192)
    keys = [(r.region, r.axis, r.collective) for r in deployment_demand(d)]
    assert keys == [("attention", "world", "allreduce"), ("ffn", "ep", "allgather"),
                    ("ffn", "tp", "allreduce"), ("lm_head", "world", "allgather")]
