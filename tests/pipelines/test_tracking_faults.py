"""Tracking under faults: a store that dies mid-sweep, an unreachable store, two drivers at once,
two processes creating one SQLite store; idempotent logging by config hash; ``gx sync``."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipelines.report import one_run_per_point
from pipelines.tracking import PENDING, RECORD, FileLock, PointRecord, StoreUnavailable, SweepLocked, Tracker

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(uri: str | None = None) -> dict:
    env = dict(os.environ, GX_TRACKING="true", PYTHONPATH=str(ROOT))
    if uri:
        env["MLFLOW_TRACKING_URI"] = uri
    return env


def gx(tmp: Path, pipeline: str, *args: str, uri: str, wait=True, timeout=600):
    cmd = [PY, "-m", f"pipelines.{pipeline}", *args]
    if not wait:
        return subprocess.Popen(cmd, cwd=tmp, env=env_for(uri), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    return subprocess.run(cmd, cwd=tmp, env=env_for(uri), capture_output=True, text=True, timeout=timeout)


def children(db: Path) -> list[tuple]:
    """(status, config hash) of every active child run in a SQLite store."""
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "select r.status, (select value from tags t where t.run_uuid=r.run_uuid and t.key='gx.config_hash') "
            "from runs r where r.lifecycle_stage='active' and exists (select 1 from tags t where "
            "t.run_uuid=r.run_uuid and t.key='mlflow.parentRunId')").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()
    return rows


def parents(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("select r.run_uuid, r.status from runs r where r.lifecycle_stage='active' and exists "
                           "(select 1 from tags t where t.run_uuid=r.run_uuid and t.key='gx.sweep_hash')").fetchall()
    finally:
        con.close()


class MlflowServer:
    """A real ``mlflow server`` on 127.0.0.1 in its own process group (killed as a whole)."""

    def __init__(self, tmp: Path, port: int | None = None):
        self.tmp, self.port = tmp, port or free_port()
        self.db = tmp / "server.db"
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self, timeout_s: float = 240) -> "MlflowServer":
        env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
        self.proc = subprocess.Popen(
            [PY, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{self.db}", "--artifacts-destination", str(self.tmp / "artifacts")],
            cwd=self.tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        import requests

        deadline = time.time() + timeout_s
        while time.time() < deadline:
            try:
                if requests.get(f"{self.uri}/health", timeout=2).ok:
                    return self
            except requests.RequestException:
                pass
            assert self.proc.poll() is None, "mlflow server exited at start"
            time.sleep(0.5)
        raise AssertionError("mlflow server did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


# -- in-process: a store that fails, idempotence, adoption, sync --------------------------------

@pytest.fixture(autouse=True)
def _in_tmp(tmp_path_factory, monkeypatch):
    """A SQLite store puts its experiments' artifacts under ./mlruns, as MLflow does: the tests
    work in a folder of their own (not the checkout, nor a folder a test logs as artifacts)."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite store for the in-process tests (each test uses its own experiment)."""
    return f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"


class DeadClient:
    """Stands in for MlflowClient once the server is gone: every call fails as requests would."""

    def __getattr__(self, name):
        def fail(*a, **k):
            raise ConnectionError("Connection refused")
        return fail


def points(tmp: Path, n: int) -> list:
    return [SimpleNamespace(index=i, overrides=[f"batch={2 ** i}", "fabric=single_eps", "ray.enabled=false"],
                            cfg={"batch": 2 ** i, "fabric": {"name": "single_eps"}, "tp": None},
                            cfg_hash=f"h{i:04d}", name=f"batch={2 ** i}", out_dir=tmp / "sweep" / str(i))
            for i in range(n)]


def run_point(tracker, parent, p, existing=None):
    """What the driver does for a point: files first, then the store."""
    p.out_dir.mkdir(parents=True, exist_ok=True)
    (p.out_dir / "results.json").write_text(json.dumps({"batch": p.cfg["batch"], "throughput_tok_s": 10.0 * p.index}))
    return tracker.log_point(parent, pipeline="decode", cfg_hash=p.cfg_hash, name=p.name, params=p.cfg,
                             results=json.loads((p.out_dir / "results.json").read_text()), artifact_dir=p.out_dir,
                             out_dir=p.out_dir, wall_s=0.25, stale=(existing or {}).get(p.cfg_hash))


