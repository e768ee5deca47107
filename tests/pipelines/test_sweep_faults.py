"""Sweeps under faults: a point over its timeout, SIGINT/SIGTERM on the driver, a `ray start` head
on the host, a head killed mid-sweep, a cluster with token authentication, an address nobody
answers on. Every Ray cluster a test starts lives in its own short RAY_TMPDIR and is stopped by
the pids of its own processes (never `ray stop`, which would stop every Ray on the host).

Slow points are real configs (a Simlette decode takes tens of seconds of CPU; the analytical one
about a second) or, where a point must take an exact time, a tiny test pipeline written into the
test's directory (``sleepy``: sleeps ``sleep_s``), run through ``pipelines.sweep.run_sweep``."""

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from proc_tree import alive, descendants, descendants_running, wait_until

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).parent / "ray"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_tree(pids) -> None:
    pids = set(pids)
    for p in list(pids):
        pids |= descendants(p)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in alive(pids):
            try:
                os.kill(p, sig)
            except OSError:
                pass
        if wait_until(lambda: not alive(pids), 5):
            return


@pytest.fixture
def ray_tmp():
    """A short RAY_TMPDIR (Ray's socket paths must stay under ~107 characters)."""
    path = Path(tempfile.mkdtemp(prefix="gxray", dir="/tmp"))
    yield path
    pids = set()
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(path) in cmd.read_bytes().decode(errors="replace"):
                pids.add(int(cmd.parent.name))
        except OSError:
            continue
    kill_tree(pids)
    shutil.rmtree(path, ignore_errors=True)


class Head:
    """A `ray start --head` on 127.0.0.1 with one CPU in its own RAY_TMPDIR."""

    def __init__(self, tmp: Path, **env):
        self.tmp, self.port = tmp, free_port()
        self.env = dict(os.environ, RAY_TMPDIR=str(tmp), **env)
        proc = subprocess.run([str(RAY), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={self.port}",
                               "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats"],
                              env=self.env, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr[-2000:]
        self.address = f"127.0.0.1:{self.port}"

    def pids(self) -> set[int]:
        out = set()
        for cmd in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                text = cmd.read_bytes().decode(errors="replace")
            except OSError:
                continue
            if str(self.tmp) in text and "pytest" not in text and "pipelines." not in text:
                out.add(int(cmd.parent.name))
        return out

    def kill(self) -> None:
        kill_tree(self.pids())


def driver_env(tmp: Path, ray_tmp: Path | None = None, tracking: bool = False, **extra) -> dict:
    env = dict(os.environ, GX_TRACKING="true" if tracking else "false", PYTHONPATH=str(ROOT),
               MLFLOW_TRACKING_URI=f"sqlite:///{tmp / 'mlflow.db'}")
    env.update(extra)
    if ray_tmp is not None:
        env["RAY_TMPDIR"] = str(ray_tmp)
    env.pop("RAY_ADDRESS", None)
    return env


def decode_sweep(tmp: Path, *args: str, env: dict, wait=True, timeout=400):
    cmd = [sys.executable, "-m", "pipelines.decode", "-m", *args, f"hydra.sweep.dir={tmp / 'multi'}"]
    if not wait:
        return subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)


def results_in(tmp: Path) -> int:
    return len(list((tmp / "multi").glob("*/results.json")))


def child_statuses(tmp: Path) -> list[str]:
    con = sqlite3.connect(tmp / "mlflow.db")
    try:
        return sorted(s for (s,) in con.execute(
            "select r.status from runs r join tags t on t.run_uuid=r.run_uuid "
            "where t.key='mlflow.parentRunId' and r.lifecycle_stage='active'"))
    finally:
        con.close()


# -- a tiny pipeline of exact durations, run through run_sweep ----------------------------------

SLEEPY = '''
import os
import signal
import time


def task(cfg):
    if cfg.get("deaf"):  # the point's SIGALRM cannot reach it, as inside a C extension
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(float(cfg["sleep_s"]))
    if cfg.get("die"):  # the worker process ends in the middle of the point
        os._exit(3)
    return {"slept_s": float(cfg["sleep_s"])}


class main:
    task = staticmethod(task)
'''

