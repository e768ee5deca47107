"""``python -m pipelines.replay`` end to end on CPU (gloo): VarioPath, NCCL-like and relaying
schedules with 4 and 8 processes on seeded MoE and Zipf demands, every byte verified; a killed
rank ends the run with a clear error; MLflow child run of the schedule's run.

Each replay spawns one torch process per rank (~1-2 s of import each on 2 cores): the default
suite runs three process groups; the hung-rank and torchrun checks are marked slow."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from proc_tree import alive, descendants

from collectives.alltoallv import workloads
from pipelines.hardware.cpu_testbed import TESTBED, schedule_json

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def testbed(tmp_path):
    path = tmp_path / "testbed4.yaml"
    path.write_text(yaml.safe_dump(TESTBED))
    return path


def _write(tmp_path, name, doc):
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(doc))
    return p


def _results(out):
    return json.loads((out / "results.json").read_text())


def test_replay_8_ranks_zipf_variopath_nccl_and_relays_every_byte_verified(pipeline, tmp_path, testbed):
    demand = workloads.zipf(8, 256 * 1024, 0.8, seed=7)
    files = {s: _write(tmp_path, s, schedule_json(s, 2, demand)) for s in ("variopath", "nccl", "deepep")}
    proc, out = pipeline("replay", f"schedule={files['variopath']}", f"compare=[{files['nccl']},{files['deepep']}]",
                         f"predict.platform={testbed}", "baselines=[nccl_pairwise,all_to_all_single]",
                         "iterations=2", timeout=240)
    assert proc.returncode == 0, proc.stderr
    res = _results(out)
    assert res["verified"] is True and res["world_size"] == 8 and res["backend"] == "gloo"
    assert res["device"].startswith("cpu")
    names = [p["name"] for p in res["plans"]]
    assert names == ["variopath", "nccl:nccl", "deepep:deepep", "nccl_pairwise", "all_to_all_single"]
    for p in res["plans"]:  # every rank checked every byte sent to it, in every iteration (warm-up included)
        assert p["verified"] and p["mismatched_bytes"] == 0
        assert p["checked_bytes"] == int(demand.sum()) * 3
    assert res["completion_s"] > 0 and res["algbw_Bps"] == pytest.approx(demand.sum() / 8 / res["completion_s"])
    assert res["busbw_Bps"] == pytest.approx(res["algbw_Bps"] * 7 / 8)
    assert res["predicted_completion_s"] > 0 and res["measured_over_predicted"] > 0
    assert len(res["activation_s"]) == res["schedule"]["activations"]
    assert set(res["speedup_over"]) == set(names[1:])
    # the NCCL-like schedule file and the built-in pairwise baseline are the same stages: same prediction
    by = {p["name"]: p for p in res["plans"]}
    assert by["nccl:nccl"]["predicted_completion_s"] == pytest.approx(by["nccl_pairwise"]["predicted_completion_s"])


@pytest.mark.slow  # suite time: replay fault paths run under -m slow; the 8-rank verified replay stays
def test_replay_4_ranks_moe_from_mlflow_run_logs_child_run(tmp_path, testbed):
    from mlflow.tracking import MlflowClient

    demand = workloads.moe(4, 64, experts=16, top_k=4, hidden=2048, seed=3)
    sched = schedule_json("variopath", 1, demand)
    sched["platform"] = "testbed4"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("replay-test", artifact_location=str(tmp_path / "artifacts"))
    parent = client.create_run(exp, run_name="alltoallv").info.run_id
    art = tmp_path / "parent_art"
    art.mkdir()
    (art / "schedule.json").write_text(json.dumps(sched))
    client.log_artifacts(parent, str(art))
    client.set_terminated(parent, "FINISHED")
    out = tmp_path / "run"
    env = dict(os.environ, GX_TRACKING="true")
    cmd = [sys.executable, "-m", "pipelines.replay", f"run_id={parent}", f"tracking.uri={uri}",
           "tracking.experiment=replay-test", f"predict.platform={testbed}", f"hydra.run.dir={out}"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    res = _results(out)
    assert res["verified"] and res["world_size"] == 4 and res["schedule"]["scheduler"] == "variopath"
    assert [p["name"] for p in res["plans"]] == ["variopath", "nccl_pairwise", "all_to_all_single"]
    children = client.search_runs([exp], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")
    assert len(children) == 1, "exactly one child run (no second, parentless run)"
    child = children[0]
    assert child.info.status == "FINISHED"
    assert child.data.metrics["completion_s"] == pytest.approx(res["completion_s"])
    assert child.data.metrics["predicted_completion_s"] == pytest.approx(res["predicted_completion_s"])
    assert {a.path for a in client.list_artifacts(child.info.run_id)} >= {"results.json", "replayed_schedule.json"}
    assert len(client.search_runs([exp])) == 2


@pytest.mark.slow  # suite time: replay fault paths run under -m slow; the 8-rank verified replay stays
def test_killed_rank_ends_replay_with_clear_error_and_no_results(pipeline, tmp_path, testbed):
    demand = workloads.moe(4, 32, experts=16, top_k=4, hidden=1024, seed=1)
    sched = _write(tmp_path, "vp", schedule_json("variopath", 1, demand))
    t0 = time.monotonic()
    proc, out = pipeline("replay", f"schedule={sched}", "fault.rank=3", "fault.activation=1", "timeout=20s",
                         "predict.platform=none", timeout=180)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 1
    lines = [l for l in proc.stderr.strip().splitlines() if l]
    assert lines[-1].startswith("error: replay failed: rank 3 died (exit 9) during activation 1 of variopath")
    assert "Traceback" not in proc.stderr
    assert not (out / "results.json").exists()
    assert elapsed < 120  # start-up + detection, never the 60 s process-group timeout chain


@pytest.mark.slow  # suite time: replay fault paths run under -m slow; the 8-rank verified replay stays
def test_a_flipped_bit_fails_verification(pipeline, tmp_path):
    demand = workloads.zipf(4, 64 * 1024, 0.6, seed=8)
    sched = _write(tmp_path, "nccl", schedule_json("nccl", 1, demand))
    proc, out = pipeline("replay", f"schedule={sched}", "fault.rank=1", "fault.activation=2", "fault.mode=corrupt",
                         "predict.platform=none", "baselines=[]", "warmup=0", "iterations=1", timeout=180)
    assert proc.returncode == 1
    assert "verification failed: nccl: 1 received bytes differ from the demand" in proc.stderr
    assert "(data of 1)" in proc.stderr and not (out / "results.json").exists()


@pytest.mark.slow
def test_hung_rank_is_named_after_the_timeout(pipeline, tmp_path):
    demand = workloads.zipf(4, 64 * 1024, 0.6, seed=2)
    sched = _write(tmp_path, "nccl", schedule_json("nccl", 1, demand))
    t0 = time.monotonic()
    proc, out = pipeline("replay", f"schedule={sched}", "fault.rank=2", "fault.activation=1", "fault.mode=hang",
                         "timeout=5s", "predict.platform=none", "baselines=[]", timeout=180)
    assert proc.returncode == 1
    assert "rank 2 timed out after 5 s in activation 1 of nccl" in proc.stderr
    assert not (out / "results.json").exists()
    assert time.monotonic() - t0 < 120


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("torchrun", path=str(Path(sys.executable).parent)) is None, reason="no torchrun")
def test_torchrun_prepare_run_collect(pipeline, tmp_path):
    demand = workloads.zipf(4, 32 * 1024, 0.8, seed=4)
    sched = _write(tmp_path, "vp", schedule_json("variopath", 1, demand))
    proc, out = pipeline("replay", f"schedule={sched}", "launcher=torchrun", "backend=gloo", "predict.platform=none")
    assert proc.returncode == 0, proc.stderr
    assert _results(out)["status"] == "prepared"
    torchrun = Path(sys.executable).parent / "torchrun"
    shared = tmp_path / "shared"
    run = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node=4", "--max-restarts=0", "-m",
                          "pipelines.hardware.replay_worker", str(out / "replay_input.json"), str(shared)],
                         cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    proc, out2 = pipeline("replay", f"schedule={sched}", "backend=gloo", "predict.platform=none",
                          f"reports={shared / 'rank_reports.json'}")
    assert proc.returncode == 0, proc.stderr
    res = _results(out2)
    assert res["verified"] and res["world_size"] == 4


@pytest.mark.parametrize("overrides,match", [
    ((), "exactly one of schedule"),
    (("schedule={sched}", "backend=nccl"), "needs one GPU per rank"),
])
def test_bad_input_is_one_line_exit_2(pipeline, tmp_path, overrides, match):
    if "backend=nccl" in overrides:
        import torch

        if torch.cuda.is_available() and torch.cuda.device_count() >= 4:
            pytest.skip("enough GPUs here")
    demand = workloads.zipf(4, 4096, 0.5, seed=0)
    sched = _write(tmp_path, "vp", schedule_json("nccl", 1, demand))
    proc, out = pipeline("replay", *(o.format(sched=sched) for o in overrides), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert match in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (out / "results.json").exists()


@pytest.mark.slow
def test_replay_of_a_real_alltoallv_run_predicts_what_that_run_reported(tmp_path):
    """pipelines.alltoallv (Figure 1 server, MoE demand) logs schedule.json to MLflow; the replay
    fetches it by run id, predicts with conf/platform/fig1.yaml, and logs itself as the child run."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = dict(os.environ, GX_TRACKING="true")
    a2a = tmp_path / "a2a"
    proc = subprocess.run([sys.executable, "-m", "pipelines.alltoallv", "platform=fig1", "workload=moe",
                           "workload.tokens_per_rank=64", "workload.hidden=1024", "tracking=mlflow",
                           f"tracking.uri={uri}", "tracking.experiment=e2e", f"hydra.run.dir={a2a}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("e2e").experiment_id
    (parent,) = client.search_runs([exp])
    out = tmp_path / "rep"
    proc = subprocess.run([sys.executable, "-m", "pipelines.replay", f"run_id={parent.info.run_id}",
                           f"tracking.uri={uri}", "tracking.experiment=e2e", "iterations=1",
                           f"hydra.run.dir={out}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    res, a2a_res = _results(out), _results(a2a)
    assert res["verified"] and res["world_size"] == 6
    assert res["predicted_completion_s"] == pytest.approx(a2a_res["completion_s"], rel=1e-9)
    children = client.search_runs([exp], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert len(children) == 1 and children[0].info.status == "FINISHED"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.slow  # suite time (both signals under -m slow)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_on_the_replay_parent_leaves_no_orphaned_ranks(tmp_path, sig):
    """A hung rank keeps every rank waiting in a collective; stopping the parent must take them all
    down at once (SIGTERM: the parent stops them; SIGKILL: each rank's parent-death signal)."""
    demand = workloads.zipf(4, 16 * 1024, 0.6, seed=5)
    sched = _write(tmp_path, "nccl", schedule_json("nccl", 1, demand))
    cmd = [sys.executable, "-m", "pipelines.replay", f"schedule={sched}", "fault.rank=2", "fault.activation=1",
           "fault.mode=hang", "timeout=300s", "predict.platform=none", "baselines=[]", "warmup=0",
           f"hydra.run.dir={tmp_path / 'run'}"]
    log = tmp_path / "stderr.txt"  # a file, not a pipe: orphans holding a pipe open would hang the test instead
    with open(log, "w") as err_file:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err_file, text=True)
    deadline = time.monotonic() + 180
    tree: set[int] = set()
    while time.monotonic() < deadline and proc.poll() is None:
        tree |= descendants(proc.pid)
        if len(alive(tree)) >= 5:  # the forkserver and 4 ranks
            break
        time.sleep(0.2)
    assert len(alive(tree)) >= 5, f"ranks did not start: {proc.poll()}"
    time.sleep(3)  # past start-up: the ranks sit in the hung activation's collective
    tree |= descendants(proc.pid)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    err = log.read_text()
    t0 = time.monotonic()
    while alive(tree) and time.monotonic() - t0 < 20:
        time.sleep(0.2)
    assert not alive(tree), f"orphaned ranks: {alive(tree)}"
    assert time.monotonic() - t0 < 20
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM
        assert "replay stopped by SIGTERM" in err and "Traceback" not in err
    assert not (tmp_path / "run" / "results.json").exists()
