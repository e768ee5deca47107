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
