import pytest

from fabrics.network.analytical import AnalyticalSingleLevel, SingleLevelParams, native_time_s
from fabrics.network.protocol import CollectiveCall, DemandEntry

P = SingleLevelParams(hop_latency_s=0.81e-6, link_rate_Bps=5e10, ports=36)


def test_one_shot_allreduce_small_buffer():
    t, name = native_time_s(P, "allreduce", 8, 4096)
    assert name == "one_shot"
    assert t == pytest.approx(0.81e-6 + 7 * 4096 / (36 * 5e10))


def test_two_shot_wins_for_large_buffers():
    t, name = native_time_s(P, "allreduce", 512, 64 * 2**20)
    assert name == "two_shot"
    assert t == pytest.approx(2 * 0.81e-6 + 2 * 511 / 512 * 64 * 2**20 / (36 * 5e10))


def test_crossover_is_where_one_phase_of_latency_equals_extra_volume():
    n, bw = 512, 36 * 5e10
    sigma_star = 0.81e-6 * bw / ((n - 1) - 2 * (n - 1) / n)
    below, _ = native_time_s(P, "allreduce", n, int(sigma_star * 0.9))
    assert native_time_s(P, "allreduce", n, int(sigma_star * 0.9))[1] == "one_shot"
    assert native_time_s(P, "allreduce", n, int(sigma_star * 1.1))[1] == "two_shot"
    assert below > 0


def test_single_rank_and_none_cost_nothing():
    assert native_time_s(P, "allreduce", 1, 4096) == (0.0, "none")
    assert native_time_s(P, "none", 8, 4096) == (0.0, "none")


def test_model_rejects_collectives_outside_the_demand():
    model = AnalyticalSingleLevel(P)
    model.prepare((DemandEntry(region="attention", axis="world", collective="allreduce", groups=1, ranks=4,
                               calls_per_step=1, payload_bytes=4096),), world=4)
    model.register(CollectiveCall(call_id=1, region="attention", axis="world", collective="allreduce",
                                  groups=((0, 1, 2, 3),), payload_bytes=4096), 1e-6)
    (done,) = model.advance()
    assert done.start_s == 1e-6 and done.end_s > done.start_s
    with pytest.raises(RuntimeError, match="outside the declared demand"):
        model.register(CollectiveCall(call_id=2, region="ffn", axis="ep", collective="allgather",
                                      groups=((0, 1), (2, 3)), payload_bytes=4096), 0.0)
