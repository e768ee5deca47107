"""``pipelines.decode`` and ``pipelines.collective`` on every scale-up fabric, end to end (CLI).

Small deployments (world 64: Megatron 5T, Helix (4,16,8,8), 32K context) keep the runs short;
OCS fabrics use 16 ports so the shared-host planner stays fast; one 512-of-576 all-OCS run checks
the full-size path and its plan.json.
"""

import json

import pytest

SMALL = ("world=64", "parallel.kvp=4", "parallel.tpa=16", "parallel.ep=8", "parallel.tpe=8", "context=32K")
FABRIC_ARGS = {
    "single_eps": (),
    "single_ocs": ("fabric.ports=16",),
    "all_eps": ("fabric.accelerators=64",),
    "hybrid": ("fabric.accelerators=64",),
    "all_ocs": ("fabric.accelerators=64", "fabric.ports=16"),
}
POWER_PARTS = ("accelerators_W", "eps_W", "ocs_W", "pluggables_W", "cpo_W")


def results(out):
    return json.loads((out / "results.json").read_text())


@pytest.mark.parametrize("kind", list(FABRIC_ARGS))
def test_decode_on_every_fabric(pipeline, kind):
    proc, out = pipeline("decode", f"fabric={kind}", *SMALL, *FABRIC_ARGS[kind])
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = results(out)
    assert res["fabric"] == kind and res["world"] == 64
    assert res["breakdown_s"]["communication"] > 0
    assert sum(res["breakdown_s"].values()) == pytest.approx(res["decode_step_s"], rel=1e-9)
    # power: consistent keys (Table 12; every accelerator of the fabric counted)
    p = res["power_breakdown_W"]
    assert res["system_power_W"] == pytest.approx(sum(p[k] for k in POWER_PARTS))
    assert res["tokens_per_s_per_MW"] == pytest.approx(res["throughput_tok_s"] / res["system_power_W"] * 1e6)
    assert p["accelerators"] == 64 and p["accelerators_W"] == pytest.approx(64 * 2631.0)
    assert (p["eps_W"] > 0) == (kind in ("single_eps", "all_eps", "hybrid"))
    assert (p["ocs_W"] > 0) == (kind in ("single_ocs", "hybrid", "all_ocs"))
    assert set(res["schedules"]) >= {"attention/world/allreduce", "ffn/tpe/allreduce"}
    planned = kind in ("hybrid", "single_ocs", "all_ocs")
    assert (out / "plan.json").exists() == planned
    assert ("plan" in res) == planned
    if kind in ("single_ocs", "all_ocs"):
        plan = json.loads((out / "plan.json").read_text())
        assert plan["ports_used"] <= 16 and plan["request_hash"] == res["plan"]["request_hash"]
        # each row runs the schedule its plan axis chose
        for axis in res["plan"]["axes"]:
            assert res["schedules"]["/".join((axis["region"], axis["axis"], axis["collective"]))] == axis["schedule"]
    elif kind == "hybrid":
        plan = json.loads((out / "plan.json").read_text())
        assert len(plan["accelerators"]) == 64 and len(set(plan["accelerators"])) == 64


@pytest.mark.slow  # suite time: the 512-accelerator all-OCS plan; golden decode_all_ocs covers the default
def test_decode_all_ocs_512_of_576_and_link_rate_selects_power_column(pipeline):
    p400, o400 = pipeline("decode", "fabric=all_ocs")
    p16, o16 = pipeline("decode", "fabric=all_ocs", "fabric.link_rate=1.6Tb/s")
    assert p400.returncode == 0 and p16.returncode == 0, p400.stderr[-2000:] + p16.stderr[-2000:]
    r400, r16 = results(o400), results(o16)
    assert r400["power_breakdown_W"]["accelerators"] == 576
    assert r400["system_power_W"] == pytest.approx(1_673_568, rel=1e-6)  # README.md, Table 12 at 400 G
    assert r16["system_power_W"] > r400["system_power_W"]
    assert r16["decode_step_s"] <= r400["decode_step_s"]  # 4× the bandwidth never hurts
    assert r400["plan"]["ports_used"] <= 36


