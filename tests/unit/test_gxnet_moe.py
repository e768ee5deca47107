import math

from hypothesis import given
from hypothesis import strategies as st

from gxnet.moe import active_experts, moe_load


def test_appendix_b2_examples():
    # paper-numbers.md: B=1 -> N_act 8, R 1; B=4 -> 30, 2; B=16 -> 101, 3 (256 experts, top-8, EP 64)
    got = [(moe_load(b, 8, 256, 64).active_experts, moe_load(b, 8, 256, 64).busiest_rows) for b in (1, 4, 16)]
    assert got == [(8, 1), (30, 2), (101, 3)]


@given(b=st.integers(1, 4096), k=st.integers(1, 8), e_pow=st.integers(2, 9), ep_pow=st.integers(0, 9))
def test_load_model_properties(b, k, e_pow, ep_pow):
    experts, ep = 1 << e_pow, 1 << min(ep_pow, e_pow)
    k = min(k, experts)
    load = moe_load(b, k, experts, ep)
    n = load.active_experts
    assert 1 <= n <= min(experts, b * k)
    assert n == max(1, math.floor(experts * (1 - (1 - 1 / experts) ** (b * k)) + 0.5))
    assert load.busiest_experts * ep >= n >= load.lightest_experts * ep
    assert load.busiest_experts - load.lightest_experts in (0, 1)
    # busiest + lighter EP ranks hold exactly the active experts
    light_ranks = ep - load.busiest_ranks
    assert load.busiest_ranks * load.busiest_experts + light_ranks * load.lightest_experts == n
    # rounded once per rank: never more than per-expert rounding, never fewer than the mean share
    assert load.busiest_rows <= load.busiest_experts * load.tokens_per_expert
    assert load.busiest_rows * n >= load.busiest_experts * b * k


def test_active_experts_rounds_half_up():
    assert active_experts(1, 1, 2) == 1  # 2 * (1 - 1/2) = 1.0
    assert active_experts(1, 8, 256) == 8
