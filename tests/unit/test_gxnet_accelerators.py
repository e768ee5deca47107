import pytest

from collectives.errors import SpecError
from gxnet.accelerators import EfficiencySteps, accelerator_from_dict

BASE = dict(name="acc", peak_flops=1e15, hbm_bytes=10**11, hbm_bandwidth_Bps=1e12, scaleup_ports=4,
            port_rate_Bps=5e10, kernel_launch_s=2.5e-6, in_graph_launch_s=0.8e-6,
            eta_memory={"upper": [1e6, 1e7], "values": [0.3, 0.6, 0.9]},
            eta_compute={"upper": [1e9], "values": [0.2, 0.8]})


def test_step_function_upper_bounds_are_inclusive():
    f = EfficiencySteps(upper=(1e6, 1e7), values=(0.3, 0.6, 0.9))
    assert f(1) == 0.3 and f(1e6) == 0.3 and f(1e6 + 1) == 0.6 and f(1e7) == 0.6 and f(1e9) == 0.9


def test_roofline_is_the_max_of_compute_and_memory_time():
    a = accelerator_from_dict(BASE)
    t_mem = a.kernel_time_s(flops=1e3, bytes_moved=2e7)
    assert t_mem == pytest.approx(2e7 / (1e12 * 0.9))
    t_cmp = a.kernel_time_s(flops=1e12, bytes_moved=1e3)
    assert t_cmp == pytest.approx(1e12 / (1e15 * 0.8))
    # the efficiency basis can differ from the size charged (step basis, see roofline pass)
    assert a.kernel_time_s(0, 1e6, bytes_basis=1e8) == pytest.approx(1e6 / (1e12 * 0.9))


@pytest.mark.parametrize("patch, words", [
    ({"peak_flops": 0}, ["peak_flops", "positive"]),
    ({"hbm_bytes": "lots"}, ["hbm_bytes", "number"]),
    ({"eta_memory": {"upper": [1e6], "values": [0.3]}}, ["one more value"]),
    ({"eta_memory": {"upper": [1e7, 1e6], "values": [0.3, 0.4, 0.5]}}, ["increasing"]),
    ({"eta_compute": {"upper": [1e9], "values": [0.2, 1.5]}}, ["(0, 1]"]),
    ({"efficiency_basis": "layer"}, ["efficiency_basis", "step"]),
    ({"turbo": True}, ["unknown field", "turbo"]),
])
def test_bad_accelerators_are_refused(patch, words):
    with pytest.raises(SpecError) as e:
        accelerator_from_dict({**BASE, **patch})
    assert all(w in str(e.value) for w in words), str(e.value)


def test_missing_field_is_named():
    d = dict(BASE)
    del d["hbm_bandwidth_Bps"]
    with pytest.raises(SpecError, match="hbm_bandwidth_Bps"):
        accelerator_from_dict(d)


def test_shipped_accelerators_load():
    from gxnet.testing import accelerator

    rx, b2, h1, h2 = (accelerator(n) for n in ("rx00", "b200", "h100", "h200"))
    assert rx.peak_flops == 50e15 and rx.hbm_bytes == 288e9 and rx.hbm_bandwidth_Bps == 22e12
    assert b2.peak_flops == 20e15 and b2.hbm_bytes == 186e9 and b2.hbm_bandwidth_Bps == 8e12
    assert h1.hbm_bytes == 80e9 and h1.hbm_bandwidth_Bps == 3.35e12 and h1.peak_flops == 1.979e15
    assert h2.hbm_bytes == 141e9 and h2.hbm_bandwidth_Bps == 4.8e12
    assert rx.in_graph_launch_s == 0.8e-6 and rx.eta_memory(80e6) == 0.75 and rx.eta_compute(8e9) == 0.36
