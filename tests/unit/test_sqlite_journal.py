"""Local SQLite MLflow stores log in WAL mode (pipelines/sqlite_journal.py)."""

from __future__ import annotations

import sqlite3

import pytest

from pipelines import sqlite_journal

MOUNTS = """/dev/vda / ext4 rw,relatime 0 0
proc /proc proc rw 0 0
server:/export /mnt/shared nfs4 rw,vers=4.2 0 0
/dev/vdb /mnt/shared/local\\040disk xfs rw 0 0
"""


@pytest.fixture
def mounts(tmp_path):
    path = tmp_path / "mounts"
    path.write_text(MOUNTS)
    return str(path)


def test_the_filesystem_is_the_longest_mount_point(mounts):
    assert sqlite_journal.filesystem_type("/home/me/mlflow.db", mounts) == "ext4"
    assert sqlite_journal.filesystem_type("/mnt/shared/runs/mlflow.db", mounts) == "nfs4"
    assert sqlite_journal.filesystem_type("/mnt/shared/local disk/mlflow.db", mounts) == "xfs"
    assert sqlite_journal.filesystem_type("/mnt/sharedx/mlflow.db", mounts) == "ext4"  # a prefix, not a folder
    assert sqlite_journal.filesystem_type("/x", "/no/such/mounts") is None


def test_wal_only_on_a_local_filesystem_it_can_tell(tmp_path, mounts):
    from pathlib import Path

    assert sqlite_journal.wal_allowed(Path("/home/me/mlflow.db"), mounts)
    assert not sqlite_journal.wal_allowed(Path("/mnt/shared/runs/mlflow.db"), mounts)
    assert not sqlite_journal.wal_allowed(Path("/home/me/mlflow.db"), "/no/such/mounts")


def _mode(db) -> tuple[str, int]:
    con = sqlite3.connect(db)
    try:
        return con.execute("PRAGMA journal_mode").fetchone()[0], con.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        con.close()


def test_connections_to_a_chosen_database_switch_to_wal_others_do_not(tmp_path):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    chosen, other = tmp_path / "chosen.db", tmp_path / "other.db"
    assert sqlite_journal.use_wal(chosen)
    for db in (chosen, other):
        engine = sqlalchemy.create_engine(f"sqlite:///{db}")
        with engine.connect() as con:
            con.exec_driver_sql("CREATE TABLE t (a TEXT)")
            con.exec_driver_sql("INSERT INTO t VALUES ('x')")
            con.commit()
            synchronous = con.exec_driver_sql("PRAGMA synchronous").scalar()
        assert synchronous == (1 if db == chosen else 2)  # NORMAL on the chosen one, FULL (SQLite's default) else
        engine.dispose()
    assert _mode(chosen)[0] == "wal" and _mode(other)[0] == "delete"


def test_a_checkpoint_leaves_the_database_whole_in_one_file(tmp_path):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    db = tmp_path / "m.db"
    sqlite_journal.use_wal(db)
    engine = sqlalchemy.create_engine(f"sqlite:///{db}")
    con = engine.connect()
    con.exec_driver_sql("CREATE TABLE t (a TEXT)")
    for i in range(50):
        con.exec_driver_sql(f"INSERT INTO t VALUES ('{i}')")
    con.commit()
    wal = tmp_path / "m.db-wal"
    assert wal.stat().st_size > 0  # the commits are in the log, not yet in the database
    sqlite_journal.checkpoint(db)
    assert wal.stat().st_size == 0
    con.close()
    engine.dispose()
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())  # the database file alone holds every row
    plain = sqlite3.connect(copy)
    assert plain.execute("SELECT count(*) FROM t").fetchone()[0] == 50
    plain.close()


def test_a_tracker_logs_in_wal_mode_and_the_template_stays_one_plain_file(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    import mlflow

    from pipelines import mlflow_schema
    from pipelines.tracking import Tracker

    monkeypatch.setenv(mlflow_schema.ENV, str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    tracker = Tracker(uri=f"sqlite:///{tmp_path}/a.db", experiment="gxnet")
    run = tracker.client.create_run(tracker.experiment_id)
    tracker.client.set_terminated(run.info.run_id, "FINISHED")
    tracker.close()
    assert _mode(tmp_path / "a.db")[0] == "wal"
    template = mlflow_schema.template_path(mlflow.__version__)
    assert _mode(template)[0] == "delete" and not template.with_name(template.name + "-wal").exists()
    off = Tracker(uri=f"sqlite:///{tmp_path}/b.db", experiment="gxnet", sqlite_wal=False)  # seeded from it
    off.close()
    assert _mode(tmp_path / "b.db")[0] == "delete"


@pytest.mark.parametrize("wal", [True, False])
def test_the_sweeps_tracking_process_follows_the_setting_and_checkpoints_at_close(tmp_path, monkeypatch, wal):
    pytest.importorskip("mlflow")
    from pipelines.tracking_process import TrackerProcess

    monkeypatch.chdir(tmp_path)
    db = tmp_path / "m.db"
    tracker = TrackerProcess({"uri": f"sqlite:///{db}", "experiment": "wal", "report": False, "sqlite_wal": wal})
    parent, existing, _ = tracker.open_sweep_state("sweepW", "w", "decode", swept={"batch": "1"}, n_points=1,
                                                   sweep_dir=tmp_path / "sweep", hashes=None)
    tracker.finish_parent(parent, {"done": 0})
    tracker.close()
    assert tracker.proc.returncode == 0 and existing == {}
    log = tmp_path / "m.db-wal"  # looked at before any other connection opens (and checkpoints) it
    assert not log.exists() or (wal and log.stat().st_size == 0)  # every commit is in the database file
    assert _mode(db)[0] == ("wal" if wal else "delete")


def test_a_checkpoint_of_a_database_deleted_meanwhile_makes_none(tmp_path):
    db = tmp_path / "gone.db"
    sqlite3.connect(db).close()
    sqlite_journal.use_wal(db)
    db.unlink()
    sqlite_journal.checkpoint(db)
    assert not db.exists()
