"""Bad files and over-budget runs: one line (SpecError), exit 2, no traceback, nothing written.

Table-driven. Most cases run the pipeline's task in this process (``gx_inprocess``): the task must
raise ``SpecError`` with a one-line message before writing anything; ``pipelines.app`` turns that
into one line on stderr and exit 2. The last test runs a few cases as real CLI subprocesses and
checks exit code, stderr, the run directory, wall time and peak memory.
"""

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from gx_inprocess import compose, task_of

from collectives.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]

GOOD_SCHEDULE = {"format": "gxnet.alltoallv.schedule/1", "scheduler": "handmade", "platform": "none", "world_size": 2,
                 "demand_bytes": [[0, 5], [5, 0]],
                 "activations": [{"lanes": [{"src": 0, "dst": 1, "bytes": 5}, {"src": 1, "dst": 0, "bytes": 5}]}]}
GOOD_REPORT = {"name": "handmade", "elapsed_s": [1e-3], "activation_s": [[1e-3]], "checked_bytes": 5,
               "expected_bytes": 5, "mismatched_bytes": 0, "first_mismatch": None}


def schedule(**change):
    return json.dumps({**GOOD_SCHEDULE, **change})


def lanes(*lane):
    return schedule(activations=[{"lanes": list(lane)}])


def reports(**change):
    return json.dumps({"world_size": 2, "reports": [[GOOD_REPORT], [GOOD_REPORT]], **change})


def npy(a):
    def write(path: Path):
        np.save(path, np.asarray(a))
    return write


XML_HEAD = '<system version="1"><cpu numaid="0"><pci busid="0" link_speed="16 GT/s" link_width="16">'


def xml(gpus: str, *, pci: str = XML_HEAD, tail: str = "</pci></cpu></system>") -> str:
    return pci + gpus + tail


REPLAY = ("replay", "backend=gloo", "launcher=spawn")
A2AV = ("alltoallv", "workload=file", "catalog_cache=null")  # 8 ranks on one r5080_bf3 node
TRACE = ("prefill", "routing=trace", "model.layers=2", "prompt_tokens=16", "requests=1")

