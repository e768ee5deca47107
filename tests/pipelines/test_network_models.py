"""``network=analytical|flow|simlette`` through the registry, end to end on every fabric (CLI)."""

import json

import pytest

from test_decode_fabrics import FABRIC_ARGS, SMALL  # the small deployments of every fabric
PCIE = ("fabric=pcie", "model=qwen3_30b_a3b", "accelerator=rtx5080", "platform=r5080_bf3", "nodes=2", "ep=16",
        "context=4096", "model.layers=2", "batch=32")


def results(out):
    return json.loads((out / "results.json").read_text())


# two fabrics in the default suite, the other three with -m slow
EVERY = [k if k in ("hybrid", "all_ocs") else pytest.param(k, marks=pytest.mark.slow) for k in FABRIC_ARGS]


@pytest.mark.parametrize("kind", EVERY)
def test_flow_decode_on_every_scaleup_fabric_is_never_faster_than_analytical(pipeline, kind):
    pf, of = pipeline("decode", f"fabric={kind}", "network=flow", *SMALL, *FABRIC_ARGS[kind])
    pa, oa = pipeline("decode", f"fabric={kind}", *SMALL, *FABRIC_ARGS[kind])
    assert pf.returncode == 0 and pa.returncode == 0, pf.stderr[-2000:] + pa.stderr[-2000:]
    flow, ana = results(of), results(oa)
    assert flow["network"] == "flow" and ana["network"] == "analytical"
    assert flow["decode_step_s"] >= ana["decode_step_s"] * (1 - 1e-9)
    assert flow["breakdown_s"]["attention"] == ana["breakdown_s"]["attention"]  # only the network differs
    assert set(flow["schedules"]) == set(ana["schedules"])


@pytest.mark.parametrize("kind", EVERY)
def test_flow_collective_on_every_scaleup_fabric(pipeline, kind):
    proc, out = pipeline("collective", f"fabric={kind}", "network=flow", "fabric.world=64", "size=[4KiB,1MiB]",
                         *FABRIC_ARGS[kind])
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = results(out)
    assert res["network"] == "flow" and res["completion_s"] > 0
    assert res["schedule"] in res["schedules"] and len(res["sweep"]) == 2
    assert (out / "completion_time.png").exists()


def test_pcie_runs_decode_and_collective_on_the_flow_model(pipeline):
    proc, out = pipeline("decode", *PCIE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert results(out)["network"] == "flow"
    proc, out = pipeline("collective", "fabric=pcie", "platform=r5080_bf3", "nodes=2", "collective=allreduce",
                         "size=1MiB")
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = results(out)
    # NCCL's own collectives on PCIe are priced by the NCCL-like model: the schedule is NCCL's choice
    assert res["network"] == "flow" and res["world"] == 16 and res["schedule"] in ("ring/ll", "ring/simple")
    assert res["completion_s"] > 0 and res["network_report"]["platform"] == "r5080_bf3"


@pytest.mark.parametrize("model", ["analytical", "simlette"])
def test_a_model_on_a_fabric_it_does_not_declare_is_refused_in_one_line(pipeline, model):
    proc, out = pipeline("decode", *PCIE, f"network={model}")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"network={model} does not run on fabric=pcie" in lines[0], proc.stderr
    assert "network=flow" in lines[0]
    assert not (out / "results.json").exists()
