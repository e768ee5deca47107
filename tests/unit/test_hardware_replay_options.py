"""Replay configuration checks (pipelines.replay options, plans, predictions) without processes."""

import json

import pytest
from omegaconf import OmegaConf

from collectives.alltoallv import workloads
from collectives.errors import SpecError
from pipelines.hardware.cpu_testbed import TESTBED, schedule_json
from pipelines.replay import options_of, plans_of, predictions

BASE = {"schedule": None, "run_id": None, "compare": [], "baselines": ["nccl_pairwise", "all_to_all_single"],
        "backend": "gloo", "launcher": "spawn", "reports": None,
        "predict": {"platform": "none", "nodes": "auto", "activation_overhead": "0us"},
        "warmup": 1, "iterations": 3, "timeout": "60s", "startup_timeout": "180s", "threads_per_rank": 1,
        "fault": {"rank": None, "plan": 0, "iteration": 0, "activation": 0, "mode": "kill"}}


def cfg(**over):
    c = OmegaConf.create(BASE)
    for k, v in over.items():
        OmegaConf.update(c, k, v)
    return c


def test_options_and_the_process_group_timeout_above_the_watchdog():
    o = options_of(cfg(timeout="20s"), 4)
    assert o["backend"] == "gloo" and o["timeout_s"] == 20 and o["collective_timeout_s"] > o["timeout_s"]
    assert o["fault"] == {}
    o = options_of(cfg(**{"fault.rank": 3, "fault.activation": 1}), 4)
    assert o["fault"]["rank"] == 3 and o["fault"]["mode"] == "kill"


@pytest.mark.parametrize("over,match", [
    ({"backend": "mpi"}, "backend='mpi' is unknown"),
    ({"fault.rank": 9}, "fault.rank=9 is not a rank"),
    ({"fault.rank": 1, "fault.mode": "explode"}, "fault.mode='explode'"),
    ({"iterations": 0}, "iterations=0"),
    ({"timeout": "soon"}, "timeout"),
])
def test_bad_options(over, match):
    with pytest.raises(SpecError, match=match):
        options_of(cfg(**over), 4)


def test_plans_baselines_compare_and_predictions(tmp_path):
    demand = workloads.zipf(4, 8192, 0.5, seed=3)
    vp, nccl = schedule_json("variopath", 1, demand), schedule_json("nccl", 1, demand)
    (tmp_path / "nccl.json").write_text(json.dumps(nccl))
    plat = tmp_path / "tb.yaml"
    import yaml

    plat.write_text(yaml.safe_dump(TESTBED))
    c = cfg(compare=[str(tmp_path / "nccl.json")], **{"predict.platform": str(plat)})
    plans = plans_of(c, vp)
    assert [p.name for p in plans] == ["variopath", "nccl:nccl", "nccl_pairwise", "all_to_all_single"]
    pred = predictions(c, vp, plans)
    assert set(pred) == {"variopath", "nccl:nccl", "nccl_pairwise"}
    assert pred["nccl:nccl"] == pytest.approx(pred["nccl_pairwise"]) and all(v > 0 for v in pred.values())
    assert predictions(cfg(), vp, plans) == {}  # predict.platform=none
    other = schedule_json("nccl", 1, workloads.zipf(4, 4096, 0.5, seed=4))
    (tmp_path / "other.json").write_text(json.dumps(other))
    with pytest.raises(SpecError, match="another demand"):
        plans_of(cfg(compare=[str(tmp_path / "other.json")]), vp)
    with pytest.raises(SpecError, match="baselines entry 'ring'"):
        plans_of(cfg(baselines=["ring"]), vp)
    with pytest.raises(SpecError, match="predict.platform='nowhere'"):
        predictions(cfg(**{"predict.platform": "nowhere"}), vp, plans)
    with pytest.raises(SpecError, match="world_size=4 is not a multiple"):
        predictions(cfg(**{"predict.platform": "r5080_bf3"}), vp, plans)