def test_store_down_mid_sweep_never_raises_then_next_run_adopts_and_sync_duplicates_nothing(tmp_path, store, capsys):
    from pipelines.sync import job_records, sync_sweep

    pts = points(tmp_path, 5)
    tracker = Tracker(uri=store, experiment="down-mid-sweep", report=False)
    parent = tracker.open_sweep("sweepA", "decode sweep (5 points)", "decode", pts)
    assert run_point(tracker, parent, pts[0])
    tracker.client = DeadClient()  # the server dies
    for p in pts[1:]:
        assert run_point(tracker, parent, p) is None  # never raises into the sweep
    tracker.finish_parent(parent, {"done": 5, "failed": 0, "skipped": 0})
    err = capsys.readouterr().err
    assert err.count("warning: tracking store") == 1, err  # said once
    assert "gx sync" in tracker.closing_line() and "4 point(s) not logged" in tracker.closing_line()
    pending = [json.loads(x) for x in (tmp_path / "sweep" / PENDING).read_text().splitlines()]
    assert [x["cfg_hash"] for x in pending] == ["h0001", "h0002", "h0003", "h0004"]
    assert all((p.out_dir / RECORD).is_file() and (p.out_dir / "results.json").is_file() for p in pts)
    tracker.close()

    # the next run of the same sweep (another sweep dir) logs them from disk instead of computing them
    again = Tracker(uri=store, experiment="down-mid-sweep", report=False)
    rerun = points(tmp_path / "rerun", 5)
    assert again.open_sweep("sweepA", "decode sweep (5 points)", "decode", rerun) == parent
    existing = again.children(parent)
    assert len(existing) == 1
    assert again.adopt_from_disk(parent, rerun, existing) == 4
    assert sorted(existing) == [p.cfg_hash for p in pts]
    again.finish_parent(parent, {"done": 0, "failed": 0, "skipped": 5})
    again.close()
    # gx sync over the first sweep's directory finds everything logged: nothing twice
    sync = Tracker(uri=store, experiment="down-mid-sweep", report=False)
    (jobs,) = job_records(tmp_path / "sweep").values()
    summary = sync_sweep(sync, "sweepA", jobs)
    assert (summary["uploaded"], summary["already"]) == (0, 5)
    kids = sync.children(parent)
    assert len(kids) == 5 and all(len(runs) == 1 and runs[0].info.status == "FINISHED" for runs in kids.values())
    run = sync.client.get_run(kids["h0002"][0].info.run_id)
    assert run.data.metrics["timing.wall_s"] == 0.25 and run.data.metrics["throughput_tok_s"] == 20.0
    assert "tp" not in run.data.params and "None" not in run.data.params.values()
    top = sync.client.get_run(parent)
    assert top.data.params["batch"] == "1,2,4,8,16" and top.data.params["fabric"] == "single_eps"
    assert top.data.params["gx.swept_keys"] == "batch" and "ray.enabled" not in top.data.params
    assert top.data.metrics["sweep.done"] == 5 and top.data.metrics["sweep.points"] == 5
    assert top.data.metrics["run.skipped"] == 5 and top.info.status == "FINISHED"
    exp = sync.client.get_experiment(sync.experiment_id)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"


def test_a_point_is_logged_once_per_config_hash(tmp_path, store):
    pts = points(tmp_path, 2)
    tracker = Tracker(uri=store, experiment="idempotent", report=False)
    parent = tracker.open_sweep("sweepB", "b", "decode", pts)
    first = run_point(tracker, parent, pts[0])
    assert run_point(tracker, parent, pts[0]) == first  # checked before logging
    # a duplicate that got past the check (two drivers on two hosts): the earliest stays
    dup = tracker.client.create_run(tracker.experiment_id, tags={"gx.config_hash": "h0000",
                                                                  "mlflow.parentRunId": parent})
    tracker.client.set_terminated(dup.info.run_id, "FINISHED")
    kids = tracker.children(parent)
    assert [r.info.run_id for r in kids["h0000"]] == [first]
    assert tracker.client.get_run(dup.info.run_id).info.lifecycle_stage == "deleted"
    tracker.close()


