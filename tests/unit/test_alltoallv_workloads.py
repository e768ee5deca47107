"""collectives/alltoallv/workloads.py: seeded demand matrices."""

import json

import numpy as np
import pytest

from collectives.alltoallv import workloads as w
from collectives.errors import SpecError


def test_uniform_and_zipf_rows_sum_to_bytes_per_rank():
    for d in (w.uniform(8, 10**6 + 3), w.zipf(8, 10**6 + 3, 0.6, 1)):
        assert (d.sum(axis=1) == 10**6 + 3).all() and not np.diag(d).any()


def test_zipf_skew_concentrates_traffic_and_is_seeded():
    lo, hi = w.zipf(16, 2**20, 0.4, 7), w.zipf(16, 2**20, 0.8, 7)
    assert hi.max(axis=1).mean() > lo.max(axis=1).mean()
    assert (w.zipf(16, 2**20, 0.6, 7) == w.zipf(16, 2**20, 0.6, 7)).all()
    assert (w.zipf(16, 2**20, 0.6, 7) != w.zipf(16, 2**20, 0.6, 8)).any()


def test_moe_routing_volumes():
    d = w.moe(8, 64, experts=256, top_k=8, hidden=7168, dtype_bytes=2, seed=0)
    token = 7168 * 2
    assert (d % token == 0).all() and not np.diag(d).any()
    assert (d <= 64 * token).all()  # a token goes at most once to each rank
    assert (d.sum(axis=1) >= 64 * token).all()  # each token hits at least one other rank (8 of 256 experts)


def test_file_loading_and_shape_check(tmp_path):
    m = w.uniform(4, 300)
    np.save(tmp_path / "d.npy", m)
    (tmp_path / "d.json").write_text(json.dumps(m.tolist()))
    np.savetxt(tmp_path / "d.csv", m, delimiter=",")
    from pipelines.file_checks import read_array

    for f in ("d.npy", "d.json", "d.csv"):
        assert (w.demand_matrix(read_array(tmp_path / f, "workload.path"), 4) == m).all()
    with pytest.raises(SpecError, match="shape"):
        w.demand_matrix(read_array(tmp_path / "d.npy", "workload.path"), 5)
    with pytest.raises(SpecError, match="does not exist"):
        read_array(tmp_path / "nope.npy", "workload.path")
    with pytest.raises(SpecError, match="non-negative"):
        w.demand_matrix(-m, 4)


def test_negative_skew_is_rejected():
    with pytest.raises(SpecError, match="skew"):
        w.zipf(4, 100, -0.5, 0)
