"""``sweep.job_dirs``: the job folder per point can be turned off (or forced) from the command line."""

import json
import os
from pathlib import Path

from test_sweep_faults import decode_sweep


def _sweep(tmp: Path, *args: str):
    """Two points in the driver's process, tracking off."""
    return decode_sweep(tmp, "batch=1,2", "ray.enabled=false", *args, env=dict(os.environ, GX_TRACKING="false"),
                        timeout=300)


def test_without_job_folders_the_table_still_holds_every_point(tmp_path):
    proc = _sweep(tmp_path, "sweep.job_dirs=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in (tmp_path / "multi" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["name"].split()[0] for r in lines if r["status"] == "FINISHED") == ["batch=1", "batch=2"]
    assert all(r["metrics"]["decode_step_s"] > 0 for r in lines)
    assert not list((tmp_path / "multi").rglob("results.json")), "no job folder per point"


def test_a_bad_job_dirs_value_is_one_line_and_exit_2(tmp_path):
    proc = _sweep(tmp_path, "sweep.job_dirs=sometimes")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]
    assert "sweep.job_dirs='sometimes'" in proc.stderr and "auto" in proc.stderr
    assert not (tmp_path / "multi" / "results.jsonl").exists()
