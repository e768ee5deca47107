"""Same config -> byte-identical results.json; measured wall-clock figures only in timings.json.

Each case runs twice into two run directories (in this process; the slow test repeats it in two
interpreters with different hash seeds, so set and dict orders that depend on string hashing
would show) and compares the bytes of results.json.
"""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from gx_inprocess import run_task

ROOT = Path(__file__).resolve().parents[2]

CASES = {
    "decode": ("decode", "model.layers=2"),
    "collective_analytical": ("collective", "fabric=single_eps", "fabric.world=16", "size=[4KiB,64KiB]"),
    "collective_simlette": ("collective", "fabric=single_eps", "fabric.world=16", "network=simlette", "size=4KiB"),
    "collective_verify": ("collective", "topology.dims=4", "verify=true"),
    "alltoallv": ("alltoallv", "catalog_cache=null"),
    "prefill": ("prefill", "model.layers=3", "prompt_tokens=4096"),
    "plan": ("plan",),
}
# Wall-clock keys that must never appear in results.json (anything from time.perf_counter / time.time)
MEASURED = {"sim_wall_s", "planning_s", "planning_cpu_s", "planning_s_per_activation", "planning_over_communication",
            "build_s", "search_wall_s", "seconds", "pricing_s", "verify_s"}


def _keys(obj) -> set:
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys(v)}
    if isinstance(obj, list):
        return {k for v in obj for k in _keys(v)}
    return set()


@pytest.mark.parametrize("case", sorted(CASES))
def test_results_json_is_byte_identical_across_two_runs(case, tmp_path):
    pipeline, *overrides = CASES[case]
    for run in ("a", "b"):
        run_task(pipeline, *overrides, out_dir=tmp_path / run)
    a, b = (tmp_path / "a" / "results.json").read_bytes(), (tmp_path / "b" / "results.json").read_bytes()
    assert a == b
    assert not _keys(json.loads(a)) & MEASURED


def test_measured_figures_go_to_timings_json(tmp_path):
    run_task("alltoallv", "catalog_cache=null", out_dir=tmp_path / "a2a")
    t = json.loads((tmp_path / "a2a" / "timings.json").read_text())
    assert t["planning_s"] > 0 and t["planning_over_communication"] > 0 and "build_s" in t["catalog"]
    run_task("collective", "fabric=single_eps", "fabric.world=16", "network=simlette", "size=[4KiB,8KiB]",
             out_dir=tmp_path / "sim")
    t = json.loads((tmp_path / "sim" / "timings.json").read_text())
    assert [row["size_bytes"] for row in t["sweep"]] == [4096, 8192] and all(r["sim_wall_s"] > 0 for r in t["sweep"])


def test_output_files_are_world_readable(tmp_path):
    from pipelines.outputs import write_outputs

    write_outputs(tmp_path, {"x": 1}, {"plan.json": {"y": 2}, "plot.png": b"\x89PNG"})
    for name in ("results.json", "plan.json", "plot.png"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left behind


_SCRIPT = """
import sys
from pathlib import Path
sys.path.insert(0, {here!r})
from gx_inprocess import run_task
from test_determinism import CASES
for case, (pipeline, *overrides) in sorted(CASES.items()):
    run_task(pipeline, *overrides, out_dir=Path(sys.argv[1]) / case)
"""


@pytest.mark.slow
def test_results_json_is_byte_identical_across_processes(tmp_path):
    script = _SCRIPT.format(here=str(Path(__file__).parent))
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT))
        proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / seed)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
    for case in CASES:
        assert (tmp_path / "1" / case / "results.json").read_bytes() == \
            (tmp_path / "2" / case / "results.json").read_bytes(), case
