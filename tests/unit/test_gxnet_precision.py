import pytest

from collectives.errors import SpecError
from gxnet.precision import PrecisionSpec, precision_from_dict


def test_presets():
    fp4 = precision_from_dict("fp4")
    assert (fp4.weights_bits, fp4.kv_bits, fp4.comm_bits, fp4.softmax_stat_bits) == (4, 4, 4, 8)
    bf16 = precision_from_dict({"name": "bf16"})
    assert (bf16.comm_bits, bf16.softmax_stat_bits, bf16.weights_bits, bf16.kv_bits) == (16, 32, 16, 16)
    # Appendix E's variant: BF16 activations and collectives over FP4 storage
    e = precision_from_dict({"name": "fp4_bf16act"})
    assert (e.comm_bits, e.softmax_stat_bits, e.weights_bits, e.kv_bits) == (16, 32, 4, 4)


def test_overrides_make_a_custom_precision():
    p = precision_from_dict({"softmax_stat_bits": 32})
    assert p.softmax_stat_bits == 32 and p.name == "custom"


@pytest.mark.parametrize("bad", [{"comm_bits": 5}, {"kv_bits": 0}])
def test_bad_bits(bad):
    with pytest.raises(SpecError, match="must be one of 4, 8, 16, 32"):
        precision_from_dict(bad)


def test_unknown_preset_and_field():
    with pytest.raises(SpecError, match="unknown precision 'fp3'"):
        precision_from_dict("fp3")
    with pytest.raises(SpecError, match="unknown field"):
        precision_from_dict({"mantissa": 3})
    assert PrecisionSpec() == precision_from_dict(None)


def test_preset_name_must_match_its_bits():
    with pytest.raises(SpecError, match="precision name 'bf16' does not match"):
        PrecisionSpec(name="bf16")
    assert PrecisionSpec(name="custom", comm_bits=8).comm_bits == 8
    with pytest.raises(SpecError, match="whole number of bits"):
        precision_from_dict({"comm_bits": "four"})


def test_serving_presets_mean_their_bits():
    import sympy as sp

    fp8, mx, nv = (precision_from_dict(n) for n in ("fp8", "mxfp4", "nvfp4"))
    assert (fp8.weights_bits, fp8.kv_bits, fp8.activations_bits) == (8, 16, 16)
    assert precision_from_dict("fp8_kv8").kv_bits == 8
    assert mx.stored_weight_bits == sp.Rational(17, 4)  # 4 bits + one 8-bit scale per 32
    assert nv.stored_weight_bits == sp.Rational(9, 2)  # 4 bits + one 8-bit scale per 16
    assert precision_from_dict("fp4").stored_weight_bits == 4 and precision_from_dict("bf16").stored_weight_bits == 16
    assert precision_from_dict({"name": "fp8", "kv_bits": 8}).name == "custom"


def test_bf16_weight_groups_and_scales_in_the_weight_bytes():
    from gxnet.memory import weights_bytes
    from gxnet.testing import model

    m = model("deepseek_v3")
    g = m.param_groups()
    fp8 = precision_from_dict("fp8")
    bf16_part = g["embedding"] + g["lm_head"] + g["norms"] + g["router"]
    fp8_part = m.total_params() - bf16_part
    assert weights_bytes(m, fp8) == -(-(bf16_part * 16 * 16384 + fp8_part * (8 * 16384 + 32)) // (8 * 16384))
    assert weights_bytes(m, precision_from_dict("bf16")) == 2 * m.total_params()
