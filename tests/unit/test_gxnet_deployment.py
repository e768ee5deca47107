import pytest

from collectives.errors import SpecError
from gxnet.deployment import Deployment
from gxnet.parallel import ParallelSpec
from gxnet.testing import accelerator, deployment, model


def test_valid_deployment_is_frozen_and_hashable():
    d = deployment(batch=2, context=32_000)
    assert hash(d) == hash(deployment(batch=2, context=32_000))
    with pytest.raises(AttributeError):
        d.batch = 4  # type: ignore[misc]


@pytest.mark.parametrize("kw, words", [
    (dict(world=500), ["world=500", "power of two"]),
    (dict(world=256), ["KVP*TPA=4*128=512", "world=256"]),
    (dict(world=1024, parallel=(4, 256, 64, 16)), ["TPA=256 must divide the 128 KV heads of megatron_5t"]),
    (dict(parallel=(1, 512, 64, 8)), ["TPA=512 must divide the 128 KV heads"]),
    (dict(world=1024, parallel=(8, 128, 512, 2)), ["EP=512 must divide the 256 experts of megatron_5t"]),
    (dict(model_name="megatron_1t", parallel=(8, 64, 4, 128), context=1000),
     ["TPE=128 must divide the expert width 5440 of megatron_1t"]),
    (dict(batch=0), ["batch=0", "positive integer"]),
    (dict(context=0), ["context_tokens=0"]),
    (dict(context=2, parallel=(4, 128, 16, 32)), ["KVP=4 exceeds context=2"]),
])
def test_rules_raise_one_line_spec_errors(kw, words):
    if "parallel" in kw:
        kw["parallel"] = tuple(kw["parallel"])
    with pytest.raises(SpecError) as e:
        deployment(**kw)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_batch_that_does_not_fit_names_sizes_and_the_fix():
    with pytest.raises(SpecError) as e:
        deployment(batch=32)
    msg = str(e.value)
    assert msg.startswith("batch=32 needs") and "> 288.0 GB HBM of rx00" in msg
    assert msg.endswith("largest power-of-two batch that fits is 16")


def test_nothing_fits_says_so():
    with pytest.raises(SpecError, match="no batch fits"):
        deployment(accel="h100", world=8, parallel=(1, 8, 8, 1), batch=1, context=1000)


def test_tp_ep_rules():
    m, a = model("megatron_5t"), accelerator("rx00")
    ok = Deployment(model=m, accelerator=a, world=256, parallel=ParallelSpec(scheme="tp_ep", tp=8, ep=32),
                    batch=1, context_tokens=100_000)
    assert ok.parallel.tpa == 256
    with pytest.raises(SpecError, match="TP\\*EP=512 .* must divide the 256 query heads"):
        Deployment(model=m, accelerator=a, world=512, parallel=ParallelSpec(scheme="tp_ep", tp=8, ep=64),
                   batch=1, context_tokens=100_000)
    with pytest.raises(SpecError, match="TP\\*EP=8\\*8=64 must equal world=128"):
        Deployment(model=m, accelerator=a, world=128, parallel=ParallelSpec(scheme="tp_ep", tp=8, ep=8),
                   batch=1, context_tokens=100_000)


def test_specs_pickle_for_ray_workers():
    import pickle

    from gxnet.executor import execute
    from gxnet.plan import build_plan
    from gxnet.testing import FixedLatencyNetwork

    d = deployment(batch=4)
    assert pickle.loads(pickle.dumps(d)) == d
    plan = build_plan(d)
    assert pickle.loads(pickle.dumps(plan)) == plan
    r = execute(plan, FixedLatencyNetwork())
    assert pickle.loads(pickle.dumps(r)).decode_step_s == r.decode_step_s