def test_a_single_run_the_store_missed_is_synced_once(tmp_path, store):
    from pipelines.sync import job_records, sync_single_runs

    down = Tracker(uri=store, experiment="single", report=False)
    down.client = DeadClient()
    (tmp_path / "results.json").write_text(json.dumps({"throughput_tok_s": 5.0}))
    assert down.log_point(None, pipeline="decode", cfg_hash="solo", name="decode", params={"batch": 1},
                          results={"throughput_tok_s": 5.0}, artifact_dir=tmp_path, out_dir=tmp_path) is None
    (jobs,) = job_records(tmp_path).values()
    sync = Tracker(uri=store, experiment="single", report=False)
    assert sync_single_runs(sync, jobs)["uploaded"] == 1
    assert sync_single_runs(sync, jobs)["already"] == 1  # idempotent
    runs = sync.client.search_runs([sync.experiment_id], "tags.`gx.config_hash` = 'solo'")
    assert len(runs) == 1 and runs[0].data.metrics["throughput_tok_s"] == 5.0


def test_report_reads_one_run_per_config_hash():
    def run(h, status, start, rid):
        return SimpleNamespace(info=SimpleNamespace(status=status, start_time=start, run_id=rid),
                               data=SimpleNamespace(tags={"gx.config_hash": h} if h else {}))

    runs = [run("a", "FAILED", 1, "r1"), run("a", "FINISHED", 3, "r2"), run("a", "FINISHED", 2, "r3"),
            run("b", "FAILED", 1, "r4"), run("b", "FAILED", 5, "r5"), run(None, "FINISHED", 1, "r6")]
    assert sorted(r.info.run_id for r in one_run_per_point(runs)) == ["r3", "r5", "r6"]