SWEEP_SCRIPT = '''
import json, sys
from pathlib import Path
from pipelines.sweep import SweepPoint, run_sweep
import pipelines.sweep
out, how = Path(sys.argv[1]), json.loads(sys.argv[2])
pipelines.sweep.HARD_GRACE_S = how["hard_grace_s"]
cfgs = [s if isinstance(s, dict) else {"sleep_s": s} for s in how["sleeps"]]
points = [SweepPoint(index=i, overrides=[f"{k}={v}" for k, v in c.items()], cfg=c, out_dir=out / str(i))
          for i, c in enumerate(cfgs)]
s = run_sweep("gx_sleepy.pipeline", points, ray_cfg={"enabled": how["ray"], "num_cpus": 2,
                                                    "batch_size": how["batch_size"]},
              tracking_cfg={"enabled": how["tracking"]}, sweep_name="sleepy", sweep_hash="0",
              sweep_cfg={"point_timeout": how["timeout"]})
print(json.dumps({"summary": s.as_dict(), "errors": s.errors, "exit_code": s.exit_code}))
sys.exit(s.exit_code)
'''


def sleepy_sweep(tmp: Path, sleeps: list, timeout: str, ray: bool = False, tracking: bool = False,
                 ray_tmp: Path | None = None, wait: bool = True, batch_size: int | str = "auto",
                 hard_grace_s: float = 30.0):
    """``sleeps``: a point's seconds, or its whole config (``sleep_s``, ``die``, ``deaf``)."""
    pkg = tmp / "mods" / "gx_sleepy"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "pipeline.py").write_text(SLEEPY)
    env = driver_env(tmp, ray_tmp, tracking, PYTHONPATH=f"{ROOT}{os.pathsep}{tmp / 'mods'}")
    how = json.dumps({"sleeps": sleeps, "timeout": timeout, "ray": ray, "tracking": tracking, "batch_size": batch_size,
                      "hard_grace_s": hard_grace_s})
    cmd = [sys.executable, "-c", SWEEP_SCRIPT, str(tmp / "out"), how]
    if not wait:
        return subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)


