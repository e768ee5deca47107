"""A single run composes its config twice (the precheck, then Hydra's run), not three times:
Hydra's own composition only to read ``hydra.mode`` takes the precheck's value instead
(``pipelines.app.known_hydra_mode``), and only where that value is certain to be Hydra's."""

import json
from pathlib import Path

import pytest
from forked import run_forked
from hydra._internal.hydra import Hydra
from hydra.types import RunMode

import pipelines.decode as decode
from pipelines.app import known_hydra_mode

ROOT = Path(__file__).resolve().parents[2]


def _counted_decode() -> None:
    """In the forked child: ``gx decode`` with every composition counted (printed last)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    real, calls = ConfigLoaderImpl.load_configuration, []

    def counted(self, config_name, overrides, run_mode, *args, **kwargs):
        calls.append([str(run_mode), list(overrides)])
        return real(self, config_name, overrides, run_mode, *args, **kwargs)

    ConfigLoaderImpl.load_configuration = counted
    try:
        decode.main()
    finally:
        print(json.dumps(calls))


def test_a_single_run_composes_twice_and_runs_as_before(tmp_path):
    out = tmp_path / "run"
    proc, _ = run_forked(_counted_decode, ["gx decode", "batch=2", f"hydra.run.dir={out}"], cwd=tmp_path,
                         env={"GX_TRACKING": "false"}, timeout_s=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    calls = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [c[0] for c in calls] == ["RunMode.RUN", "RunMode.RUN"], calls  # no MULTIRUN probe
    assert calls[1][1] == ["batch=2", f"hydra.run.dir={out}", "hydra.mode=RUN"]
    assert json.loads((out / "results.json").read_text())["batch"] == 2
    assert "mode: RUN" in (out / ".hydra" / "hydra.yaml").read_text()


@pytest.mark.parametrize("composed, argv", [
    (None, []),  # nothing composed (an info flag, a malformed flag)
    ({"model": {}}, []),  # no Hydra node
    ({"hydra": {"mode": "${oc.env:MODE}"}}, []),  # an interpolation only Hydra resolves
    ({"hydra": {"mode": None}}, ["-m", "batch=1,2"]),  # a sweep: the precheck composed its first variant
    ({"hydra": {"mode": None}}, ["--multirun", "batch=1,2"]),
    ({"hydra": {"mode": RunMode.RUN}}, ["hydra.mode=MULTIRUN"]),  # an override names the mode
])
def test_hydra_composes_for_its_mode_where_the_precheck_cannot_say(composed, argv):
    real = Hydra.get_mode
    with known_hydra_mode(composed, argv):
        assert Hydra.get_mode is real


@pytest.mark.parametrize("mode", [None, RunMode.RUN, RunMode.MULTIRUN])
def test_the_precheck_mode_stands_in_and_hydra_gets_its_own_back(mode):
    real = Hydra.get_mode
    with pytest.raises(KeyError):
        with known_hydra_mode({"hydra": {"mode": mode}}, ["batch=2"]):
            assert Hydra.get_mode is not real
            assert Hydra.get_mode(object(), "decode", ["batch=2"]) is mode
            raise KeyError("the run failed")
    assert Hydra.get_mode is real
