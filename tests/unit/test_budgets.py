"""pipelines.budgets: estimates are cheap, the paper's configurations fit the defaults, the hangs do not."""

import time

import pytest

from collectives.errors import SpecError
from pipelines.budgets import Budget, Estimate, budget_of, check, enforce

# The biggest real runs: Megatron 5T decode at world 512 on the 576-accelerator fabrics (paper 003,
# C.7), Simlette on 256 accelerators (Figure 3 scale), VarioPath at 256 GPUs (paper 000, Section 6).
MEGATRON = {"world": 512, "model": {"name": "megatron_5t", "layers": 128, "experts": 256},
            "accelerator": {"scaleup_ports": 36}, "network": {"name": "analytical"}}
REAL = [
    ("decode", {**MEGATRON, "fabric": {"name": kind, "accelerators": 576}})
    for kind in ("all_eps", "hybrid", "all_ocs")
] + [
    ("decode", {**MEGATRON, "fabric": {"name": "single_ocs", "accelerators": 512}}),
    ("decode", {**MEGATRON, "fabric": {"name": "all_eps", "accelerators": 576}, "network": {"name": "simlette"}}),
    ("collective", {"fabric": {"name": "single_eps", "world": 256}, "network": {"name": "simlette"}, "size": "1MiB"}),
    ("collective", {"fabric": {"name": "all_eps", "world": 512, "accelerators": 576}, "size": "1KiB..16MiB"}),
    ("collective", {"topology": {"kind": "hypercube", "dims": 9}, "verify": True, "collective": "alltoall"}),
    ("alltoallv", {"nodes": 32, "platform": "r5080_cx8"}),
    ("prefill", {"fabric": {"name": "pcie", "nodes": 4}, "ep": 32, "requests": 1, "prompt_tokens": 8192,
                 "model": {"experts": 128}}),
    ("plan", {"world": 512}), ("splits", {"world": 576}), ("search", {**MEGATRON, "fabric": {"name": "hybrid"}}),
]


@pytest.mark.parametrize("pipeline,cfg", REAL, ids=[f"{p}-{i}" for i, (p, _) in enumerate(REAL)])
def test_real_configurations_fit_the_defaults_with_margin(pipeline, cfg):
    est = enforce(pipeline, cfg)
    b = Budget()
    # headroom on every limit (8x ranks, 4x memory, 2x events): the defaults are not tuned to just pass
    assert est.ranks * 8 <= b.max_ranks and est.memory_bytes * 4 <= b.max_memory_bytes
    assert est.rank_pairs * 8 <= b.max_rank_pairs and est.events * 2 <= b.max_events


@pytest.mark.parametrize("pipeline,cfg,limit", [
    ("collective", {"fabric": {"name": "single_eps", "world": 1048576}}, "budget.max_ranks"),
    ("alltoallv", {"nodes": 131072}, "budget.max_ranks"),
    ("decode", {**MEGATRON, "world": 524288, "fabric": {"name": "single_eps"}}, "budget.max_ranks"),
    ("collective", {"fabric": {"name": "single_eps", "world": 8192}}, "budget.max_memory"),
])
def test_the_reported_hangs_are_refused_at_once(pipeline, cfg, limit):
    t0 = time.perf_counter()
    with pytest.raises(SpecError, match=limit) as err:
        enforce(pipeline, cfg)
    assert time.perf_counter() - t0 < 0.5  # the estimate builds nothing
    assert "\n" not in str(err.value) and "raise the limit" in str(err.value)


def test_memory_estimate_tracks_the_measured_peak():
    """collective fabric=single_eps fabric.world=8192 peaked at 10.7 GB RSS (9.97 GiB); 1024 at 255 MB."""
    big = enforce("collective", {"fabric": {"name": "single_eps", "world": 8192}, "budget": {"max_memory": "64GiB"}})
    small = enforce("collective", {"fabric": {"name": "single_eps", "world": 1024}})
    assert 0.8 * 10.7e9 < big.memory_bytes < 1.5 * 10.7e9
    assert small.memory_bytes < 255e6


def test_simlette_event_estimate_matches_a_measured_run():
    """collective fabric=single_eps fabric.world=256 network=simlette size=1MiB ran 1,828,353 events."""
    est = enforce("collective", {"fabric": {"name": "single_eps", "world": 256}, "network": {"name": "simlette"},
                                 "size": "1MiB"})
    assert 0.9 * 1_828_353 < est.events < 1.1 * 1_828_353


def test_budget_group_parses_units_and_refuses_nonsense():
    assert budget_of({"budget": {"max_memory": "32GiB", "max_ranks": "1Mi"}}) == Budget(
        max_memory_bytes=32 * 2**30, max_ranks=2**20)
    assert budget_of({}) == Budget()
    for bad, msg in (({"max_ranks": 0}, "positive"), ({"max_memory": "lots"}, "max_memory"),
                     ({"max_cores": 4}, "is not a budget")):
        with pytest.raises(SpecError, match=msg):
            budget_of({"budget": bad})


def test_check_names_every_limit_to_raise():
    est = Estimate(ranks=2**20, rank_pairs=2**40, memory_bytes=2**40, drivers="a test")
    with pytest.raises(SpecError) as err:
        check("collective", est, Budget())
    msg = str(err.value)
    assert msg.startswith("gx collective would need about 1,048,576 ranks (a test)")
    assert "budget.max_ranks=1048576 budget.max_rank_pairs=1099511627776 budget.max_memory=1024GiB" in msg