# id -> (pipeline and overrides with {f} for the file, file suffix, file content (str | bytes | writer | None), message)
CASES = {
    # --- schedule.json for gx replay ---------------------------------------------------------------------------
    "schedule_truncated": (REPLAY + ("schedule={f}",), ".json", schedule()[:40], "is not JSON"),
    "schedule_empty": (REPLAY + ("schedule={f}",), ".json", "", "is not JSON"),
    "schedule_binary": (REPLAY + ("schedule={f}",), ".json", b"\xff\xfe\x00garbage", "cannot be read"),
    "schedule_a_list": (REPLAY + ("schedule={f}",), ".json", "[1, 2]", "must be a mapping"),
    "schedule_no_world_size": (REPLAY + ("schedule={f}",), ".json",
                               json.dumps({k: v for k, v in GOOD_SCHEDULE.items() if k != "world_size"}),
                               "'world_size' is missing"),
    "schedule_world_size_text": (REPLAY + ("schedule={f}",), ".json", schedule(world_size="2"), "world_size='2'"),
    "schedule_world_size_one": (REPLAY + ("schedule={f}",), ".json", schedule(world_size=1), ">= 2"),
    "schedule_demand_ragged": (REPLAY + ("schedule={f}",), ".json", schedule(demand_bytes=[[0, 5], [5]]),
                               "demand_bytes[1]"),
    "schedule_demand_fractional": (REPLAY + ("schedule={f}",), ".json", schedule(demand_bytes=[[0, 5.5], [5, 0]]),
                                   "demand_bytes[0][1]=5.5 must be a whole number"),
    "schedule_demand_float_whole": (REPLAY + ("schedule={f}",), ".json", schedule(demand_bytes=[[0, 5.0], [5, 0]]),
                                    "must be a whole number"),
    "schedule_demand_negative": (REPLAY + ("schedule={f}",), ".json", schedule(demand_bytes=[[0, -5], [5, 0]]), ">= 0"),
    "schedule_demand_nan": (REPLAY + ("schedule={f}",), ".json", schedule()[:-1].replace('[[0, 5]', '[[0, NaN]') + "}",
                            "must be a whole number"),
    "schedule_demand_wrong_size": (REPLAY + ("schedule={f}",), ".json", schedule(world_size=3), "must have 3 entries"),
    "schedule_activations_dict": (REPLAY + ("schedule={f}",), ".json", schedule(activations={"lanes": []}),
                                  "activations=<a dict> must be a list"),
    "schedule_activation_a_list": (REPLAY + ("schedule={f}",), ".json", schedule(activations=[[1, 2]]),
                                   "activations[0]=<a list> must be a mapping"),
    "schedule_lane_no_bytes": (REPLAY + ("schedule={f}",), ".json", lanes({"src": 0, "dst": 1}), "'bytes' is missing"),
    "schedule_lane_fractional": (REPLAY + ("schedule={f}",), ".json", lanes({"src": 0, "dst": 1, "bytes": 2.5}),
                                 "lanes[0].bytes=2.5"),
    "schedule_lane_src_text": (REPLAY + ("schedule={f}",), ".json", lanes({"src": "a", "dst": 1, "bytes": 5}),
                               "lanes[0].src='a'"),
    "schedule_lane_outside": (REPLAY + ("schedule={f}",), ".json", lanes({"src": 0, "dst": 7, "bytes": 5}),
                              "not a rank"),
    "schedule_wrong_format": (REPLAY + ("schedule={f}",), ".json", schedule(format="other/1"), "schedule format"),
    "schedule_a_folder": (REPLAY + ("schedule={dir}",), None, None, "does not exist"),
    "compare_truncated": (REPLAY + ("schedule={good}", "compare=[{f}]"), ".json", schedule()[:30], "compare="),
    # --- rank_reports.json for gx replay reports= ---------------------------------------------------------------
    "reports_truncated": (REPLAY + ("schedule={good}", "reports={f}"), ".json", reports()[:50], "is not JSON"),
    "reports_no_world_size": (REPLAY + ("schedule={good}", "reports={f}"), ".json",
                              json.dumps({"reports": [[GOOD_REPORT]] * 2}), "'world_size' is missing"),
    "reports_entry_numbers": (REPLAY + ("schedule={good}", "reports={f}"), ".json", reports(reports=[[1], [2]]),
                              "reports[0][0]=1 must be a mapping"),
    "reports_elapsed_text": (REPLAY + ("schedule={good}", "reports={f}"), ".json",
                             reports(reports=[[{**GOOD_REPORT, "elapsed_s": ["fast"]}]] * 2), "elapsed_s[0]='fast'"),
    "reports_no_checked": (REPLAY + ("schedule={good}", "reports={f}"), ".json",
                           reports(reports=[[{k: v for k, v in GOOD_REPORT.items() if k != "checked_bytes"}]] * 2),
                           "'checked_bytes' is missing"),
    "reports_other_world": (REPLAY + ("schedule={good}", "reports={f}"), ".json",
                            reports(world_size=3, reports=[[GOOD_REPORT]] * 3), "this replay needs 2 ranks"),
    # --- demand matrices for workload=file ----------------------------------------------------------------------
    "demand_truncated_npy": (A2AV + ("workload.path={f}",), ".npy", b"\x93NUMPY\x01\x00v\x00{'descr'", "not a readable"),
    "demand_json_mapping": (A2AV + ("workload.path={f}",), ".json", '{"a": 1}', "holds one value"),
    "demand_json_text": (A2AV + ("workload.path={f}",), ".json", '[["a", "b"], ["c", "d"]]', "it must be an array of numbers"),
    "demand_json_bools": (A2AV + ("workload.path={f}",), ".json", "[[true, false], [false, true]]", "bool values"),
    "demand_json_ragged": (A2AV + ("workload.path={f}",), ".json", "[[1, 2], [3]]", "not a readable"),
    "demand_csv_nan": (A2AV + ("workload.path={f}",), ".csv", "0,nan\n1,0\n", "NaN or infinite"),
    "demand_wrong_shape": (A2AV + ("workload.path={f}",), ".npy", npy(np.ones((3, 3))), "it must be 8 x 8"),
    "demand_fractional": (A2AV + ("workload.path={f}",), ".npy", npy(np.full((8, 8), 1.5)), "whole, non-negative"),
    "demand_negative": (A2AV + ("workload.path={f}",), ".npy", npy(-np.ones((8, 8))), "whole, non-negative"),
    "demand_pickled": (A2AV + ("workload.path={f}",), ".npy", npy(np.array([{"a": 1}], dtype=object)), "not a readable"),
    "demand_missing": (A2AV + ("workload.path={dir}/absent.npy",), None, None, "does not exist"),
    # --- routing traces for routing=trace -----------------------------------------------------------------------
    "trace_truncated": (TRACE + ("routing.trace_path={f}",), ".npy", b"\x93NUMPY", "not a readable"),
    "trace_json_mapping": (TRACE + ("routing.trace_path={f}",), ".json", '{"ids": [1]}', "holds one value"),
    "trace_inf": (TRACE + ("routing.trace_path={f}",), ".csv", "1,inf\n", "NaN or infinite"),
    "trace_wrong_shape": (TRACE + ("routing.trace_path={f}",), ".npy", npy(np.zeros((3, 2), dtype=int)), "has shape"),
    # --- budgets: refused before any work -----------------------------------------------------------------------
    "budget_collective_world": (("collective", "fabric=single_eps", "fabric.world=1048576"), None, None,
                                "budget.max_ranks=65536"),
    "budget_collective_memory": (("collective", "fabric=single_eps", "fabric.world=8192"), None, None, "budget.max_memory=8GiB"),
    "budget_collective_dims": (("collective", "topology.dims=30"), None, None, "budget.max_ranks"),
    "budget_collective_verify": (("collective", "topology.dims=12", "verify=true", "collective=alltoall"), None, None,
                                 "budget.max_memory"),
    "budget_alltoallv_nodes": (("alltoallv", "nodes=131072"), None, None, "budget.max_ranks"),
    "budget_alltoallv_memory": (("alltoallv", "nodes=512"), None, None, "budget.max_memory"),
    "budget_decode_world": (("decode", "world=524288", "parallel.kvp=4096", "parallel.ep=256", "parallel.tpe=2048",
                             "fabric=single_eps"), None, None, "budget.max_ranks"),
    "budget_decode_tight": (("decode", "budget.max_memory=1MiB"), None, None, "over the budget budget.max_memory=0.000976562GiB"),
    "budget_decode_simlette": (("decode", "network=simlette", "budget.max_events=1000"), None, None, "simulator events"),
    "budget_prefill_tokens": (("prefill", "requests=1000000"), None, None, "budget.max_memory"),
    "budget_plan_world": (("plan", "world=1048576"), None, None, "budget.max_ranks"),
    "budget_splits_world": (("splits", "world=1073741824"), None, None, "budget.max_ranks"),
    "budget_demand_world": (("demand", "world=1073741824"), None, None, "budget.max_ranks"),
    "budget_search_world": (("search", "world=1048576"), None, None, "budget.max_ranks"),
    "budget_replay_spawn": (REPLAY + ("schedule={f}",), ".json",
                            schedule(world_size=64, demand_bytes=[[0] * 64] * 64, activations=[]), "budget.max_memory"),
    "budget_zero": (("splits", "budget.max_ranks=0"), None, None, "budget.max_ranks=0 must be a positive"),
    "budget_not_a_size": (("splits", "budget.max_memory=lots"), None, None, "budget.max_memory='lots'"),
}


