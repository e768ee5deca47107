"""New SQLite MLflow stores start from the schema template (pipelines/mlflow_schema.py)."""

from __future__ import annotations

import sqlite3

import pytest

pytest.importorskip("mlflow")

from pipelines import mlflow_schema  # noqa: E402
from pipelines.tracking import Tracker  # noqa: E402


def _contents(db):
    con = sqlite3.connect(db)
    try:
        tables = sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'"))
        experiments = con.execute("SELECT experiment_id, name, artifact_location, lifecycle_stage FROM experiments "
                                  "ORDER BY experiment_id").fetchall()
        return tables, con.execute("SELECT * FROM alembic_version").fetchall(), experiments
    finally:
        con.close()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(mlflow_schema.ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_seeded_store_equals_one_made_by_the_migrations(tmp_path, cache, monkeypatch):
    import mlflow
    import mlflow.store.db.utils as db_utils

    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    Tracker(uri=f"sqlite:///{tmp_path}/a/mlflow.db", experiment="gxnet")
    template = mlflow_schema.template_path(mlflow.__version__)
    assert template.is_file() and _contents(template)[2] == []  # kept, without the Default experiment

    monkeypatch.setattr(db_utils, "_initialize_tables", lambda engine: pytest.fail("migrations ran"))
    monkeypatch.chdir(tmp_path / "b")
    tracker = Tracker(uri=f"sqlite:///{tmp_path}/b/mlflow.db", experiment="gxnet")
    tables_a, rev_a, exps_a = _contents(tmp_path / "a" / "mlflow.db")
    tables_b, rev_b, exps_b = _contents(tmp_path / "b" / "mlflow.db")
    assert (tables_a, rev_a) == (tables_b, rev_b)
    # the same experiments, each with its own store's artifact folder
    assert [e[:2] for e in exps_a] == [e[:2] for e in exps_b] == [(0, "Default"), (1, "gxnet")]
    assert all(e[2].startswith(str(tmp_path / "b")) for e in exps_b)
    run = tracker.client.create_run(tracker.experiment_id)
    tracker.client.set_terminated(run.info.run_id, "FINISHED")
    assert tracker.client.get_run(run.info.run_id).info.status == "FINISHED"


def test_a_damaged_template_is_replaced(tmp_path, cache, monkeypatch):
    import mlflow

    template = mlflow_schema.template_path(mlflow.__version__)
    template.parent.mkdir(parents=True)
    template.write_bytes(b"not a database" * 100)
    monkeypatch.chdir(tmp_path)
    tracker = Tracker(uri=f"sqlite:///{tmp_path}/mlflow.db", experiment="gxnet")
    assert tracker.experiment_id == "1"
    assert _contents(template)[2] == []  # a good template again


def test_templates_off(tmp_path, monkeypatch):
    monkeypatch.setenv(mlflow_schema.ENV, "off")
    assert mlflow_schema.template_path("3.0") is None
    assert not mlflow_schema.seed_new_store(tmp_path / "x.db", None)
