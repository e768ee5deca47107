"""``python -m pipelines.plan`` end to end (the issue's command line)."""

import json

import pytest

ISSUE_MESHES = ("meshes=[{shape:[4,64],collective:allreduce,payloads:[4KiB,32KiB]},"
                "{shape:[16,16],collective:allreduce,payloads:[4KiB,4KiB]}]")


def test_plan_cli_writes_results_and_plan(pipeline):
    proc, out = pipeline("plan", "world=256", "ports=18", "link_rate=400Gb/s", "hop_latency=0.52us", ISSUE_MESHES,
                         "tracking=off")
    assert proc.returncode == 0, proc.stderr
    res = json.loads((out / "results.json").read_text())
    assert res["total_time_s"] == pytest.approx(4.54e-6, abs=0.01e-6)
    assert (res["host_degree"], res["ports_used"]) == (17, 17)
    assert len(res["axes"]) == 4
    assert set(res["axes"][0]) >= {"mesh", "axis", "size", "topology", "degree", "phases", "multiplicity",
                                   "schedule", "time_s"}
    plan = json.loads((out / "plan.json").read_text())
    assert plan["request_hash"] == res["request_hash"] and len(plan["port_masks"]) == 18


def test_plan_cli_stacked_link(pipeline):
    proc, out = pipeline("plan", "world=512", "ports=24", "allocation=stacked_link", "tracking=off",
                         "meshes=[{shape:[8,64],collective:allreduce,payloads:[8KiB,8KiB]}]")
    assert proc.returncode == 0, proc.stderr
    res = json.loads((out / "results.json").read_text())
    assert res["allocation"] == "stacked_link" and res["ports_used"] <= 24


@pytest.mark.parametrize("override, fragment", [
    ("ports=4", "log2"),
    ("link_rate=fast", "link_rate"),
    ("meshes=[{shape:[4,32],collective:allreduce,payloads:[4KiB,4KiB]}]", "spans 128"),
])
def test_plan_cli_bad_input(pipeline, override, fragment):
    proc, out = pipeline("plan", override, "tracking=off")
    assert proc.returncode == 2
    assert fragment in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (out / "results.json").exists()
