"""``python -m pipelines.alltoallv`` end to end in temp dirs (subprocess, Hydra run dir)."""

import json

import numpy as np
import pytest


def results(out):
    return json.loads((out / "results.json").read_text())


def test_single_scheduler_writes_results_and_replayable_schedule(pipeline):
    proc, out = pipeline("alltoallv", "nodes=2", "workload=zipf", "workload.skew=0.8", "workload.bytes_per_rank=4MiB",
                         "workload.seed=3", "catalog_cache=null")
    assert proc.returncode == 0, proc.stderr
    r = results(out)
    for key in ("completion_s", "algbw_Bps", "busbw_Bps", "activations", "schedule_valid"):
        assert key in r
    assert r["schedule_valid"] and r["n_ranks"] == 16
    assert set(r["catalog"]) >= {"shapes", "families"}
    # measured wall-clock planning figures live in timings.json, not in results.json
    t = json.loads((out / "timings.json").read_text())
    assert not (set(t) - {"catalog"}) & set(r) and 0 < t["planning_s_per_activation"] and "build_s" in t["catalog"]
    assert r["planning_kernel"] in ("c", "numpy") and 0 < t["planning_cpu_s"]
    assert r["busbw_Bps"] == pytest.approx(r["algbw_Bps"] * 15 / 16)
    s = json.loads((out / "schedule.json").read_text())
    assert s["world_size"] == 16 and s["platform"] == "r5080_bf3x2" and len(s["activations"]) == r["activations"]
    d = np.array(s["demand_bytes"])
    served = np.zeros_like(d)
    for act in s["activations"]:
        for lane in act["lanes"]:
            served[lane["src"], lane["dst"]] += lane["bytes"]
            assert lane["path"]["kind"] in {"PIX", "PXB", "PHB", "NODE", "SYS", "NIC"} and lane["path"]["resources"]
    assert (served == d).all() and d.sum(axis=1).tolist() == [4 * 2**20] * 16
    # the command says what it measured: the case, then the scheduler's completion and planning share
    head, line = proc.stdout.strip().splitlines()[-2:]
    assert head.startswith("zipf demand (4MiB per source) on 16 GPUs of r5080_bf3x2: 64 MiB in all")
    assert line.startswith("variopath: completion ") and f"{r['activations']} activations" in line
    share = 100 * t["planning_over_communication"]
    assert f"= {share:.2f} % of the completion (median of {t['planning_repeats']}; first call" in line


def test_sweep_of_schedulers_writes_a_plot_and_ranks_them(pipeline):
    proc, out = pipeline("alltoallv", "schedulers=[variopath,nccl,fast,deepep]", "workload=moe",
                         "workload.tokens_per_rank=32", "catalog_cache=null")
    assert proc.returncode == 0, proc.stderr
    r = results(out)
    assert set(r["schedulers"]) == {"variopath", "nccl", "fast", "deepep"}
    assert all(v["schedule_valid"] for v in r["schedulers"].values())
    assert (out / "bandwidth_by_scheduler.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "schedule_nccl.json").exists()
    assert r["speedup_vs"][r["best"]] == 1.0
    lines = proc.stdout.strip().splitlines()
    assert [x.split(":")[0] for x in lines[-5:-1]] == ["variopath", "nccl", "fast", "deepep"]
    assert lines[-1].startswith(f"best: {r['best']}; completion relative to it: ")


def test_milp_records_its_certificate(pipeline):
    proc, out = pipeline("alltoallv", "platform=fig1", "scheduler=milp", "workload=uniform", "workload.bytes_per_rank=1MiB",
                         "catalog_cache=null")
    assert proc.returncode == 0, proc.stderr
    assert results(out)["certificate"]["status"] == "optimal"
    assert "; MILP solved in " in proc.stdout.strip().splitlines()[-1]


def test_demand_from_file(pipeline, tmp_path):
    m = np.full((6, 6), 1000)
    np.fill_diagonal(m, 0)
    np.save(tmp_path / "d.npy", m)
    proc, out = pipeline("alltoallv", "platform=fig1", "workload=file", f"workload.path={tmp_path / 'd.npy'}",
                         f"catalog_cache={tmp_path / 'cache'}")
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "cache").glob("*.json"))  # the catalog was cached under its topology hash
    assert results(out)["total_bytes"] == 30000


@pytest.mark.parametrize("overrides, words", [
    (["platform=nope"], "platform"),
    (["scheduler=nope"], "scheduler"),
    (["nodes=0"], "nodes"),
    (["workload.skew=-0.5"], "skew"),
    (["schedulers=[variopath,nope]"], "nope"),
    (["platform=fig1", "workload=file", "workload.path=/nonexistent.npy"], "does not exist"),
])
def test_bad_input_is_one_line_and_exit_2_with_nothing_written(pipeline, overrides, words):
    proc, out = pipeline("alltoallv", *overrides)
    assert proc.returncode == 2, proc.stderr
    lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
    assert len(lines) == 1 and words in lines[0]
    assert not (out / "results.json").exists()


def test_wrong_shape_demand_file_is_rejected(pipeline, tmp_path):
    np.save(tmp_path / "d.npy", np.ones((4, 4)))
    proc, out = pipeline("alltoallv", "platform=fig1", "workload=file", f"workload.path={tmp_path / 'd.npy'}")
    assert proc.returncode == 2 and "6 x 6" in proc.stderr
    assert not (out / "results.json").exists()


def test_summary_of_a_demand_with_nothing_to_move():
    from pipelines.alltoallv import summary

    results = {"workload": {"name": "file", "path": "zero.npy"}, "n_ranks": 8, "platform": "r5080_bf3",
               "total_bytes": 0, "scheduler": "variopath", "registry_key": "variopath", "completion_s": 0.0,
               "algbw_Bps": 0.0, "busbw_Bps": 0.0, "activations": 0}
    timings = {"planning_s": 1e-5, "planning_over_communication": None, "planning_repeats": 5,
               "planning_cold_s": 5e-5, "planning_over_communication_cold": None}
    text = summary(results, timings)
    assert text.splitlines() == ["file demand (from zero.npy) on 8 GPUs of r5080_bf3: 0 B in all",
                                 "variopath: completion 0 us, algbw 0.0 GB/s, busbw 0.0 GB/s, 0 activations; "
                                 "planning 10 us (median of 5; first call 50 us)"]
