"""Large sweeps: the results table, the background MLflow writer, config reuse in workers, and
(slow) a 300-point sweep killed mid-way and resumed, and a sweep on a two-node Ray cluster."""

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.sweep_table import ResultsTable, read_rows, table_row, top_rows, write_dedup_csv

ROOT = Path(__file__).resolve().parents[2]


def test_results_table_appends_a_finished_point_once_and_survives_a_torn_line(tmp_path):
    table = ResultsTable(tmp_path)
    assert table.append(table_row(0, "h0", "a", "FINISHED", {"x": 1.0}))
    assert table.append(table_row(1, "h1", "b", "FAILED", {}, error="boom"))
    assert not table.append(table_row(0, "h0", "a", "FINISHED", {"x": 1.0}))  # never twice
    table.close()
    with open(tmp_path / "results.jsonl", "ab") as f:
        f.write(b'{"index": 2, "cfg_hash": "h2", "sta')  # a kill mid-line
    again = ResultsTable(tmp_path)  # a rerun: knows h0, ends the torn line
    assert again.finished == {"h0"}
    assert again.append(table_row(1, "h1", "b", "FINISHED", {"x": 3.0}))
    again.close()
    rows = list(read_rows(tmp_path / "results.jsonl"))
    assert [(r["cfg_hash"], r["status"]) for r in rows] == [("h0", "FINISHED"), ("h1", "FAILED"), ("h1", "FINISHED")]
    n = write_dedup_csv([tmp_path], tmp_path / "t.csv")
    with open(tmp_path / "t.csv") as f:
        table_csv = list(csv.DictReader(f))
    assert n == 2 and [(r["cfg_hash"], r["status"], r["m.x"]) for r in table_csv] == [
        ("h0", "FINISHED", "1.0"), ("h1", "FINISHED", "3.0")]
    assert [r["cfg_hash"] for r in top_rows([tmp_path], "x", 1)] == ["h1"]
    assert [r["cfg_hash"] for r in top_rows([tmp_path], "x_s", 1)] == []  # no such metric


def test_tracking_writer_logs_every_point_once_in_order_and_never_raises():
    from pipelines.tracking import TrackingWriter

    class Tracker:
        down = None

        def __init__(self):
            self.logged = []

        def log_point(self, parent_id, *, name, **kw):
            if name == "bad":
                raise RuntimeError("database is locked")
            self.logged.append(name)
            return f"run-{name}"

    tracker, after = Tracker(), []
    writer = TrackingWriter(tracker, on_logged=lambda item, run_id: after.append((item["name"], run_id)), batch=3)
    for name in ["a", "b", "bad", "c", "d"]:
        writer.put({"parent_id": "p", "name": name, "_row": {}})
    writer.close()
    assert tracker.logged == ["a", "b", "c", "d"]
    assert after == [("a", "run-a"), ("b", "run-b"), ("bad", None), ("c", "run-c"), ("d", "run-d")]
    assert tracker.down == "database is locked"


def test_a_worker_reuses_its_config_and_each_point_sees_its_own_values():
    from pipelines.sweep import ReusedConfig, _leaf_changes

    seen = []

    def task(cfg):
        seen.append((cfg.batch, cfg.fabric.link_rate, cfg.fabric.get("extra")))
        return {"batch": cfg.batch, "node": cfg.fabric}

    configs = ReusedConfig()
    points = [{"batch": b, "fabric": {"link_rate": r}} for b in (1, 2) for r in ("400Gb/s", "800Gb/s")]
    points.append({"batch": 3, "fabric": {"link_rate": "1.6Tb/s", "extra": 1}})  # other keys: a fresh config
    results = [configs.run(task, p) for p in points]
    assert seen == [(1, "400Gb/s", None), (1, "800Gb/s", None), (2, "400Gb/s", None), (2, "800Gb/s", None),
                    (3, "1.6Tb/s", 1)]
    # results hold plain copies, not nodes a later point changes
    assert [r["node"]["link_rate"] for r in results] == ["400Gb/s", "800Gb/s", "400Gb/s", "800Gb/s", "1.6Tb/s"]
    assert _leaf_changes({"a": {"b": 1}}, {"a": {"b": 1.0}}) == [("a.b", 1.0)]  # a type change is a change

    def writer(cfg):
        cfg.batch = 99  # a task that writes to its config gets a writable one of its own
        return {"batch": cfg.batch}

    assert ReusedConfig().run(writer, {"batch": 1}) == {"batch": 99}


# -- whole sweeps in subprocesses (slow) ------------------------------------------------------

def env_for(tmp: Path, tracking: bool = True) -> dict:
    env = dict(os.environ, GX_TRACKING="true" if tracking else "false",
               MLFLOW_TRACKING_URI=f"sqlite:///{tmp / 'mlflow.db'}", PYTHONPATH=str(ROOT))
    env.pop("RAY_ADDRESS", None)
    return env


CHEAP = ["model=llama3_1_8b", "parallel=tp_ep", "world=8", "parallel.tp=8", "parallel.ep=1"]
POINTS_300 = CHEAP + ["fabric=single_eps,single_ocs", "batch=1,2,3,4,5",
                      "context=" + ",".join(f"{k}K" for k in range(1, 31))]


def decode_sweep(tmp: Path, *args: str, wait: bool = True, env=None, timeout: int = 900):
    cmd = [sys.executable, "-m", "pipelines.decode", "-m", *args, f"hydra.sweep.dir={tmp / 'multi'}"]
    if not wait:
        return subprocess.Popen(cmd, cwd=tmp, env=env or env_for(tmp), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=tmp, env=env or env_for(tmp), capture_output=True, text=True, timeout=timeout)


