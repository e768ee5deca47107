"""A sweep's rows written without MLflow (pipelines/mlflow_direct.py) are the rows MLflow writes."""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mlflow")

from pipelines import mlflow_direct, mlflow_schema  # noqa: E402
from pipelines.tracking import Tracker  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TABLES = ("experiments", "experiment_tags", "runs", "tags", "params", "metrics", "latest_metrics")


@pytest.fixture(scope="module")
def template_cache(tmp_path_factory):
    """A schema template of the installed MLflow, made once the usual way."""
    cache = tmp_path_factory.mktemp("schema-cache")
    where = tmp_path_factory.mktemp("first-store")
    old, os.environ[mlflow_schema.ENV] = os.environ.get(mlflow_schema.ENV), str(cache)
    cwd = os.getcwd()
    try:
        os.chdir(where)
        Tracker(uri=f"sqlite:///{where}/mlflow.db", experiment="first").close()
    finally:
        os.chdir(cwd)
        if old is None:
            os.environ.pop(mlflow_schema.ENV)
        else:
            os.environ[mlflow_schema.ENV] = old
    return cache


@pytest.fixture
def cache(template_cache, monkeypatch):
    monkeypatch.setenv(mlflow_schema.ENV, str(template_cache))
    return template_cache


def _job(folder: Path, results: dict) -> Path:
    (folder / "sub").mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(results))
    (folder / "sub" / "note.txt").write_text("a file one level down")
    return folder


def _sweep(where: Path, direct: bool, monkeypatch) -> Tracker:
    """One sweep's logging as the sweep pipeline drives it, then a rerun of it by a second driver."""
    monkeypatch.chdir(where)
    uri = f"sqlite:///{where}/mlflow.db"
    for rerun in (False, True):
        tracker = Tracker(uri=uri, experiment="gxnet", report=False, direct=direct)
        assert tracker.writer == ("direct" if direct else "mlflow")
        parent = tracker.resume_sweep("s" * 16, "figure", "search", swept={"hw.link": "100,200", "x": ""},
                                      n_points=4, sweep_dir=where)
        existing = tracker.children(parent)
        assert bool(existing) == rerun
        params = {"hw": {"link": 100, "none": None}, "model": {"name": "m/x", "layers": 80}, "long": "v" * 700}
        results = {"decode": {"tpot_s": 0.0123, "energy": {"j": 4.5}}, "nan": math.nan, "inf": -math.inf,
                   "flag": True, "name": "text"}
        job = _job(where / f"job0-{rerun}", results)
        tracker.log_point(parent, pipeline="search", cfg_hash="h0", name="p0", params=params, results=results,
                          artifact_dir=job, out_dir=job, wall_s=0.25)
        tracker.log_point(parent, pipeline="search", cfg_hash="h0", name="p0", params=params, results=results)
        tracker.log_point(parent, pipeline="search", cfg_hash="h1", name="p1", params={"hw": {"link": 200}},
                          results=None, error="ValueError: link rate 200 exceeds the port (x)" * 3)
        if not rerun:
            tracker.log_point(parent, pipeline="search", cfg_hash="h2", name="p2", params={"a": 1}, results={"y": 2})
            solo = _job(where / "solo", {"y": 3})  # a single run (no parent), as `gx decode` without -m logs it
            assert not tracker.single_run_logged("solo")
            tracker.log_point(None, pipeline="decode", cfg_hash="solo", name="decode", params={"a": 2},
                              results={"y": 3}, artifact_dir=solo, out_dir=solo)
            assert tracker.single_run_logged("solo")
            table = where / "sweep_results.csv"
            table.write_text("a,y\n1,2\n")
            tracker.log_table(parent, table, 4)
        else:
            tracker.remove_unfinished(existing.get("h1"))
            tracker.remove_children_except(parent, {"h0", "h1"})
        tracker.finish_parent(parent, {"done": 2, "failed": 1})
        assert tracker.down is None
        tracker.close()
        if not rerun:  # deleted meanwhile (its runs with it): the rerun restores the experiment and its runs
            from mlflow.tracking import MlflowClient

            MlflowClient(tracking_uri=uri).delete_experiment(tracker.experiment_id)
    return tracker


def _run_labels(con: sqlite3.Connection) -> dict[str, str]:
    """Run id -> ``<run{i}>`` by creation order (the same in both stores)."""
    return {rid: f"<run{i}>" for i, (rid,) in enumerate(con.execute("SELECT run_uuid FROM runs ORDER BY rowid"))}


def _normal(db: Path, root: Path) -> dict:
    """The tables' rows with run ids named by creation order and times, and the folder, masked."""
    con = sqlite3.connect(db)
    try:
        ids = _run_labels(con)

        def cell(value):
            if isinstance(value, int) and value > 10**12:
                return "<time>"
            if isinstance(value, str):
                value = value.replace(str(root), "<root>")
                return re.sub(r"[0-9a-f]{32}", lambda m: ids.get(m.group(0), m.group(0)), value)
            return value

        return {t: sorted((tuple(cell(v) for v in row) for row in con.execute(f"SELECT * FROM {t}")), key=repr)
                for t in TABLES}
    finally:
        con.close()