def test_decode_link_rate_without_power_column_still_times(pipeline):
    proc, out = pipeline("decode", "fabric=all_eps", "fabric.link_rate=300Gb/s", *SMALL, "fabric.accelerators=64")
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = results(out)
    assert res["system_power_W"] is None and res["tokens_per_s_per_MW"] is None
    assert "Table 12" in res["power_note"]


@pytest.mark.parametrize("kind", ["all_eps", "hybrid", "all_ocs"])
def test_collective_on_a_fabric(pipeline, kind):
    proc, out = pipeline("collective", f"fabric={kind}", "collective=allreduce", "size=[1KiB,256KiB]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = results(out)
    assert res["mode"] == "fabric" and res["world"] == 512 and res["groups"] == 1
    assert res["completion_s"] == pytest.approx(min(r["time_s"] for r in res["schedules"].values())) \
        or kind == "all_ocs"  # OCS: the plan's schedule, which the table may beat on the physical paths
    assert res["schedules"][res["schedule"]]["time_s"] == pytest.approx(res["completion_s"])
    assert len(res["sweep"]) == 2 and res["sweep"][1]["completion_s"] > res["sweep"][0]["completion_s"]
    assert (out / "completion_time.png").exists()
    assert (out / "plan.json").exists() == (kind != "all_eps")
    if kind == "all_eps":
        assert set(res["schedules"]) == {"one_shot", "two_shot", "halving_doubling"}


def test_collective_fabric_groups_and_forced_schedule(pipeline):
    proc, out = pipeline("collective", "fabric=single_ocs", "fabric.world=64", "fabric.ports=12",
                         "collective=alltoall", "group_size=16", "schedule=bruck", "size=4KiB")
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = results(out)
    assert (res["world"], res["group_size"], res["groups"]) == (64, 16, 4)
    assert res["schedule"] == "bruck" and res["schedules"]["bruck"]["phases"] == 4


BAD = [
    (("fabric=single_ocs", "fabric.world=48"), "power of two"),
    (("fabric=all_eps", "group_size=24"), "group_size"),
    (("fabric=single_eps",), "fabric.world"),
    (("fabric=all_eps", "schedule=bruck", "collective=allreduce"), "not a native"),
]


@pytest.mark.parametrize("overrides,needle", BAD, ids=[b[1] for b in BAD])
def test_collective_fabric_bad_input(pipeline, overrides, needle):
    proc, out = pipeline("collective", *overrides)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and needle.lower() in lines[0].lower(), proc.stderr
    assert not (out / "results.json").exists()


def test_network_simlette_is_wired_into_decode_and_collective(pipeline):
    """README.md "how to wire": network=simlette in pipelines.decode and pipelines.collective.
    Without contention Simlette agrees with the analytical model on single-level EPS (C.4; its EPS
    hop costs one extra flit serialisation)."""
    sim, o_sim = pipeline("collective", "fabric=single_eps", "fabric.world=32", "fabric.ports=8", "network=simlette",
                          "size=4KiB")
    ana, o_ana = pipeline("collective", "fabric=single_eps", "fabric.world=32", "fabric.ports=8", "size=4KiB")
    assert sim.returncode == 0 and ana.returncode == 0, sim.stderr[-2000:] + ana.stderr[-2000:]
    rs, ra = results(o_sim), results(o_ana)
    assert rs["network"] == "simlette" and ra["network"] == "analytical"
    assert rs["completion_s"] == pytest.approx(ra["completion_s"], rel=0.10)
    proc, out = pipeline("decode", "network=simlette", "fabric=single_eps", *SMALL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = results(out)
    assert res["network"] == "simlette" and res["breakdown_s"]["communication"] > 0
    assert res["system_power_W"] > 0 and "plan" not in res
