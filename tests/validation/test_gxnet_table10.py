"""Table 10 of paper 003: parameters within 2 %, KV cache per token exact, 5T memory bound."""

import pytest

from collectives.errors import SpecError
from gxnet.memory import max_batch
from gxnet.testing import deployment, model

# name: (total params, active params, printed digits of total in T, KV bytes per context token)
TABLE10 = {
    "megatron_235b": (0.23e12, 17e9, 2, 144 * 1024),
    "megatron_1t": (1.10e12, 38e9, 2, 256 * 1024),
    "megatron_5t": (5.00e12, 207e9, 2, 1024 * 1024),
    "gpt_oss_120b": (0.12e12, 5.7e9, 2, 9 * 1024),
    "gpt_oss_1t_like": (1.05e12, 21e9, 2, 16 * 1024),
    "gpt_oss_5p3_like": (4.97e12, 95e9, 2, 48 * 1024),
}


def _close(got, paper, printed_unit):
    # within 2 %, or within the rounding of the printed figure (0.12 T stands for 0.115-0.125 T)
    return abs(got - paper) <= max(0.02 * paper, printed_unit / 2)


@pytest.mark.parametrize("name", sorted(TABLE10))
def test_parameters_within_2_percent(name):
    total, active, digits, _ = TABLE10[name]
    m = model(name)
    assert _close(m.total_params(), total, 10 ** (12 - digits)), m.total_params()
    assert abs(m.active_params() - active) <= 0.02 * active, m.active_params()


def test_only_gpt_oss_120b_needs_the_rounding_allowance():
    # 116.8 B parameters (the published GPT-OSS-120B count) print as 0.12 T but are 2.6 % below it.
    m = model("gpt_oss_120b")
    assert 0.115e12 < m.total_params() < 0.12e12 * 0.98
    for name in set(TABLE10) - {"gpt_oss_120b"}:
        assert abs(model(name).total_params() - TABLE10[name][0]) <= 0.02 * TABLE10[name][0]


@pytest.mark.parametrize("name", sorted(TABLE10))
def test_kv_cache_per_token_exact(name):
    assert model(name).kv_bytes_per_token(kv_bits=4) == TABLE10[name][3]


def test_megatron_5t_user_at_5m_context_holds_5p2_tb():
    kv = model("megatron_5t").kv_bytes_per_token() * 5_000_000
    assert kv == pytest.approx(5.2e12, rel=0.01)
    gpt = model("gpt_oss_5p3_like").kv_bytes_per_token() * 5_000_000
    assert gpt == pytest.approx(246e9, rel=0.01)  # D.1: 246 GB per GPT-OSS-5.3-like user


def test_batch_16_fits_batch_32_is_refused():
    d = deployment(parallel=(4, 128, 16, 32), batch=16, context=5_000_000)
    assert max_batch(d) == 16
    with pytest.raises(SpecError) as e:
        deployment(parallel=(4, 128, 16, 32), batch=32, context=5_000_000)
    msg = str(e.value)
    assert "batch=32" in msg and "288.0 GB HBM of rx00" in msg and "largest power-of-two batch that fits is 16" in msg