def _files(root: Path, db: Path) -> dict:
    con = sqlite3.connect(db)
    ids = _run_labels(con)
    con.close()
    out = {}
    for path in sorted((root / "mlruns").rglob("*")):
        if path.is_file():
            rel = re.sub(r"[0-9a-f]{32}", lambda m: ids[m.group(0)], path.relative_to(root).as_posix())
            text = path.read_text()
            out[rel] = text if path.name != "tracking.json" else json.loads(text)["cfg_hash"]
    return out


def test_direct_rows_and_artifacts_are_mlflows(tmp_path, cache, monkeypatch):
    (tmp_path / "mlflow").mkdir(), (tmp_path / "direct").mkdir()
    _sweep(tmp_path / "mlflow", False, monkeypatch)
    _sweep(tmp_path / "direct", True, monkeypatch)
    by_mlflow = _normal(tmp_path / "mlflow" / "mlflow.db", tmp_path / "mlflow")
    direct = _normal(tmp_path / "direct" / "mlflow.db", tmp_path / "direct")
    for table in TABLES:
        assert direct[table] == by_mlflow[table], table
    # the parent, p0 once, p1 failed in each driver run, p2 (removed from the top k), the single run
    assert len(by_mlflow["runs"]) == 6 and len(by_mlflow["metrics"]) > 10
    assert _files(tmp_path / "direct", tmp_path / "direct" / "mlflow.db") == \
        _files(tmp_path / "mlflow", tmp_path / "mlflow" / "mlflow.db")


