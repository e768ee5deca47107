"""gx search: every feasible split timed analytically, best kept, near-best re-simulated (B.6)."""

import json

import pytest


def _res(out):
    return json.loads((out / "results.json").read_text())


def test_search_keeps_the_best_feasible_split_with_power(pipeline):
    proc, out = pipeline("search", "model=megatron_235b", "world=16", "context=32K", "batch=2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = _res(out)
    feasible = [r for r in res["splits"] if r["feasible"]]
    assert res["count"] == len(res["splits"]) and res["feasible"] == len(feasible) > 1
    assert res["best"]["interactivity_tok_s_user"] == max(r["interactivity_tok_s_user"] for r in feasible)
    assert res["best"]["tokens_per_s_per_MW"] == pytest.approx(
        res["best"]["throughput_tok_s"] / res["system_power_W"] * 1e6)
    assert (out / "splits.png").stat().st_size > 1000


def test_search_resimulates_near_best_splits_with_simlette(pipeline):
    proc, out = pipeline("search", "model=megatron_235b", "world=16", "context=32K", "network=simlette",
                         "search.resimulate=true", "search.within=0.05")
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = _res(out)
    assert res["resimulated"] is True
    near = [r for r in res["splits"] if "resimulated_decode_step_s" in r]
    assert len(near) == res["near_best"] >= 1
    best_analytical = max(r["interactivity_tok_s_user"] for r in res["splits"] if r["feasible"])
    assert all(r["interactivity_tok_s_user"] >= 0.95 * best_analytical for r in near)
    assert res["best"]["resimulated_decode_step_s"] == min(r["resimulated_decode_step_s"] for r in near)


def test_search_with_no_feasible_split_is_a_clear_error(pipeline):
    proc, out = pipeline("search", "model=megatron_5t", "world=16", "context=5M")
    assert proc.returncode == 2
    assert "no feasible Helix split" in proc.stderr and not (out / "results.json").exists()
