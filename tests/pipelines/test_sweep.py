"""Orchestration: -m sweeps on Ray with MLflow tracking, failures, reruns, a killed driver."""

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from proc_tree import alive, descendants_running, wait_until

ROOT = Path(__file__).resolve().parents[2]


def sweep(tmp: Path, *args: str, wait=True, timeout=400):
    env = dict(os.environ, GX_TRACKING="true", MLFLOW_TRACKING_URI=f"sqlite:///{tmp / 'mlflow.db'}")
    cmd = [sys.executable, "-m", "pipelines.decode", "-m", *args, f"hydra.sweep.dir={tmp / 'multi'}"]
    if not wait:
        return subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)


def runs(tmp: Path) -> list[tuple]:
    """(run_uuid, status, parent, config_hash, lifecycle) of every run in the store."""
    db = tmp / "mlflow.db"
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "select r.run_uuid, r.status, "
            "(select value from tags t where t.run_uuid=r.run_uuid and t.key='mlflow.parentRunId'), "
            "(select value from tags t where t.run_uuid=r.run_uuid and t.key='gx.config_hash'), "
            "r.lifecycle_stage from runs r").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()
    return [r for r in rows if r[4] == "active"]


def children(tmp):
    return [r for r in runs(tmp) if r[2]]


def test_sweep_on_ray_logs_parent_and_children_and_rerun_skips(tmp_path):
    proc = sweep(tmp_path, "batch=1,2,4", "fabric=single_eps,single_ocs", "ray.num_cpus=2", "ray.colocate=[batch]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "6 done, 0 failed, 0 skipped" in proc.stderr
    # colocated points (same fabric, any batch) ran in one task, so in one worker process
    timeline = json.loads((tmp_path / "multi" / "sweep_timeline.json").read_text())
    assert timeline["ray"] and len(timeline["points"]) == 6
    by_fabric: dict = {}
    for row in timeline["points"]:
        by_fabric.setdefault("fabric=single_ocs" in row["point"], set()).add(row["worker"])
    assert all(len(workers) == 1 for workers in by_fabric.values()), by_fabric
    kids = children(tmp_path)
    parents = [r for r in runs(tmp_path) if not r[2]]
    assert len(parents) == 1 and len(kids) == 6
    assert {r[1] for r in kids} == {"FINISHED"} and len({r[3] for r in kids}) == 6
    assert all((tmp_path / "multi" / str(i) / "results.json").exists() for i in range(6))
    # each job folder keeps Hydra's .hydra/ as a normal run does
    hydra_dir = tmp_path / "multi" / "5" / ".hydra"
    config = yaml.safe_load((hydra_dir / "config.yaml").read_text())
    overrides = yaml.safe_load((hydra_dir / "overrides.yaml").read_text())
    hydra_cfg = yaml.safe_load((hydra_dir / "hydra.yaml").read_text())["hydra"]
    assert "hydra" not in config and config["batch"] == 4 and config["fabric"]["name"] == "single_ocs"
    assert "batch=4" in overrides and "fabric=single_ocs" in overrides
    assert hydra_cfg["runtime"]["output_dir"] == str((tmp_path / "multi" / "5").resolve())
    assert hydra_cfg["job"]["num"] == 5
    # progress: plain lines off a terminal, the result table at the end
    assert "\r" not in proc.stderr and "done 6 · failed 0 · skipped 0 · ETA 0 s" in proc.stderr
    assert sum(l.startswith("|") for l in proc.stdout.splitlines()) == 8  # header, rule, 6 points
    record = json.loads((tmp_path / "multi" / "sweep.json").read_text())
    assert record["done"] == 6 and record["exit_code"] == 0 and record["parent_run_id"]
    again = sweep(tmp_path, "batch=1,2,4", "fabric=single_eps,single_ocs", "ray.num_cpus=2")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 done, 0 failed, 6 skipped" in again.stderr
    assert len(children(tmp_path)) == 6 and len([r for r in runs(tmp_path) if not r[2]]) == 1
    # the report regenerates the comparison from MLflow alone
    env = dict(os.environ, GX_TRACKING="true", MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")
    rep = subprocess.run([sys.executable, "-m", "pipelines.report", f"hydra.run.dir={tmp_path / 'report'}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    res = json.loads((tmp_path / "report" / "results.json").read_text())
    assert res["pipeline"] == "decode" and len(res["rows"]) == 6
    assert {r["fabric"] for r in res["rows"]} == {"single_eps", "single_ocs"}
    assert (tmp_path / "report" / "pareto.png").stat().st_size > 1000
    assert len(runs(tmp_path)) == 7, "the report must not log runs of its own"


def test_failing_points_are_recorded_and_the_rest_still_run(tmp_path):
    proc = sweep(tmp_path, "batch=1,32,2", "ray.enabled=false")
    assert proc.returncode == 1, proc.stderr[-3000:]  # a failed point: exit 1, after the summary
    assert "2 done, 1 failed, 0 skipped" in proc.stderr
    assert "batch=32" in proc.stderr
    assert "a rerun of the same command skips the 2 finished point(s) and runs the other 1" in proc.stderr
    table = [l for l in proc.stdout.splitlines() if l.startswith("| ")]
    assert table[0].startswith("| batch | interactivity_tok_s_user |") and table[0].endswith("| status |")
    assert [r.rsplit("|", 2)[1].strip() for r in table[1:]] == ["FINISHED", "FAILED", "FINISHED"]
    statuses = sorted(r[1] for r in children(tmp_path))
    assert statuses == ["FAILED", "FINISHED", "FINISHED"]
    con = sqlite3.connect(tmp_path / "mlflow.db")
    (err,) = con.execute("select value from tags where key='gx.error'").fetchone()
    assert "HBM" in err or "fit" in err


def test_killed_driver_then_rerun_loses_nothing_and_duplicates_nothing(tmp_path):
    points = ["batch=1,2,4,8,16", "context=32K,1M,5M", "ray.enabled=false"]
    proc = sweep(tmp_path, *points, wait=False)

    def computed() -> int:  # points whose results are on disk (logged to the store a moment later)
        return len(list((tmp_path / "multi").rglob("results.json")))

    deadline = time.time() + 240
    while time.time() < deadline and computed() < 3:
        time.sleep(0.05)
    trackers = descendants_running(proc.pid, b"pipelines.tracking_process")
    assert len(trackers) == 1, "the sweep's tracker runs in a process of its own"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert wait_until(lambda: not alive(trackers), 10), "the tracking process dies with its driver"
    first = [r for r in children(tmp_path) if r[1] == "FINISHED"]
    assert 3 <= computed() < 15 and len(first) < 15, "the kill should land mid-sweep"
    again = sweep(tmp_path, *points)
    assert again.returncode == 0, again.stderr[-3000:]
    kids = children(tmp_path)
    assert len(kids) == 15 and {r[1] for r in kids} == {"FINISHED"}
    assert len({r[3] for r in kids}) == 15
    # A point the killed driver computed but had not logged yet (the background writer) is adopted
    # from its job directory by the rerun, not computed again: it counts as skipped too.
    adopted = re.search(r"logged (\d+) point\(s\) an earlier run computed", again.stderr)
    skipped = len(first) + (int(adopted.group(1)) if adopted else 0)
    assert f"{skipped} skipped" in again.stderr, again.stderr[-2000:]


def test_bad_override_fails_before_ray_starts(tmp_path):
    proc = sweep(tmp_path, "batch=1,2", "model=megatron_9t")
    assert proc.returncode == 2
    assert "megatron_9t" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "mlflow.db").exists()
    proc = sweep(tmp_path, "batch=1,2", "tracking.enabled=maybe")
    assert proc.returncode == 2 and "enabled" in proc.stderr