def _materialise(template: tuple, suffix, content, tmp_path: Path) -> list[str]:
    f = tmp_path / f"input{suffix or ''}"
    if callable(content):
        content(f)
    elif isinstance(content, bytes):
        f.write_bytes(content)
    elif content is not None:
        f.write_text(content)
    good = tmp_path / "good_schedule.json"
    good.write_text(schedule())
    return [t.format(f=f, dir=tmp_path, good=good) for t in template]


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_before_any_work(case, tmp_path):
    (pipeline, *template), suffix, content, expected = CASES[case]
    overrides = _materialise(tuple(template), suffix, content, tmp_path)
    before = set(tmp_path.iterdir())
    t0 = time.perf_counter()
    with pytest.raises(SpecError) as err:
        task_of(pipeline)(compose(pipeline, *overrides))
    message = str(err.value)
    assert time.perf_counter() - t0 < 20
    assert "\n" not in message and "Traceback" not in message and expected in message, message
    assert set(tmp_path.iterdir()) == before  # nothing written beside the inputs


TOPOLOGY_CASES = {
    "xml_not_xml": ("<system><cpu>", "does not parse"),
    "xml_root": ("<machine/>", "root is <machine>"),
    "xml_gpu_dev_text": (xml('<pci busid="1"><gpu dev="x"/></pci>'), "<gpu dev='x'> must be a whole number"),
    "xml_link_width_text": (xml('<gpu dev="0"/>', pci='<system><cpu numaid="0"><pci busid="0" link_speed="16 GT/s" '
                                'link_width="wide">'), "<pci link_width='wide'>"),
    "xml_link_width_negative": (xml('<gpu dev="0"/>', pci='<system><cpu numaid="0"><pci busid="0" link_speed="16 GT/s" '
                                    'link_width="-4">'), "<pci link_width='-4'>"),
    "xml_nic_speed_text": (xml('<pci busid="1"><gpu dev="0"/></pci><pci busid="2"><nic><net name="mlx" speed="fast"/>'
                               '</nic></pci>'), "<net speed='fast'>"),
    "xml_nic_speed_nan": (xml('<pci busid="1"><gpu dev="0"/></pci><pci busid="2"><nic><net name="mlx" speed="nan"/>'
                              '</nic></pci>'), "must be a finite number"),
    "xml_duplicate_gpu": (xml('<pci busid="1"><gpu dev="0"/></pci><pci busid="2"><gpu dev="0"/></pci>'), "dev=0"),
    "xml_no_gpu": (xml(""), "lists no <gpu>"),
    "xml_binary": (b"<\xff\xfe\x00", "cannot be read as text"),
    "smi_garbage": ("garbage", "no 'GPU0 ...' header row"),
    "smi_truncated": ("\tGPU0\tGPU1\nGPU0\tX\tPIX\nGPU1\tPIX", "names GPU1 in its header but has no full row"),
    "smi_unknown_kind": ("\tGPU0\tGPU1\nGPU0\tX\tFOO\nGPU1\tFOO\tX", "unknown entries"),
}


