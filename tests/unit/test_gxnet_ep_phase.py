"""Expert-parallel phases (gxnet/ep_phase.py) and the prefill pass (gxnet/passes/prefill.py)."""

import dataclasses

import numpy as np
import pytest

from collectives.errors import SpecError
from fabrics.network.protocol import Completion, check_in_demand
from gxnet.compile import compiled_program
from gxnet.passes import PassManager
from gxnet.passes.manager import standard_pipeline
from gxnet.graph import build_model_graph
from gxnet.precision import precision_from_dict
from gxnet.ep_phase import EpDeployment, PhaseSpec, build_phase_plan, execute_phase
from gxnet.plan import CollectiveEntry as CommEntry
from gxnet.expert_routing import RoutingSpec
from gxnet.testing import accelerator, model

BF16 = precision_from_dict({"name": "bf16", "weights_bits": 16, "kv_bits": 16})
QWEN = model("qwen3_30b_a3b")
SMALL = dataclasses.replace(QWEN, layers=3)


class RecordingNetwork:
    """Every call costs a fixed time plus 1 ns per byte of its busiest sender; records calls."""

    def __init__(self):
        self.calls = []
        self._pending = []

    def prepare(self, demand, world):
        self.demand, self.world = demand, world

    def register(self, call, t):
        check_in_demand(call, self.demand)
        self.calls.append(call)
        self._pending.append(Completion(call_id=call.call_id, start_s=t, end_s=t + 1e-5 + call.payload_bytes * 1e-12))

    def advance(self):
        out, self._pending = self._pending, []
        return out


def dep(ep=16, routing=RoutingSpec(), phase=PhaseSpec(), m=SMALL):
    return EpDeployment(model=m, accelerator=accelerator("rtx5080"), ep=ep, phase=phase, routing=routing, precision=BF16)


def test_prefill_pass_makes_causal_attention_and_keeps_decode():
    g = PassManager(standard_pipeline("tp_ep", BF16, None, "prefill")).run(build_model_graph(QWEN))
    assert g.attrs["phase"] == "prefill"
    fa = next(n for _, n in g.nodes() if n.op == "flash_attention")
    assert fa.attrs["prefill"] and fa.attrs["kernel"] == "flash_prefill"
    prog = compiled_program(QWEN, "tp_ep", BF16, accelerator("rtx5080"), "prefill")
    dec = compiled_program(QWEN, "tp_ep", BF16, accelerator("rtx5080"))
    i = next(s.index for s in prog.sections[1].slots if getattr(s, "kernel", "") == "flash_prefill")
    j = next(s.index for s in dec.sections[1].slots if getattr(s, "kernel", "") == "flash_decode")
    vp = prog.evaluate(512, 8192, 1, 1, 1, 1, 1, 1, 1)
    vd = dec.evaluate(512, 8192, 1, 1, 1, 1, 1, 1, 1)
    # causal: each of the 512 queries sees (S + 1) / 2 keys on average -> half the FLOPs of decode
    assert vp[i + 1] == pytest.approx(4 * 512 * 32 * 128 * (8192 + 1) / 2)
    assert vd[j + 1] == pytest.approx(4 * 512 * 32 * 128 * 8192)
    # prefill streams one sequence's K/V once, decode once per user
    assert vp[i + 2] < vd[j + 2] / 100


def test_phase_spec_and_deployment_validation():
    assert PhaseSpec(requests=2, prompt_tokens=100).tokens == 200
    assert PhaseSpec(phase="decode", requests=64).tokens == 64
    with pytest.raises(SpecError, match="phase"):
        PhaseSpec(phase="train")
    with pytest.raises(SpecError, match="EP=24 must divide the 128 experts"):
        dep(ep=24)
    assert dep(ep=24, routing=RoutingSpec(placement="uneven")).tokens_per_rank == 342
    with pytest.raises(SpecError, match="GB of weights per rank") as e:
        dep(ep=1, m=QWEN)  # 61 GB of BF16 weights on a 16 GB RTX 5080
    assert "\n" not in str(e.value)


def test_plan_has_dispatch_and_combine_per_layer_with_transposed_demand():
    plan = build_phase_plan(dep(routing=RoutingSpec(model="topk", seed=2)))
    assert len(plan.layers) == 3
    for layer in plan.layers:
        names = [e.name for e in layer if isinstance(e, CommEntry)]
        assert names == ["kv_allgather", "dispatch", "combine"]
        disp, comb = [e for e in layer if isinstance(e, CommEntry) and e.collective == "alltoallv"]
        assert np.array_equal(comb.demand, disp.demand.T)
        assert disp.payload_bytes == disp.demand.sum(axis=1).max()
    first = [next(e for e in layer if isinstance(e, CommEntry) and e.name == "dispatch") for layer in plan.layers]
    assert not np.array_equal(first[0].demand, first[1].demand)  # each layer draws its own routing
    dec = build_phase_plan(dep(phase=PhaseSpec(phase="decode", requests=64, context_tokens=4096)))
    assert [e.name for e in dec.layers[0] if isinstance(e, CommEntry)] == ["dispatch", "combine"]


def test_execute_sums_breakdown_and_records_per_layer_alltoallv():
    plan = build_phase_plan(dep())
    netw = RecordingNetwork()
    res = execute_phase(plan, netw)
    assert sum(res.breakdown_s.values()) == pytest.approx(res.latency_s, rel=1e-12)
    s = res.summary()
    assert len(s["alltoallv"]["per_layer_dispatch_s"]) == 3 == len(s["alltoallv"]["per_layer_combine_s"])
    assert len(netw.calls) == 9 and all(c.groups == (tuple(range(16)),) for c in netw.calls)
    assert all(c.demand is not None for c in netw.calls if c.collective == "alltoallv")


def test_skew_slows_the_busiest_ranks_experts():
    def ffn(routing):
        return execute_phase(build_phase_plan(dep(routing=routing)), RecordingNetwork()).breakdown_s["ffn"]

    assert ffn(RoutingSpec(model="zipf", zipf_s=0.8)) > 1.3 * ffn(RoutingSpec())


def test_more_ranks_less_compute_per_rank():
    a = execute_phase(build_phase_plan(dep(ep=16)), RecordingNetwork()).breakdown_s
    b = execute_phase(build_phase_plan(dep(ep=32)), RecordingNetwork()).breakdown_s
    assert b["attention"] < a["attention"] and b["ffn"] < a["ffn"]
