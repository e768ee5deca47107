"""End to end: python -m pipelines.collective ... hydra.run.dir=<tmp> (results.json, plot, errors)."""

import json

import pytest


def _results(out):
    return json.loads((out / "results.json").read_text())


def test_single_size_table4_topology(pipeline):
    proc, out = pipeline("collective", "collective=allreduce", "topology=hypercube", "topology.dims=4",
                         "topology.folds=[0b1111]", "size=4KiB", "link_rate=400Gb/s", "hop_latency=0.52us",
                         "multiplicity=1", "verify=true", "tracking=off")
    assert proc.returncode == 0, proc.stderr
    res = _results(out)
    assert res["topology"]["degree"] == 5 and res["topology"]["diameter"] == 2
    s = res["schedules"]
    assert s["one_shot"]["phases"] == 2 and s["one_shot"]["volume_bytes"] == 7 * 4096
    assert s["coset_factored_parallel"]["phases"] == 3
    assert s["two_shot"]["valid"] is False and s["two_shot"]["time_s"] is None
    best = res["best"]
    assert s[best]["time_s"] == min(r["time_s"] for r in s.values() if r["valid"])
    assert res["verified"]["matches_closed_form"] is True
    assert not (out / "completion_time.png").exists()


def test_size_range_writes_plot(pipeline):
    proc, out = pipeline("collective", "topology.dims=9", "size=1KiB..16MiB*4", "tracking=off")
    assert proc.returncode == 0, proc.stderr
    res = _results(out)
    assert [r["size_bytes"] for r in res["sweep"]] == [1024 * 4**k for k in range(8)]
    assert res["sweep"][0]["best"] == "coset_factored_parallel"
    assert res["sweep"][-1]["best"] == "rs_ag_parallel"
    png = (out / "completion_time.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_alltoall_on_block_fold_and_list_of_sizes(pipeline):
    proc, out = pipeline("collective", "collective=alltoall", "topology=block_fold", "topology.blocks=[4,3]",
                         "size=[1KiB,1MiB]", "tracking=off")
    assert proc.returncode == 0, proc.stderr
    res = _results(out)
    assert res["topology"]["n_ranks"] == 128
    assert res["schedules"]["bruck_parallel"]["phases"] == 2
    assert len(res["sweep"]) == 2 and (out / "completion_time.png").exists()


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (["topology.ranks=12"], "power of two"),
        (["topology.dims=4", "topology.folds=[0b10000]"], "out of range"),
        (["topology.dims=4", "topology.folds=[0b1100,0b1100]"], "given twice"),
        (["topology.dims=4", "topology.folds=[1]"], "duplicates"),
        (["schedule=fastest"], "unknown schedule"),
        (["size=4QB"], "size"),
        (["collective=broadcast"], "collective"),
        (["topology.dims=3", "schedule=two_shot"], "complete graph"),
    ],
)
def test_bad_input_exit_2_one_line_nothing_written(pipeline, overrides, fragment):
    proc, out = pipeline("collective", *overrides, "tracking=off")
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and fragment in lines[0]
    assert not (out / "results.json").exists()


# -- in-process checks of the config edge (no subprocess) ------------------------------------

def test_parse_sizes_forms():
    from pipelines.collective import parse_sizes

    assert parse_sizes("4KiB") == [4096]
    assert parse_sizes(["1KiB", "1kB"]) == [1024, 1000]
    assert parse_sizes("1KiB..8KiB") == [1024, 2048, 4096, 8192]
    assert parse_sizes("1KiB..16KiB*4") == [1024, 4096, 16384]
    from collectives.errors import SpecError

    for bad in ("8KiB..1KiB", "1KiB..8KiB*1", "lots"):
        with pytest.raises(SpecError):
            parse_sizes(bad)


def test_task_pricing_step_is_swappable():
    from omegaconf import OmegaConf

    from pipelines.collective import task

    cfg = OmegaConf.create({"collective": "allreduce", "schedule": "auto", "size": "4KiB", "link_rate": "400Gb/s",
                            "hop_latency": "0.52us", "multiplicity": 1, "verify": False,
                            "topology": {"kind": "block_fold", "blocks": [3, 3], "folds": []}})
    calls = []

    def fake_pricer(collective, topo, size, lam, rate, p, schedule):
        calls.append((collective, topo.describe(), size, p))
        return {"x": {"valid": True, "phases": 1, "volume_bytes": 1.0, "time_s": 1e-6}}, "x"

    results, artifacts = task(cfg, pricer=fake_pricer)
    assert calls == [("allreduce", "K8□K8", 4096, 1)]
    assert results["best"] == "x" and results["topology"]["coset_layers"] and artifacts == {}
