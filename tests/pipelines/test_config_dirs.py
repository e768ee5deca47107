"""A user's own configs outside conf/: --config-dir, --config-path, hydra.searchpath; single
runs and -m sweeps; every group (model, accelerator, fabric, experiment)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
# a deployment small enough for a second: Qwen3-30B-A3B (4 KV heads) on 8 ranks
SMALL = ("tracking=off", "world=8", "parallel.kvp=2", "parallel.tpa=4", "parallel.ep=8", "parallel.tpe=1",
         "fabric=single_eps", "context=32K")


@pytest.fixture()
def user_conf(tmp_path: Path) -> Path:
    """tmp/conf with model/my_model.yaml (Qwen3-30B-A3B renamed) and friends."""
    conf = tmp_path / "conf"
    for group, source, name in (("model", "qwen3_30b_a3b", "my_model"), ("accelerator", "h100", "my_gpu"),
                                ("fabric", "single_eps", "my_fabric")):
        data = yaml.safe_load((ROOT / "conf" / group / f"{source}.yaml").read_text())
        data["name"] = name if group != "fabric" else data["name"]  # a fabric's name is its kind
        (conf / group).mkdir(parents=True)
        (conf / group / f"{name}.yaml").write_text(yaml.safe_dump(data))
    (conf / "experiment").mkdir()
    (conf / "experiment" / "my_sweep.yaml").write_text(
        "# @package _global_\nhydra:\n  sweeper:\n    params:\n      batch: 1,2\n")
    return conf


def gx(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), GX_TRACKING="false")
    return subprocess.run([sys.executable, "-m", "pipelines.decode", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240)


def ways(conf: Path) -> dict[str, tuple[str, ...]]:
    return {
        "config-dir": ("--config-dir", "conf"),  # relative to the working directory
        "config-path": (f"--config-path={conf}",),
        "searchpath": (f"hydra.searchpath=[file://{conf}]",),
    }


@pytest.mark.parametrize("way", ["config-dir", "config-path", "searchpath"])
def test_a_model_in_a_user_dir_runs(user_conf, way):
    tmp = user_conf.parent
    single = gx(tmp, *ways(user_conf)[way], "model=my_model", *SMALL, "hydra.run.dir=single")
    assert single.returncode == 0, single.stderr[-3000:]
    assert json.loads((tmp / "single" / "results.json").read_text())["model"] == "my_model"


@pytest.mark.parametrize("way", ["config-dir", pytest.param("config-path", marks=pytest.mark.slow),
                                 pytest.param("searchpath", marks=pytest.mark.slow)])
def test_a_model_in_a_user_dir_sweeps(user_conf, way):
    tmp = user_conf.parent
    sweep = gx(tmp, "-m", *ways(user_conf)[way], "model=my_model", *SMALL, "batch=1,2", "ray.enabled=false",
               "hydra.sweep.dir=multi")
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    results = [json.loads((tmp / "multi" / str(i) / "results.json").read_text()) for i in range(2)]
    assert [r["model"] for r in results] == ["my_model"] * 2
    assert sorted(r["batch"] for r in results) == [1, 2]


def test_every_group_from_a_user_dir_and_a_typo_there_names_the_user_option(user_conf):
    tmp = user_conf.parent
    proc = gx(tmp, "--config-dir", str(user_conf), "model=my_model", "accelerator=my_gpu", *SMALL,
              "fabric=my_fabric", "hydra.run.dir=single")
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((tmp / "single" / "results.json").read_text())
    assert res["model"] == "my_model" and res["accelerator"] == "my_gpu"
    typo = gx(tmp, "--config-dir", str(user_conf), "model=my_modl", *SMALL)
    assert typo.returncode == 2 and "did you mean 'my_model'" in typo.stderr, typo.stderr
    assert len(typo.stderr.strip().splitlines()) == 1


def test_an_experiment_in_a_user_dir_sweeps(user_conf):
    tmp = user_conf.parent
    proc = gx(tmp, "-m", "--config-dir", str(user_conf), "experiment=my_sweep", "model=my_model", *SMALL,
              "ray.enabled=false", "hydra.sweep.dir=multi")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(json.loads((tmp / "multi" / str(i) / "results.json").read_text())["batch"] for i in range(2)) == [1, 2]
