"""pipelines/hardware/measured.py: compute=measured runs both steps on the network it is given."""

import json

import pytest

from gxnet import testing as T
from gxnet.calibration import deployment_key
from gxnet.plan import build_plan
from pipelines.hardware.measured import evaluate_compute


class CountingNetwork(T.FixedLatencyNetwork):
    def __init__(self):
        super().__init__(latency_s=2e-6, record=False)
        self.calls = 0

    def register(self, call, earliest_start_s):
        self.calls += 1
        super().register(call, earliest_start_s)


def test_measured_and_roofline_steps_run_on_the_same_network(tmp_path):
    d = T.deployment(batch=4)
    plan = build_plan(d)
    kernels = [{"section": s.name, "name": e.name, "kernel": e.kernel, "track": t, "measured_s": dur * 2.0,
                "scaled": False}
               for s in plan.sections for e in s.entries if hasattr(e, "kernel") for t, dur in enumerate(e.durations_s)]
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"format": "gxnet.calibration/1", "deployment": deployment_key(d),
                                "device": {"type": "cpu", "name": "test"}, "dtype": "float32", "kernels": kernels}))
    net = CountingNetwork()
    step, extra = evaluate_compute({"compute": {"name": "measured"}, "calibration": str(path)}, d, net)
    per_step = sum(sum(1 for e in s.entries if not hasattr(e, "kernel")) * s.repeat for s in plan.sections)
    assert net.prepared == 2 and net.calls == 2 * per_step  # roofline and measured: one network, both steps
    assert extra["compute"] == "measured" and step.decode_step_s > extra["roofline_decode_step_s"]
    roof, _ = evaluate_compute({"compute": {"name": "roofline"}}, d, CountingNetwork())
    assert roof.decode_step_s == pytest.approx(extra["roofline_decode_step_s"])