def summary_of(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def test_a_point_over_its_timeout_is_failed_and_the_others_go_on(tmp_path):
    t0 = time.monotonic()
    proc = sleepy_sweep(tmp_path, [0.05, 600, 0.05], "1s")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert time.monotonic() - t0 < 60, "the 600 s point must be cut at its 1 s timeout"
    res = summary_of(proc.stdout)
    assert res["summary"]["done"] == 2 and res["summary"]["failed"] == 1
    assert "timed out" in res["errors"]["1"] and "sweep.point_timeout=1s" in res["errors"]["1"]
    assert (tmp_path / "out" / "0" / "results.json").exists() and (tmp_path / "out" / "2" / "results.json").exists()
    assert not (tmp_path / "out" / "1" / "results.json").exists()
    assert "point #1 failed: timed out" in proc.stderr


def stop_mid_sweep(tmp: Path, sig: int, tracking: bool, sleeps: list[float]):
    """Run the sleepy sweep, send ``sig`` while its third point sleeps; (returncode, stdout, stderr)."""
    proc = sleepy_sweep(tmp, sleeps, "3600s", tracking=tracking, wait=False)
    done = lambda: all((tmp / "out" / str(i) / "results.json").exists() for i in (0, 1))  # noqa: E731
    assert wait_until(lambda: done() or proc.poll() is not None, 120)
    time.sleep(0.3)  # the third point is sleeping
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err[-3000:]
    assert summary_of(out)["summary"] == {"done": 2, "failed": 0, "skipped": 0, "cancelled": 1, "not_run": 1}
    assert f"stopped by {signal.Signals(sig).name}: 1 point(s) in flight cancelled, 1 not started" in err
    assert "Traceback" not in err
    assert "| CANCELLED |" in out and "| NOT RUN |" in out and out.count("| FINISHED |") == 2
    assert (tmp / "out" / "2").is_dir() and not (tmp / "out" / "2" / "results.json").exists()
    return out, err


SLEEPS = [0.05, 0.06, 600, 0.07]  # distinct: a point is identified by its config


def test_sigint_stops_a_sweep_cleanly_with_a_summary(tmp_path):
    _, err = stop_mid_sweep(tmp_path, signal.SIGINT, False, SLEEPS)
    assert "tracking is off, so a rerun runs all 4 points again" in err


def test_a_ray_task_records_its_points_as_they_finish_and_a_rerun_skips_them(tmp_path, ray_tmp):
    # one Ray task carries all four points (ray.batch_size=4) and its third point sleeps for ten
    # minutes: the two before it (each longer than the worker's chunk time) are recorded while the
    # task still runs, so a stop loses only the points in flight and a rerun skips the first two
    sleeps = [0.6, 0.7, 600, 0.8]
    proc = sleepy_sweep(tmp_path, sleeps, "3600s", ray=True, tracking=True, ray_tmp=ray_tmp, batch_size=4,
                        wait=False)
    done = lambda: all((tmp_path / "out" / str(i) / "results.json").exists() for i in (0, 1))  # noqa: E731
    assert wait_until(lambda: done() or proc.poll() is not None, 120)
    assert proc.poll() is None and done(), "the finished points of a running task must be recorded"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert summary_of(out)["summary"] == {"done": 2, "failed": 0, "skipped": 0, "cancelled": 2, "not_run": 0}
    assert child_statuses(tmp_path) == ["FAILED", "FAILED", "FINISHED", "FINISHED"]
    again = sleepy_sweep(tmp_path, sleeps[:2] + [0.05, 0.8], "3600s", tracking=True)  # in one process: the same skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert summary_of(again.stdout)["summary"]["skipped"] == 2
    # the cancelled 0.8 s point's run is finished now; the 600 s point's stays failed beside the new 0.05 s one
    assert child_statuses(tmp_path) == ["FAILED", "FINISHED", "FINISHED", "FINISHED", "FINISHED"]


def test_a_worker_that_dies_mid_task_fails_only_the_points_it_had_not_sent(tmp_path, ray_tmp):
    # one task of three points; the worker process ends a second into the second (Ray reports a
    # streamed chunk asynchronously: a process that dies at once may take its last chunk with it)
    sleeps = [0.6, {"die": True, "sleep_s": 1.0}, 0.7]
    proc = sleepy_sweep(tmp_path, sleeps, "3600s", ray=True, ray_tmp=ray_tmp, batch_size=3)
    assert proc.returncode == 1, proc.stderr[-3000:]
    res = summary_of(proc.stdout)
    assert res["summary"] == {"done": 1, "failed": 2, "skipped": 0, "cancelled": 0, "not_run": 0}
    assert res["errors"]["1"].startswith("worker failed: ") and res["errors"]["2"] == res["errors"]["1"]
    assert (tmp_path / "out" / "0" / "results.json").exists()


def test_a_point_its_alarm_cannot_reach_is_stopped_with_its_worker_past_the_hard_deadline(tmp_path, ray_tmp):
    # the point blocks SIGALRM and sleeps ten minutes: the driver cancels its task (and worker) at
    # twice its 1 s limit plus the grace (2 s here, 30 s in a sweep); the other point still runs
    t0 = time.monotonic()
    proc = sleepy_sweep(tmp_path, [{"deaf": True, "sleep_s": 600}, 0.05], "1s", ray=True, ray_tmp=ray_tmp,
                        batch_size=1, hard_grace_s=2.0)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert time.monotonic() - t0 < 90
    res = summary_of(proc.stdout)
    assert res["summary"] == {"done": 1, "failed": 1, "skipped": 0, "cancelled": 0, "not_run": 0}
    assert "sweep.point_timeout=1s" in res["errors"]["0"] and "its Ray worker was stopped" in res["errors"]["0"]


@pytest.mark.slow
def test_sigterm_stops_a_sweep_cleanly_and_a_rerun_resumes(tmp_path):
    _, err = stop_mid_sweep(tmp_path, signal.SIGTERM, True, SLEEPS)
    assert "a rerun of the same command skips the 2 finished point(s) and runs the other 2" in err
    assert child_statuses(tmp_path) == ["FAILED", "FINISHED", "FINISHED"]  # the cancelled point is recorded
    again = sleepy_sweep(tmp_path, SLEEPS, "1s", tracking=True)  # sweep.* is no part of a point's identity
    assert again.returncode == 1, again.stderr[-3000:]
    assert summary_of(again.stdout)["summary"] == {"done": 1, "failed": 1, "skipped": 2, "cancelled": 0,
                                                   "not_run": 0}
    assert child_statuses(tmp_path) == ["FAILED", "FINISHED", "FINISHED", "FINISHED"]  # no duplicates


@pytest.mark.slow
def test_sigint_stops_an_in_process_cli_sweep_cleanly_and_a_rerun_resumes(tmp_path):
    # analytical points take about a second, Simlette ones tens of seconds: the signal lands in one
    points = ["network=analytical,simlette", "batch=1,2", "ray.enabled=false"]
    env = driver_env(tmp_path, tracking=True)
    proc = decode_sweep(tmp_path, *points, env=env, wait=False)
    assert wait_until(lambda: results_in(tmp_path) >= 2 or proc.poll() is not None, 240)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert "2 done, 0 failed, 0 skipped, 1 cancelled, 1 not run" in err
    assert "stopped by SIGINT" in err and "Traceback" not in err
    assert "a rerun of the same command skips the 2 finished point(s) and runs the other 2" in err
    assert "| CANCELLED |" in out and "| NOT RUN |" in out and out.count("| FINISHED |") == 2
    assert child_statuses(tmp_path) == ["FAILED", "FINISHED", "FINISHED"]  # the cancelled point is recorded
    # the rerun skips the finished points; sweep.* is not part of a point's identity
    again = decode_sweep(tmp_path, *points, "sweep.point_timeout=1s", env=env)
    assert again.returncode == 1, again.stderr[-3000:]
    assert "0 done, 2 failed, 2 skipped" in again.stderr and "timed out" in again.stderr
    assert child_statuses(tmp_path) == ["FAILED", "FAILED", "FINISHED", "FINISHED"]


def test_a_ray_address_nobody_answers_on_is_one_line_exit_2_and_nothing_logged(tmp_path):
    env = driver_env(tmp_path, tracking=True)
    t0 = time.monotonic()
    proc = decode_sweep(tmp_path, "batch=1,2", f"ray.address=127.0.0.1:{free_port()}", env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().count("\n") == 0 and "no Ray head answers there" in proc.stderr
    assert time.monotonic() - t0 < 60
    assert not (tmp_path / "mlflow.db").exists(), "no parent run may be left RUNNING"
    bad = decode_sweep(tmp_path, "batch=1,2", "ray.address=somewhere", env=env, timeout=120)
    assert bad.returncode == 2 and "ray.address='somewhere' must be local" in bad.stderr
    assert bad.stderr.strip().count("\n") == 0


@pytest.mark.slow
def test_a_default_sweep_runs_on_a_private_ray_beside_a_ray_start_head(tmp_path, ray_tmp):
    head = Head(ray_tmp)
    env = driver_env(tmp_path, ray_tmp)
    proc = decode_sweep(tmp_path, "batch=1,2", "ray.num_cpus=2", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 done, 0 failed, 0 skipped" in proc.stderr and "(2 of 2 used)" not in proc.stderr.split("busy")[0]
    assert "of 2 used" in proc.stderr  # the private Ray's 2 CPUs, not the head's 1
    # auto joins the head (its 1 CPU) and passes no num_cpus, even when ray.num_cpus is set
    proc = decode_sweep(tmp_path, "batch=1,2", "ray.address=auto", "ray.num_cpus=2", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "of 1 used" in proc.stderr
    head.kill()


@pytest.mark.slow
def test_a_head_killed_mid_sweep_records_the_points_in_flight_and_exits_1(tmp_path, ray_tmp):
    head = Head(ray_tmp)
    env = driver_env(tmp_path, ray_tmp)
    proc = decode_sweep(tmp_path, "network=analytical,simlette", f"ray.address={head.address}", env=env, wait=False)
    assert wait_until(lambda: results_in(tmp_path) >= 1 or proc.poll() is not None, 240)
    head.kill()
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err[-3000:]
    assert time.monotonic() - t0 < 45, "the driver must notice before Ray's own 60 s exit"
    assert f":{head.port} lost" in err and "while the point ran" in err, err[-3000:]  # the head's node IP
    assert "1 done, 1 failed, 0 skipped" in err and "tracking is off, so a rerun runs all 2 points" in err
    assert "| FAILED |" in out


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_on_a_ray_sweep_cancels_in_flight_points_leaves_no_orphans(tmp_path, ray_tmp, sig):
    env = driver_env(tmp_path, ray_tmp, tracking=True)
    points = ["network=analytical,simlette", "batch=1,2", "ray.num_cpus=2"]
    proc = decode_sweep(tmp_path, *points, env=env, wait=False)
    assert wait_until(lambda: results_in(tmp_path) >= 1 or proc.poll() is not None, 240)
    tree = descendants(proc.pid)
    assert tree, "a private Ray runs as the driver's children"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 128 + sig, err[-3000:]
    assert f"stopped by {signal.Signals(sig).name}" in err and "cancelled" in err
    assert wait_until(lambda: not alive(tree), 30), f"orphans: {alive(tree)}"
    done = int(err.split(" done,")[0].rsplit(" ", 1)[1])
    again = decode_sweep(tmp_path, *points, "sweep.point_timeout=1s", env=env)
    assert f"{done} skipped" in again.stderr, again.stderr[-3000:]


@pytest.mark.slow
def test_a_cluster_with_token_auth_and_no_token_is_one_line_exit_2(tmp_path, ray_tmp):
    token = "0123456789abcdef0123456789abcdef"
    head = Head(ray_tmp, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    env = driver_env(tmp_path, ray_tmp, tracking=True, HOME=str(tmp_path))  # no ~/.ray/auth_token either
    for var in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(var, None)
    proc = decode_sweep(tmp_path, "batch=1,2", f"ray.address={head.address}", env=env, timeout=180)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "token authentication" in lines[0] and "RAY_AUTH_TOKEN" in lines[0], lines[-5:]
    assert not (tmp_path / "mlflow.db").exists()
    # with the token exported the same sweep runs on the cluster
    proc = decode_sweep(tmp_path, "batch=1,2", f"ray.address={head.address}", env=dict(env, RAY_AUTH_TOKEN=token),
                        timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    head.kill()


def test_a_tracking_process_killed_mid_sweep_loses_no_point_and_a_rerun_logs_each_once(tmp_path):
    """The sweep's tracker runs in a process of its own: when it dies, the driver says so once,
    goes on, spools the points it could not log, and the rerun logs them from disk (not again)."""
    from pipelines.tracking import PENDING

    sleeps = [0.3 + 0.01 * i for i in range(8)]  # eight points (eight config hashes)
    proc = sleepy_sweep(tmp_path, sleeps, "3600s", tracking=True, wait=False)
    assert wait_until(lambda: results_in_out(tmp_path) >= 2 or proc.poll() is not None, 120)
    trackers = descendants_running(proc.pid, b"pipelines.tracking_process")
    assert len(trackers) == 1, "the sweep's tracker runs in a process of its own"
    os.kill(trackers.pop(), signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert err.count("warning: tracking store") == 1 and "Traceback" not in err, err[-3000:]
    assert "its tracking process was killed by SIGKILL; going on without it" in err
    pending = (tmp_path / "out" / PENDING).read_text().splitlines()
    logged = child_statuses(tmp_path)  # a point being logged when the process died stays RUNNING, and spooled
    assert pending and len(pending) + logged.count("FINISHED") == len(sleeps), (pending, logged)
    assert "is down (its tracking process was killed by SIGKILL)" in err and f"{len(pending)} point(s) not logged" in err
    again = sleepy_sweep(tmp_path, sleeps, "3600s", tracking=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"logged {len(pending)} point(s) an earlier run computed" in again.stderr
    assert summary_of(again.stdout)["summary"]["skipped"] == len(sleeps)  # nothing computed twice
    assert child_statuses(tmp_path) == ["FINISHED"] * len(sleeps)  # each point once


def results_in_out(tmp: Path) -> int:
    return len(list((tmp / "out").glob("*/results.json")))
