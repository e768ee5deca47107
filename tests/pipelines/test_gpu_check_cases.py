"""benchmarks/gpu_check.sh's deployments stay valid configs: the script runs only where a GPU is,
so a change to the config groups would otherwise first show there (as a refused override)."""

import pytest
from gx_inprocess import compose

from benchmarks.gpu_check import CALIBRATIONS
from pipelines.specs import deployment_spec


@pytest.mark.parametrize("label", sorted(CALIBRATIONS))
def test_each_calibration_composes_into_its_bf16_deployment(label):
    for pipeline in ("calibrate", "decode"):
        dep = deployment_spec(compose(pipeline, *CALIBRATIONS[label], "accelerator=h200"))
        q = dep.precision
        assert (q.weights_bits, q.kv_bits, q.activations_bits) == (16, 16, 16), label
        assert dep.accelerator.name == "h200"