def test_one_driver_per_sweep_and_a_killed_driver_leaves_no_stale_lock(tmp_path, store):
    tracker = Tracker(uri=store, experiment="locks", report=False)
    tracker.open_sweep("sweepC", "c", "decode", points(tmp_path, 1))
    other = Tracker(uri=store, experiment="locks", report=False)
    with pytest.raises(SweepLocked, match=f"already running .*pid {os.getpid()}"):
        other.open_sweep("sweepC", "c", "decode", points(tmp_path, 1))
    tracker.close()
    assert other.open_sweep("sweepC", "c", "decode", points(tmp_path, 1))
    other.close()
    # a holder killed with SIGKILL: the kernel drops its flock, the next driver takes it at once
    path = tmp_path / "held.lock"
    holder = subprocess.Popen([PY, "-c", f"from pipelines.tracking import FileLock; import time; "
                               f"assert FileLock({str(path)!r}).acquire(); print('held', flush=True); time.sleep(60)"],
                              env=env_for(), stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    assert not FileLock(path).acquire()
    holder.kill()
    holder.wait(timeout=30)
    assert FileLock(path).acquire()


def test_unreachable_store_is_refused_at_open_within_seconds():
    t0 = time.perf_counter()
    with pytest.raises(StoreUnavailable, match="unreachable .*connection refused"):
        Tracker(uri=f"http://127.0.0.1:{free_port()}", experiment="x")
    # a port that accepts connections but never answers: bounded by the probe's read timeout
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        with pytest.raises(StoreUnavailable, match="unreachable"):
            Tracker(uri=f"http://127.0.0.1:{silent.getsockname()[1]}", experiment="x")
    assert time.perf_counter() - t0 <= 10


def test_point_record_round_trips(tmp_path):
    rec = PointRecord(pipeline="decode", cfg_hash="abc", name="batch=1", params={"batch": 1}, status="FINISHED",
                      wall_s=1.5, sweep_hash="s", sweep_name="n", swept={"batch": "1,2"}, points=2)
    rec.write(tmp_path)
    assert PointRecord.read(tmp_path) == rec
    (tmp_path / RECORD).write_text("{truncated")
    assert PointRecord.read(tmp_path) is None


# -- whole pipelines in subprocesses ---------------------------------------------------------------

def test_unreachable_store_at_start_one_line_exit_2_nothing_written(tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"
    t0 = time.perf_counter()
    proc = gx(tmp_path, "decode", "-m", "batch=1,2", "ray.enabled=false", f"hydra.sweep.dir={tmp_path / 'multi'}",
              uri=uri, timeout=120)
    wall = time.perf_counter() - t0
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "unreachable" in lines[0] and uri in lines[0] and "Traceback" not in proc.stderr
    assert not list((tmp_path / "multi").rglob("results.json"))
    assert wall <= 10 + 20, wall  # ≤ 10 s of probing on top of the interpreter's start-up
    single = gx(tmp_path, "decode", "batch=1", f"hydra.run.dir={tmp_path / 'one'}", uri=uri, timeout=120)
    assert single.returncode == 2 and "unreachable" in single.stderr
    assert not (tmp_path / "one" / "results.json").exists()


@pytest.mark.slow
def test_sqlite_store_created_by_two_processes_at_once(tmp_path):
    db = tmp_path / "new" / "mlflow.db"
    code = (f"from pipelines.tracking import Tracker; t = Tracker(uri='sqlite:///{db}', experiment='race'); "
            "print(t.experiment_id)")
    procs = [subprocess.Popen([PY, "-c", code], env=env_for(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-1500:] for o in outs]
    assert len({o[0].strip() for o in outs}) == 1  # one experiment, the same for all
    con = sqlite3.connect(db)
    assert con.execute("select count(*) from experiments where name='race'").fetchone() == (1,)


@pytest.mark.slow
def test_two_identical_sweeps_started_together_duplicate_nothing(tmp_path):
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    args = ["-m", "batch=1,2,4", "fabric=single_eps", "ray.enabled=false", "tracking.report=false"]
    procs = [gx(tmp_path, "decode", *args, f"hydra.sweep.dir={tmp_path / f'multi{i}'}", uri=uri, wait=False)
             for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes in ([0, 0], [0, 2]), [o[1][-2000:] for o in outs]
    if codes == [0, 2]:  # the second driver was refused in one line
        refused = next(o[1] for p, o in zip(procs, outs) if p.returncode == 2)
        assert "already running" in refused and "Traceback" not in refused
    kids = children(db)
    assert len(kids) == 3 and len({h for _, h in kids}) == 3 and {s for s, _ in kids} == {"FINISHED"}
    assert len(parents(db)) == 1


@pytest.mark.slow
def test_server_killed_mid_sweep_loses_no_point_and_sync_or_rerun_completes_without_duplicates(tmp_path):
    server = MlflowServer(tmp_path).start()
    sweep_args = ["-m", "batch=1,2,4,8,16", "context=32K,1M,5M", "ray.enabled=false"]
    try:
        proc = gx(tmp_path, "decode", *sweep_args, f"hydra.sweep.dir={tmp_path / 'multi'}", uri=server.uri, wait=False)
        deadline = time.time() + 400
        while time.time() < deadline and len([k for k in children(server.db) if k[0] == "FINISHED"]) < 3:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            time.sleep(0.2)
        server.kill()
        killed_at = time.time()
        out, err = proc.communicate(timeout=600)
        after_kill_s = time.time() - killed_at
        logged = len(children(server.db))
        assert proc.returncode == 0, err[-3000:]
        assert 3 <= logged < 15, "the kill should land mid-sweep"
        assert "15 done, 0 failed, 0 skipped" in err
        assert err.count("warning: tracking store") == 1 and "Traceback" not in err
        assert "gx sync dir=" in err
        jobs = sorted((tmp_path / "multi").glob("*/results.json"))
        assert len(jobs) == 15 and all((j.parent / RECORD).is_file() for j in jobs)  # no computed point lost
        pending = (tmp_path / "multi" / PENDING).read_text().splitlines()
        assert len(pending) >= 15 - logged - 1
        assert after_kill_s < 120, after_kill_s  # never minutes of retries per point

        server = MlflowServer(tmp_path, server.port).start()
        rerun = gx(tmp_path, "decode", *sweep_args, "tracking.report=false", f"hydra.sweep.dir={tmp_path / 'rerun'}",
                   uri=server.uri)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert "0 done, 0 failed, 15 skipped" in rerun.stderr  # adopted from disk, not computed again
        kids = children(server.db)
        assert len(kids) == 15 and len({h for _, h in kids}) == 15 and {s for s, _ in kids} == {"FINISHED"}
        sync = gx(tmp_path, "sync", f"dir={tmp_path / 'multi'}", f"hydra.run.dir={tmp_path / 'sync'}", uri=server.uri)
        assert sync.returncode == 0, sync.stderr[-3000:]
        res = json.loads((tmp_path / "sync" / "results.json").read_text())
        assert (res["uploaded"], res["already"]) == (0, 15)
        assert len(children(server.db)) == 15 and len(parents(server.db)) == 1
    finally:
        server.kill()


@pytest.mark.slow
def test_gx_sync_uploads_a_sweep_logged_nowhere(tmp_path):
    """A sweep whose store was down from its first point: gx sync creates the parent and logs all."""
    db = tmp_path / "mlflow.db"
    run = gx(tmp_path, "decode", "-m", "batch=1,2", "fabric=single_eps", "ray.enabled=false", "tracking.report=false",
             f"hydra.sweep.dir={tmp_path / 'multi'}", uri=f"sqlite:///{db}")
    assert run.returncode == 0, run.stderr[-3000:]
    db.unlink()  # as if the store had never received it
    sync = gx(tmp_path, "sync", f"dir={tmp_path / 'multi'}", f"hydra.run.dir={tmp_path / 'sync'}", uri=f"sqlite:///{db}")
    assert sync.returncode == 0, sync.stderr[-3000:]
    assert "2 point(s) uploaded" in sync.stderr
    kids = children(db)
    assert len(kids) == 2 and {s for s, _ in kids} == {"FINISHED"} and len(parents(db)) == 1
    again = gx(tmp_path, "sync", f"dir={tmp_path / 'multi'}", f"hydra.run.dir={tmp_path / 'sync2'}", uri=f"sqlite:///{db}")
    assert "0 point(s) uploaded, 2 already" in again.stderr and len(children(db)) == 2


def test_a_tracker_in_its_own_process_locks_for_the_driver_and_answers_with_run_refs(tmp_path, store):
    from pipelines.tracking_process import RunRef, TrackerProcess

    cfg = {"uri": store, "experiment": "own-process", "report": False}
    pts = points(tmp_path, 2)
    first = TrackerProcess(cfg)
    state = dict(swept={"batch": "1,2"}, n_points=2, sweep_dir=tmp_path / "sweep", hashes={p.cfg_hash for p in pts})
    parent, existing, dirs = first.open_sweep_state("sweepP", "p", "decode", **state)
    assert parent and existing == {} and dirs == [tmp_path / "sweep"] and first.parent_id == parent
    other = TrackerProcess(cfg)  # the lock names the driver (this process), not the tracking process
    with pytest.raises(SweepLocked, match=f"already running .*pid {os.getpid()},"):
        other.open_sweep_state("sweepP", "p", "decode", **state)
    other.close()
    assert run_point(first, parent, pts[0]) and first.logged == 1
    first.finish_parent(parent, {"done": 1})
    first.close()
    assert first.proc.returncode == 0
    again = TrackerProcess(cfg)  # the lock went with the first tracking process
    parent2, existing, _ = again.open_sweep_state("sweepP", "p", "decode", **state)
    again.close()
    assert parent2 == parent and list(existing) == [pts[0].cfg_hash]
    (run,) = existing[pts[0].cfg_hash]
    assert isinstance(run, RunRef) and run.info.status == "FINISHED" and run.data.metrics["throughput_tok_s"] == 0.0