@pytest.mark.parametrize("case", sorted(TOPOLOGY_CASES))
def test_bad_topology_file_is_one_line(case, tmp_path, capsys):
    from pipelines.hardware.topology import main

    content, expected = TOPOLOGY_CASES[case]
    f = tmp_path / "topo.xml"
    f.write_bytes(content) if isinstance(content, bytes) else f.write_text(content)
    option = "--nvidia-smi-file" if case.startswith("smi") else "--nccl-xml"
    assert main([option, str(f), "--out", str(tmp_path / "out.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and expected in err, err
    assert not (tmp_path / "out.yaml").exists()


def test_good_files_still_pass(tmp_path):
    """The checks refuse only bad files: the hand-made schedule and reports replay as before."""
    from pipelines.file_checks import load_reports, load_schedule
    from pipelines.hardware.replay_plan import plan_from_schedule

    (tmp_path / "s.json").write_text(schedule())
    (tmp_path / "r.json").write_text(reports())
    assert plan_from_schedule(load_schedule(tmp_path / "s.json")).total_bytes == 10
    assert len(load_reports(tmp_path / "r.json")["reports"]) == 2


SUBPROCESS_CASES = {
    "collective_world": (["collective", "fabric=single_eps", "fabric.world=1048576"], None),
    "alltoallv_nodes": (["alltoallv", "nodes=131072"], None),
    "replay_truncated": (["replay", "backend=gloo", "schedule={f}"], schedule()[:40]),
    "report_unknown_sweep": (["report", "sweep=deadbeef", "tracking.uri=file://{dir}/mlruns"], None),
}


@pytest.mark.parametrize("case", sorted(SUBPROCESS_CASES))
def test_cli_exit_2_one_line_nothing_written(case, tmp_path):
    args, content = SUBPROCESS_CASES[case]
    f = tmp_path / "input.json"
    if content is not None:
        f.write_text(content)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", f"pipelines.{args[0]}", *(a.format(f=f, dir=tmp_path) for a in args[1:]),
           "tracking.enabled=false" if args[0] != "report" else "tracking.experiment=gxnet", f"hydra.run.dir={out}"]
    t0 = time.perf_counter()
    env = dict(os.environ, MLFLOW_ALLOW_FILE_STORE="true")  # a throw-away store without SQLite's migrations
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    wall = time.perf_counter() - t0
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) if out.exists() else []
    # Hydra's own bookkeeping (its log, .hydra/ with the composed config) only: no results, no artifacts
    assert not [n for n in written if not (n.endswith(".log") or n.startswith(".hydra/"))], written
    assert wall < 20
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 2**20  # KiB: under 1 GiB
