"""Simlette's compiled port loop gives what the Python loop gives, bit for bit, and is chosen right.

The reference cases of ``simlette_reference_cases.py`` (unlimited and finite buffers, write
responses, every fabric kind, both modes) run through both loops: every output (completion times,
schedule, last credit return, each used link's bytes, busy and credit-stall time as an exact
digest) and the event count must be equal, and both must equal the recorded reference. The
default suite runs the cases ``test_simlette_reference.py`` runs by default; the rest are slow.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from simlette_reference_cases import DATA, cases, multi_call_outputs, outputs  # noqa: E402

from fabrics.network.simlette.compiled import CORE, CompiledEngine, make_engine  # noqa: E402
from fabrics.network.simlette.engine import Engine  # noqa: E402
from pipelines.network import simlette_from_config  # noqa: E402

REFERENCE = json.loads(DATA.read_text())
BUILT = CORE.load() is not None
needs_build = pytest.mark.skipif(not BUILT, reason="the compiled Simlette loop is not built")


def _both(run):
    """run() with the compiled loop, then with the Python loop."""
    compiled = run()
    previous = CORE.use(False)
    try:
        python = run()
    finally:
        CORE.use(previous)
    return compiled, python


def _equal(got: dict, want: dict) -> None:
    for key in want:
        if key != "events":
            assert got[key] == want[key], key


@needs_build
@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"], marks=[pytest.mark.slow] if c["slow"] else [])
                                  for c in cases()])
def test_both_loops_give_the_reference_and_the_same_events(case):
    compiled, python = _both(lambda: outputs(case))
    _equal(compiled, REFERENCE[case["name"]])
    _equal(python, REFERENCE[case["name"]])
    assert compiled["events"] == python["events"]


@needs_build
@pytest.mark.parametrize("mode", ["optimized", "flit"])
@pytest.mark.parametrize("buffer_bytes", [None, 2048])
def test_concurrent_calls_that_stop_the_loop_midway_agree(mode, buffer_bytes):
    # three calls on one engine: each completion stops the run inside a callback, the next run
    # resumes where it stopped; write responses arrive after their calls end
    compiled, python = _both(lambda: multi_call_outputs(mode, buffer_bytes))
    assert compiled == python


def _net(buffer_bytes=None, mode="optimized"):
    fab = {"kind": "single_eps", "ports": 4, "link_rate_Bps": 5e10, "accelerators": 8}
    return simlette_from_config(fab, {"mode": mode, "buffer_bytes": buffer_bytes})


@needs_build
@pytest.mark.parametrize("buffer_bytes", [None, 4096])
def test_the_compiled_loop_runs_where_it_is_built(buffer_bytes):
    net = _net(buffer_bytes=buffer_bytes)
    assert isinstance(make_engine(net.fabric, net.params), CompiledEngine)


@needs_build
def test_switched_off_the_python_loop_runs_and_the_report_says_which():
    from fabrics.network.simlette.build import simulate_collective

    assert simulate_collective(_net(), "allreduce", 4096)["simlette"]["engine"] == "compiled"
    previous = CORE.use(False)
    try:
        net = _net()
        assert type(make_engine(net.fabric, net.params)) is Engine
        assert simulate_collective(net, "allreduce", 4096)["simlette"]["engine"] == "python"
    finally:
        CORE.use(previous)


@needs_build
def test_the_core_refuses_malformed_input():
    net = _net()
    n = net.fabric.n_links
    after, ret = list(net.fabric.after_s), list(net.fabric.credit_return_s)
    core = CORE.load().Core(n, [1e-9] * n, after, False, 640, -1, 1, ret)
    with pytest.raises(ValueError, match="values for"):
        CORE.load().Core(n, [1e-9] * (n - 1), after, False, 640, -1, 1, ret)
    with pytest.raises(ValueError, match="chunk_flits"):
        CORE.load().Core(n, [1e-9] * n, after, False, 640, 4, 0, ret)
    with pytest.raises(TypeError, match="share is"):
        core.enqueue_all(0.0, 0.0, 640, [(640, 1)], [(0,)], 0)
    with pytest.raises(ValueError, match="not one of the"):
        core.enqueue_all(0.0, 0.0, 640, [(640, 1, 640)], [(n,)], 0)
    with pytest.raises(ValueError, match="channel"):
        core.enqueue_all(0.0, 0.0, 640, [(640, 1, 640)], [(0,)], 2)
    with pytest.raises(ValueError, match="callback ids"):
        core.at(0.0, 0, False)
    assert core.run()[0] == 0 and not core.pending()  # nothing was queued by the refused calls
