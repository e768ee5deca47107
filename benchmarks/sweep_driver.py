"""Sweep driver benchmark: the same ``-m`` sweeps on two source trees, side by side in one run.

    python benchmarks/sweep_driver.py --before /tmp/base --runs 3 driver   # 300 cheap points, Ray + MLflow
    python benchmarks/sweep_driver.py --before /tmp/base --runs 1 figure4  # gx search -m experiment=figure4_megatron
    python benchmarks/sweep_driver.py large                                 # experiment=collective_50k (this tree)
    python benchmarks/sweep_driver.py cluster                               # a head and a second node on this machine

``--before`` is a checkout of the code to compare with (e.g. ``git archive <commit> | tar -x -C
/tmp/base``); runs alternate between the trees so load on a shared machine hits both alike.
Each run is a fresh process in a fresh directory (own MLflow SQLite store, own private Ray);
the figures are wall time of the whole command, the driver's own ``points/s`` and peak memory
lines, and the medians over ``--runs``. Results go to stdout as a table and to
``benchmarks/results/sweep_driver.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
RAY = Path(sys.executable).parent / "ray"

CHEAP = ["model=llama3_1_8b", "parallel=tp_ep", "world=8", "parallel.tp=8", "parallel.ep=1"]
DRIVER_300 = CHEAP + ["fabric=single_eps,single_ocs", "batch=1,2,3,4,5",
                      "context=" + ",".join(f"{k}K" for k in range(1, 31)), "ray.num_cpus=2"]
CASES = {
    "driver": ("decode", DRIVER_300),
    "figure4": ("search", ["experiment=figure4_megatron", "ray.num_cpus=2"]),
    "large": ("collective", ["+experiment=collective_50k", "ray.num_cpus=2"]),
    "large_decode": ("decode", ["experiment=decode_50k", "ray.num_cpus=2"]),
}


def run_once(tree: Path, pipeline: str, args: list[str], work: Path, timeout_s: float, env_extra=None) -> dict:
    """One sweep in a fresh directory; wall time and what the driver printed about itself."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(tree), GX_TRACKING="true", GX_PLAN_STORE=str(work / "plans"),
               GX_PROGRAM_STORE=str(work / "programs"), MLFLOW_TRACKING_URI=f"sqlite:///{work / 'mlflow.db'}",
               **(env_extra or {}))  # fresh plan and program stores
    env.pop("RAY_ADDRESS", None)
    cmd = [PY, "-m", f"pipelines.{pipeline}", "-m", *args, f"hydra.sweep.dir={work / 'multi'}"]
    t0, t0_epoch = time.perf_counter(), time.time()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout_s)
    wall = time.perf_counter() - t0
    phases = _phases(work / "multi" / "sweep_timeline.json", t0_epoch, t0_epoch + wall)
    err = proc.stderr
    done = re.search(r": (\d+) done, (\d+) failed, (\d+) skipped.* in ([\d.]+) s", err)
    rate = re.search(r" in [\d.]+ s, ([\d,.]+) points/s", err)
    peak = re.search(r"peak driver memory ([\d,]+) MiB", err)
    pid = re.search(r"in the background \(pid (\d+);", err)
    while pid and Path(f"/proc/{pid.group(1)}").exists() and time.perf_counter() - t0 < timeout_s:
        time.sleep(0.2)  # the report attached in the background: until it is done
    out = {"rc": proc.returncode, "wall_s": round(wall, 2), "with_report_s": round(time.perf_counter() - t0, 2),
           "sweep_s": float(done.group(4)) if done else None, "done": int(done.group(1)) if done else None,
           "points_per_s": float(rate.group(1).replace(",", "")) if rate else None,
           "peak_driver_MiB": float(peak.group(1).replace(",", "")) if peak else None}
    out.update(phases)
    if proc.returncode != 0:
        out["stderr_tail"] = err[-1500:]
    return out


def _phases(timeline: Path, start_epoch: float, end_epoch: float) -> dict:
    """The command's fixed costs from ``sweep_timeline.json``: until the first point started
    (interpreter, Hydra, Ray, store), the points' span, and from the last point's end to exit."""
    try:
        t = json.loads(timeline.read_text())
        # a tree that does not write the start: the file is written as the sweep ends
        base, pts = t.get("started_epoch_s") or timeline.stat().st_mtime - t["wall_s"], t["points"]
    except (OSError, ValueError, KeyError):
        return {}
    first = base + min(p["start_s"] for p in pts)
    last = base + max(p["start_s"] + p["wall_s"] for p in pts)
    return {"until_first_point_s": round(first - start_epoch, 2), "points_span_s": round(last - first, 2),
            "after_last_point_s": round(end_epoch - last, 2),
            "point_wall_s": round(sum(p["wall_s"] for p in pts), 2)}


def median(rows: list[dict], key: str):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(vals), 2) if vals else None


def side_by_side(case: str, trees: dict[str, Path], runs: int, timeout_s: float) -> dict:
    pipeline, args = CASES[case]
    results: dict[str, list] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="gxbench") as tmp:
        for i in range(runs):
            for name, tree in trees.items():  # alternate: a load spike hits both trees alike
                r = run_once(tree, pipeline, args, Path(tmp) / f"{name}{i}", timeout_s)
                print(f"{case} {name} run {i + 1}: {json.dumps(r)}", file=sys.stderr, flush=True)
                results[name].append(r)
    keys = ("wall_s", "with_report_s", "sweep_s", "until_first_point_s", "points_span_s", "after_last_point_s",
            "point_wall_s", "points_per_s", "peak_driver_MiB")
    summary = {name: {k: median(rs, k) for k in keys}
               | {"runs": rs} for name, rs in results.items()}
    return summary