def test_mlflow_reads_what_was_written_directly(tmp_path, cache, monkeypatch):
    from mlflow.tracking import MlflowClient

    _sweep(tmp_path, True, monkeypatch)
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("gxnet")
    parent = client.search_runs([exp.experiment_id], "tags.`gx.sweep_hash` = 'ssssssssssssssss'")[0]
    assert (parent.data.metrics["sweep.done"], parent.data.metrics["sweep.failed"]) == (1, 1)
    assert parent.info.status == "FINISHED"
    kids = client.search_runs([exp.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert sorted(k.info.run_name for k in kids) == ["p0", "p1"]
    p0 = next(k for k in kids if k.info.run_name == "p0")
    assert p0.data.params["model.layers"] == "80" and p0.data.metrics["decode.tpot_s"] == 0.0123
    assert math.isnan(p0.data.metrics["nan"]) and p0.data.metrics["inf"] == -1.7976931348623157e308
    assert {f.path for f in client.list_artifacts(p0.info.run_id)} >= {"results.json", "sub"}
    assert [f.path for f in client.list_artifacts(parent.info.run_id)] == ["sweep_results.csv"]


def test_a_sweeps_tracker_never_imports_mlflow(tmp_path, cache):
    script = ("import os, sys; from pipelines.tracking import Tracker; "
              f"t = Tracker(uri='sqlite:///{tmp_path}/mlflow.db', experiment='gxnet', direct=True); "
              "p = t.resume_sweep('h', 'n', 'search', swept={}, n_points=1, sweep_dir=None); "
              "t.log_point(p, pipeline='search', cfg_hash='c', name='x', params={'a': 1}, results={'y': 1.0}); "
              "t.finish_parent(p, {}); t.close(); "
              "print(t.writer, t.down, sorted(m for m in sys.modules if m.split('.')[0] in ('mlflow', 'sqlalchemy')))")
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{mlflow_schema.ENV: str(cache)})
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["direct", "None", "[]"]


@pytest.mark.parametrize("why", ["revision", "server_root", "no_template", "assessments"])
def test_anything_else_is_written_by_mlflow(tmp_path, cache, monkeypatch, why):
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "mlflow.db"
    if why == "revision":
        Tracker(uri=f"sqlite:///{db}", experiment="gxnet").close()
        con = sqlite3.connect(db)
        con.execute("UPDATE alembic_version SET version_num = 'someotherrev'")
        con.commit(), con.close()
        assert "someotherrev" in mlflow_direct.why_not(db)
        con = sqlite3.connect(db)
        con.execute(f"UPDATE alembic_version SET version_num = '{mlflow_direct.SCHEMA_REVISION}'")
        con.commit(), con.close()
        monkeypatch.setattr(mlflow_direct, "SCHEMA_REVISION", "anewerrevision")
    elif why == "assessments":  # a GenAI assessment (MLflow deletes those naming a run with it)
        Tracker(uri=f"sqlite:///{db}", experiment="gxnet").close()
        con = sqlite3.connect(db)
        con.execute("INSERT INTO assessments (assessment_id, trace_id, name, assessment_type, value, created_timestamp, "
                    "last_updated_timestamp, source_type, valid) VALUES ('a', 't', 'n', 'feedback', '1', 0, 0, 'HUMAN', 1)")
        con.commit(), con.close()
        assert mlflow_direct.why_not(db) == "it holds assessments"
    elif why == "server_root":
        monkeypatch.setenv("_MLFLOW_SERVER_ARTIFACT_ROOT", str(tmp_path / "elsewhere"))
    else:
        monkeypatch.setenv(mlflow_schema.ENV, "off")
    tracker = Tracker(uri=f"sqlite:///{db}", experiment="gxnet", direct=True)
    assert tracker.writer == "mlflow"
    tracker.close()


def test_it_refuses_what_mlflow_refuses(tmp_path, cache, monkeypatch):
    from mlflow.entities import Param as MlflowParam
    from mlflow.exceptions import MlflowException

    monkeypatch.chdir(tmp_path)
    by_mlflow = Tracker(uri=f"sqlite:///{tmp_path}/a.db", experiment="gxnet")
    direct = Tracker(uri=f"sqlite:///{tmp_path}/b.db", experiment="gxnet", direct=True)
    assert direct.writer == "direct"
    bad = [[("a[0]", "x")], [("../up", "x")], [("k" * 251, "x")], [("dup", "1"), ("dup", "2")]]
    for params in bad:
        a = by_mlflow.client.create_run(by_mlflow.experiment_id).info.run_id
        b = direct.client.create_run(direct.experiment_id).info.run_id
        with pytest.raises(MlflowException):
            by_mlflow.client.log_batch(a, params=[MlflowParam(k, v) for k, v in params])
        with pytest.raises(mlflow_direct.DirectStoreError):
            direct.client.log_batch(b, params=[mlflow_direct.Param(k, v) for k, v in params])
    b = direct.client.create_run(direct.experiment_id).info.run_id
    direct.client.log_batch(b, params=[mlflow_direct.Param("p", "1")])
    with pytest.raises(mlflow_direct.DirectStoreError, match="changing param values"):
        direct.client.log_batch(b, params=[mlflow_direct.Param("p", "2")])
    direct.client.delete_run(b)
    with pytest.raises(mlflow_direct.DirectStoreError, match="'active' state"):
        direct.client.set_tag(b, "k", "v")
    by_mlflow.close(), direct.close()


def test_only_the_filters_gxnet_uses_are_read():
    assert mlflow_direct.parse_filter("tags.`gx.config_hash` = 'ab' and attributes.status = 'FINISHED'") == \
        [("tags", "gx.config_hash", "=", "ab"), ("attributes", "status", "=", "FINISHED")]
    assert mlflow_direct.parse_filter("tags.`gx.sweep_hash` != ''") == [("tags", "gx.sweep_hash", "!=", "")]
    for filt in ("metrics.x > 1", "tags.a LIKE 'b'", "attributes.start_time = '1'", "attributes.status != 'x'",
                 "tags.a = 'b' or tags.c = 'd'"):
        with pytest.raises(mlflow_direct.DirectStoreError):
            mlflow_direct.parse_filter(filt)


@pytest.mark.parametrize("direct", [True, False])
def test_the_sweeps_tracking_process_follows_the_setting(tmp_path, cache, monkeypatch, direct):
    from mlflow.tracking import MlflowClient

    from pipelines.tracking_process import TrackerProcess

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/m.db"
    tracker = TrackerProcess({"uri": uri, "experiment": "d", "report": False, "sqlite_direct": direct})
    parent, existing, _ = tracker.open_sweep_state("sweepD", "d", "decode", swept={"batch": "1,2"}, n_points=2,
                                                   sweep_dir=tmp_path / "sweep", hashes=None)
    assert tracker.writer == ("direct" if direct else "mlflow") and existing == {}
    tracker.log_point(parent, pipeline="decode", cfg_hash="c1", name="b1", params={"batch": 1}, results={"t": 1.0})
    tracker.finish_parent(parent, {"done": 1})
    tracker.close()
    assert tracker.proc.returncode == 0 and tracker.down is None
    run = MlflowClient(tracking_uri=uri).get_run(parent)
    assert run.info.status == "FINISHED" and run.data.metrics["sweep.done"] == 1 and run.data.params["batch"] == "1,2"


def test_the_report_reads_the_same_rows_either_way(tmp_path, cache, monkeypatch):
    from pipelines.report import load_rows

    _sweep(tmp_path, True, monkeypatch)
    tracking = {"uri": f"sqlite:///{tmp_path}/mlflow.db", "experiment": "gxnet"}
    read = {direct: load_rows(dict(tracking, sqlite_direct=direct), None, "search") for direct in (True, False)}
    assert json.dumps(read[True], sort_keys=True) == json.dumps(read[False], sort_keys=True)
    sweep, kind, rows = read[True]
    assert kind == "search" and sorted(r["name"] for r in rows) == ["p0", "p1"]
    from collectives.errors import SpecError

    with pytest.raises(SpecError, match="is not a run"):  # an unknown sweep: the same one line either way
        load_rows(dict(tracking, sqlite_direct=True), "0" * 32, None)