def table_lines(tmp: Path) -> list[dict]:
    return list(read_rows(tmp / "multi" / "results.jsonl"))


def child_runs(tmp: Path) -> list[tuple]:
    con = sqlite3.connect(tmp / "mlflow.db")
    try:
        return con.execute(
            "select r.status, (select value from tags t where t.run_uuid=r.run_uuid and t.key='gx.config_hash') "
            "from runs r where r.lifecycle_stage='active' and exists (select 1 from tags t where "
            "t.run_uuid=r.run_uuid and t.key='mlflow.parentRunId')").fetchall()
    finally:
        con.close()


def kill_mid_sweep(tmp: Path, sig: int, args: list[str], at_rows: int = 40):
    proc = decode_sweep(tmp, *args, wait=False)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and len(table_lines(tmp)) < at_rows:
        time.sleep(0.2)
    proc.send_signal(sig)
    proc.communicate(timeout=300)
    first = [r for r in table_lines(tmp) if r["status"] == "FINISHED"]
    assert at_rows <= len(first) < 300, "the signal should land mid-sweep"
    return first


def assert_every_point_once(tmp: Path) -> set[str]:
    finished = [r["cfg_hash"] for r in table_lines(tmp) if r["status"] == "FINISHED"]
    assert len(finished) == 300 and len(set(finished)) == 300, "every point once in the table"
    return set(finished)


@pytest.mark.slow
def test_a_large_sweep_killed_mid_way_resumes_with_every_point_once_in_table_and_mlflow(tmp_path):
    args = POINTS_300 + ["ray.enabled=false", "tracking.max_child_runs=50", "tracking.top_k=5"]
    first = kill_mid_sweep(tmp_path, signal.SIGKILL, args)
    again = decode_sweep(tmp_path, *args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{300 - len(first)} done, 0 failed, {len(first)} skipped" in again.stderr
    hashes = assert_every_point_once(tmp_path)
    with open(tmp_path / "multi" / "sweep_results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 300 and {r["cfg_hash"] for r in rows} == hashes  # the parent's artifact
    kids = child_runs(tmp_path)
    assert len(kids) == 5 and {s for s, _ in kids} == {"FINISHED"} and len({h for _, h in kids}) == 5
    artifacts = list((tmp_path / "mlruns").rglob("sweep_results.csv"))
    assert artifacts, "the table is an artifact of the parent run"


@pytest.mark.slow
def test_a_tracked_sweep_stopped_by_sigterm_resumes_with_every_point_once_in_table_and_mlflow(tmp_path):
    args = POINTS_300 + ["ray.enabled=false"]
    kill_mid_sweep(tmp_path, signal.SIGTERM, args)
    again = decode_sweep(tmp_path, *args)
    assert again.returncode == 0, again.stderr[-3000:]
    hashes = assert_every_point_once(tmp_path)
    kids = [(s, h) for s, h in child_runs(tmp_path) if s == "FINISHED"]
    assert len(kids) == 300 and {h for _, h in kids} == hashes  # one child per point, none twice


@pytest.mark.slow
def test_a_sweep_runs_on_a_two_node_ray_cluster_started_on_this_machine(tmp_path):
    from benchmarks.sweep_driver import two_node_cluster

    with two_node_cluster(tmp_path / "ray") as address:
        env = env_for(tmp_path, tracking=False)
        proc = decode_sweep(tmp_path, *CHEAP, "fabric=single_eps,single_ocs", "batch=1,2,4,8",
                            "context=1K,2K,4K,8K", f"ray.address={address}", "ray.batch_size=1", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "32 done, 0 failed" in proc.stderr
    nodes = {r["worker"].rpartition("@")[2] for r in table_lines(tmp_path)}
    assert len(nodes) == 2, f"points ran on both nodes: {nodes}"
    assert json.loads((tmp_path / "multi" / "sweep.json").read_text())["done"] == 32


def test_top_k_by_a_pattern_takes_each_points_best_matching_metric(tmp_path):
    from pipelines.sweep_table import metric_value

    table = ResultsTable(tmp_path)
    for i, (a, b) in enumerate([(3.0, 2.0), (1.5, 9.0), (4.0, 0.5)]):
        table.append(table_row(i, f"h{i}", str(i), "FINISHED", {"schedules.ring.time_s": a, "schedules.direct.time_s": b}))
    table.close()
    assert metric_value({"schedules.ring.time_s": 3.0, "schedules.direct.time_s": 2.0, "x": 0.1},
                        "schedules.*.time_s") == 2.0
    assert [r["cfg_hash"] for r in top_rows([tmp_path], "schedules.*.time_s", 2)] == ["h2", "h1"]


def test_the_driver_reports_its_own_peak_memory_not_its_parents():
    """A driver started by a large process (a notebook, a pytest worker) reports its own peak."""
    child = ("import sys; sys.path.insert(0, sys.argv[1]); from pipelines.sweep import peak_rss_mib; "
             "print(round(peak_rss_mib()))")
    parent = ("import subprocess, sys; big = bytearray(768 << 20); big[::4096] = b'x' * len(big[::4096]); "
              f"print(subprocess.run([sys.executable, '-c', {child!r}, sys.argv[1]], capture_output=True, "
              "text=True, check=True).stdout.strip())")
    out = subprocess.run([sys.executable, "-c", parent, str(ROOT)], capture_output=True, text=True, check=True,
                         timeout=120)
    assert 5 < int(out.stdout) < 300, out.stdout  # MiB: the child's own (≈ 30), not the parent's 768