# -- a two-node Ray cluster on this machine -------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pids_with(marker: str) -> set[int]:
    out = set()
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmd.read_bytes().decode(errors="replace"):
                out.add(int(cmd.parent.name))
        except (OSError, ValueError):
            continue
    return out - {os.getpid()}


def _kill(pids: set[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            with contextlib.suppress(OSError):
                os.kill(p, sig)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.1)


@contextlib.contextmanager
def two_node_cluster(tmp: Path | None = None, cpus_per_node: int = 1):
    """``ray start --head`` and a second ``ray start --address`` node on 127.0.0.1, each with
    ``cpus_per_node`` CPUs, in a private RAY_TMPDIR; yields the head's address. Only the
    processes that carry that RAY_TMPDIR are stopped afterwards (never ``ray stop``, which would
    stop every Ray on a shared host)."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="gxray", dir="/tmp"))  # Ray's socket paths must stay short
    port = free_port()
    env = dict(os.environ, RAY_TMPDIR=str(ray_tmp), PYTHONPATH=str(ROOT))
    env.pop("RAY_ADDRESS", None)
    if "RAY_AUTH_MODE" not in env and (Path.home() / ".ray" / "auth_token").is_file():
        env["RAY_AUTH_MODE"] = "token"  # the head then uses this token: every node must too
    common = ["--node-ip-address=127.0.0.1", f"--num-cpus={cpus_per_node}", "--disable-usage-stats",
              f"--temp-dir={ray_tmp}"]
    try:
        for extra in (["--head", f"--port={port}", "--include-dashboard=false"], [f"--address=127.0.0.1:{port}"]):
            proc = subprocess.run([str(RAY), "start", *extra, *common], env=env, capture_output=True, text=True,
                                  timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"ray start {' '.join(extra)} failed: {proc.stderr[-1500:]}")
        _wait_for_nodes(f"127.0.0.1:{port}", 2, env)
        yield f"127.0.0.1:{port}"
    finally:
        _kill(_pids_with(str(ray_tmp)))
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _wait_for_nodes(address: str, n: int, env: dict, timeout_s: float = 120) -> None:
    code = (f"import ray, time\nray.init(address={address!r}, logging_level='ERROR')\n"
            f"t = time.time()\nwhile len([x for x in ray.nodes() if x['Alive']]) < {n} and time.time() - t < {timeout_s}:\n"
            f"    time.sleep(0.5)\nprint(len([x for x in ray.nodes() if x['Alive']]))\n")
    proc = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=timeout_s + 60)
    if proc.returncode != 0 or proc.stdout.strip().splitlines()[-1:] != [str(n)]:
        raise RuntimeError(f"the cluster at {address} did not reach {n} nodes: {proc.stdout[-300:]} {proc.stderr[-800:]}")


def cluster_case(runs: int, timeout_s: float) -> dict:
    """The 300-point driver case on a two-node cluster (1 CPU each) against a private 2-CPU Ray."""
    pipeline, args = CASES["driver"]
    args = [a for a in args if not a.startswith("ray.num_cpus")]
    out: dict = {"cluster": [], "local": []}
    with tempfile.TemporaryDirectory(prefix="gxbench") as tmp, two_node_cluster(Path(tmp) / "ray") as address:
        for i in range(runs):
            r = run_once(ROOT, pipeline, args + [f"ray.address={address}"], Path(tmp) / f"c{i}", timeout_s)
            r["nodes"] = len({json.loads(line).get("worker", "").rpartition("@")[2]
                              for line in (Path(tmp) / f"c{i}" / "multi" / "results.jsonl").read_text().splitlines()})
            print(f"cluster run {i + 1}: {json.dumps(r)}", file=sys.stderr, flush=True)
            out["cluster"].append(r)
            r = run_once(ROOT, pipeline, args + ["ray.num_cpus=2"], Path(tmp) / f"l{i}", timeout_s)
            print(f"local run {i + 1}: {json.dumps(r)}", file=sys.stderr, flush=True)
            out["local"].append(r)
    return {name: {k: median(rs, k) for k in ("wall_s", "with_report_s", "sweep_s", "points_per_s", "peak_driver_MiB")}
            | {"runs": rs} for name, rs in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", choices=[*CASES, "cluster"])
    ap.add_argument("--before", type=Path, help="a checkout of the code to compare with")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=3600)
    a = ap.parse_args()
    if a.case == "cluster":
        res = cluster_case(a.runs, a.timeout)
    else:
        trees = {"after": ROOT} if a.before is None else {"before": a.before.resolve(), "after": ROOT}
        res = side_by_side(a.case, trees, a.runs, a.timeout)
    print(f"| {a.case} | wall s (median) | with report s | sweep s | until first point s | points span s | "
          "after last point s | points/s | peak driver MiB | runs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in res.items():
        print(f"| {name} | {r['wall_s']} | {r['with_report_s']} | {r['sweep_s']} | {r.get('until_first_point_s')} | "
              f"{r.get('points_span_s')} | {r.get('after_last_point_s')} | {r['points_per_s']} | "
              f"{r['peak_driver_MiB']} | {len(r['runs'])} |")
    out = ROOT / "benchmarks" / "results" / "sweep_driver.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(out.read_text()) if out.exists() else {}
    old[a.case] = res
    out.write_text(json.dumps(old, indent=1) + "\n")


if __name__ == "__main__":
    main()
