import pytest
import sympy as sp

from gxnet.ir import B, Placement, TensorType


def test_tensor_bytes_use_local_shape_and_bits():
    t = TensorType(dims=("B", "H"), shape=(B, sp.Integer(8)), role="activation", bits=4,
                   local_shape=(B, sp.Integer(2)))
    assert t.nbytes() == B and t.nbytes(local=False) == 4 * B
    assert t.nbytes(bits=16) == 4 * B


def test_tensor_validation():
    with pytest.raises(ValueError, match="differ in rank"):
        TensorType(dims=("B",), shape=(B, 2), role="activation")
    with pytest.raises(ValueError, match="unknown tensor role"):
        TensorType(dims=("B",), shape=(B,), role="gradient")
    with pytest.raises(ValueError, match="precision pass"):
        TensorType(dims=("B",), shape=(B,), role="activation").nbytes()


def test_placement_describe_and_lookup():
    p = Placement((("A", ("tpa", "kvp")),), ("tpe",), "sum")
    assert p.axes_of("A") == ("tpa", "kvp") and p.axes_of("H") == ()
    assert p.describe() == "A:tpa*kvp partial-sum(tpe)"
    assert Placement().describe() == "replicated"
