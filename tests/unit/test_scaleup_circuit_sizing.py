"""Hybrid level-2 circuit sizing: water-fill within the uplinks, following demand, connected."""

import numpy as np

from fabrics.scaleup.circuit_sizing import rack_circuit_counts, rack_circuit_load


def test_rack_circuits_respect_uplinks_and_follow_demand():
    rng = np.random.default_rng(0)
    demand = rng.random((6, 6)) * 100
    demand[0, 1] = demand[1, 0] = 1e4
    np.fill_diagonal(demand, 0)
    counts = rack_circuit_counts(demand, 4)
    assert (counts.sum(axis=1) <= 4).all() and (counts.sum(axis=0) <= 4).all()
    assert counts[0, 1] == counts.max() and counts[0, 1] >= 2
    assert np.isfinite(rack_circuit_load(demand, counts)).all()


def test_uniform_demand_gives_a_connected_circulant():
    demand = np.ones((8, 8)) - np.eye(8)
    counts = rack_circuit_counts(demand, 2)
    assert (counts.sum(axis=1) == 2).all()
    assert np.isfinite(rack_circuit_load(demand, counts)).all()
