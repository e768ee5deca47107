"""fabrics/network/maxmin.py: max-min fair rates by progressive filling, finish times with re-sharing."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectives.errors import SpecError
from fabrics.network.maxmin import Flows, finish_times, maxmin_rates


def test_progressive_filling_freezes_flows_at_the_first_saturated_resource():
    # link 0 (cap 10) carries flows a, b; link 1 (cap 4) carries b, c: b and c saturate link 1 at 2 each,
    # then a takes what b leaves on link 0
    flows = Flows.from_rows([[0], [0, 1], [1]], np.array([10.0, 4.0]))
    assert maxmin_rates(flows) == pytest.approx([8.0, 2.0, 2.0])


def test_coefficients_count_a_share_of_the_bytes_on_a_resource():
    # flow 0 puts half its bytes on resource 0 (two parallel routes), flow 1 all of them
    flows = Flows.from_rows([[0], [0]], np.array([3.0]), coefficients=[[0.5], [1.0]])
    assert maxmin_rates(flows) == pytest.approx([2.0, 2.0])  # 0.5*2 + 2 = 3


def test_rates_are_recomputed_when_a_flow_finishes():
    flows = Flows.from_rows([[0], [0]], np.array([1.0]))
    assert finish_times(flows, np.array([1.0, 3.0])) == pytest.approx([2.0, 4.0])


def test_a_flow_without_capacity_is_an_error_not_a_hang():
    flows = Flows.from_rows([[0], []], np.array([1.0]))
    with pytest.raises(SpecError, match="no resource"):
        finish_times(flows, np.array([1.0, 1.0]))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_finish_time_never_beats_the_bottleneck_bound(data):
    n_res = data.draw(st.integers(1, 5))
    n_flows = data.draw(st.integers(1, 8))
    rows = [sorted(set(data.draw(st.lists(st.integers(0, n_res - 1), min_size=1, max_size=3))))
            for _ in range(n_flows)]
    cap = np.array(data.draw(st.lists(st.floats(0.5, 10.0), min_size=n_res, max_size=n_res)))
    size = np.array(data.draw(st.lists(st.floats(0.1, 10.0), min_size=n_flows, max_size=n_flows)))
    flows = Flows.from_rows(rows, cap)
    rates = maxmin_rates(flows)
    load = np.zeros(n_res)
    for r, cols in zip(rates, rows):
        load[cols] += r
    assert (load <= cap * (1 + 1e-9)).all()  # feasible
    for f, cols in enumerate(rows):  # max-min: every flow crosses a saturated resource
        assert any(load[c] >= cap[c] * (1 - 1e-9) for c in cols)
    makespan = finish_times(flows, size).max()
    bound = max(sum(size[f] for f, cols in enumerate(rows) if c in cols) / cap[c] for c in range(n_res))
    assert makespan >= bound * (1 - 1e-9)
