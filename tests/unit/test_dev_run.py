"""``python3 dev.py run`` reports the sweep it ran (its parent run, from the sweep's sweep.json),
not the newest sweep in the store, into an emptied outputs/report."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import dev  # noqa: E402

FAKE_GX = """#!/bin/sh
echo "$@" >> "{log}"
if [ "$1" = decode ]; then
  for a in "$@"; do case "$a" in hydra.sweep.dir=*) d="${{a#hydra.sweep.dir=}}";; esac; done
  mkdir -p "$d" && printf '{{"parent_run_id": "run-of-this-sweep", "tracking_uri": "sqlite:///x.db", "experiment": "gxnet"}}' > "$d/sweep.json"
  exit {sweep_rc}
fi
"""


def fake_root(tmp_path: Path, monkeypatch, sweep_rc: int = 0) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gx = bin_dir / "gx"
    gx.write_text(FAKE_GX.format(log=tmp_path / "calls.txt", sweep_rc=sweep_rc))
    gx.chmod(0o755)
    monkeypatch.setattr(dev, "ROOT", tmp_path)
    monkeypatch.setattr(dev, "BIN", bin_dir)
    stale = tmp_path / "outputs" / "report"
    stale.mkdir(parents=True)
    (stale / "scaling.png").write_text("a figure of another sweep")
    return tmp_path


def test_dev_run_reports_its_own_sweep_and_clears_stale_figures(tmp_path, monkeypatch):
    root = fake_root(tmp_path, monkeypatch)
    assert dev.run_main_job(["batch=1"]) == 0
    sweep_call, report_call = (root / "calls.txt").read_text().splitlines()
    assert sweep_call.startswith("decode -m experiment=fabric_comparison batch=1 hydra.sweep.dir=outputs/sweeps/")
    assert report_call.split()[:2] == ["report", "sweep=run-of-this-sweep"]
    assert "tracking.uri='sqlite:///x.db'" in report_call
    assert not (root / "outputs" / "report" / "scaling.png").exists()


def test_dev_run_still_reports_when_some_points_failed_and_exits_1(tmp_path, monkeypatch):
    root = fake_root(tmp_path, monkeypatch, sweep_rc=1)
    assert dev.run_main_job([f"hydra.sweep.dir={tmp_path / 's'}"]) == 1
    assert json.loads((tmp_path / "s" / "sweep.json").read_text())["parent_run_id"] == "run-of-this-sweep"
    assert len((root / "calls.txt").read_text().splitlines()) == 2
