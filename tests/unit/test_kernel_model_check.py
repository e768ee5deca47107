"""benchmarks/kernel_model_check.py: one row per timed kernel, the fitted model's prediction beside it."""

import pytest

from benchmarks.kernel_model_check import rows
from gxnet import testing as T
from gxnet.kernels import kernel_model
from gxnet.precision import precision_from_dict


def _kernel(name, kernel="flash_decode", track=0, mb=200.0, us=60.0, **extra):
    return {"name": name, "kernel": kernel, "track": track, "hbm_bytes": mb * 1e6, "flops": 1e9,
            "measured_s": us * 1e-6, "scaled": False, **extra}


def test_one_row_per_timing_largest_first_with_the_models_residual():
    kernels = [_kernel("L0.flash_decode"),
               _kernel("L1.flash_decode", reused_from={"name": "L0.flash_decode", "track": 0}),
               _kernel("L1.flash_decode"),  # a file without reused_from: the same timing counts once
               _kernel("L0.flash_decode", track=1),  # another track
               _kernel("L0.experts", kernel="expert_gemm", mb=400.0, us=120.0),
               _kernel("L0.big", mb=900.0, scaled=True)]  # extrapolated, not measured
    report = {"steps": {"topology": {"rc": 0},
                        "calibrate/case_a": {"calibrate": {"results": {"roofline_accelerator": "h200",
                                                                       "kernels": kernels}}},
                        "calibrate/failed": {"calibrate": {"results": None}}}}
    got = rows(report)
    assert [r["kernel"] for r in got] == ["L0.experts (expert_gemm)", "L0.flash_decode (flash_decode)"]
    km = kernel_model(T.accelerator("h200"), precision_from_dict("bf16"))
    for r, mb, us in zip(got, (400.0, 200.0), (120.0, 60.0)):
        assert r["case"] == "case_a" and r["hbm_MB"] == pytest.approx(mb)
        assert r["predicted_us"] == pytest.approx(km.kernel_s(1e9, mb * 1e6) * 1e6)
        assert r["residual"] == pytest.approx(r["predicted_us"] / us - 1)
