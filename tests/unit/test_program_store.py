"""Compiled decode programs kept as plain data (gxnet/compile.py) and on disk
(pipelines/program_store.py): a stored program evaluates to the same values, bit for bit, as
the compiled one; a later process loads it instead of compiling; records for other specs,
damaged records and functions that read more than ``math`` are never used; results files are
byte-identical with or without the store."""

import json
import random

import pytest

import gxnet.compile as gc
from gxnet.compile import attach_program_store, compiled_program, program_from_record, program_record
from gxnet.precision import PrecisionSpec
from gxnet.testing import accelerator, model
from pipelines.program_store import ProgramStore, attach_default_program_store, compiler_fingerprint

FAMILY = (model("gpt_oss_120b"), "helix", PrecisionSpec(), accelerator("b200"), "decode")


def _args(rng: random.Random) -> tuple:
    pick = rng.choice
    return (pick([1, 2, 3, 16, 256]), pick([1, 4096, 131072, 5_000_000]), pick([1, 2, 4]), pick([1, 2, 4, 8]),
            pick([1, 2, 8, 32]), pick([1, 2, 4]), pick([1, 2, 4, 32]), pick([1, 3, 17]), pick([1, 5, 96]))


def _same_program(a, b) -> None:
    assert (a.sections, a.weights_index, a.kv_index, a.family) == (b.sections, b.weights_index, b.kv_index, b.family)
    rng = random.Random(7)
    for _ in range(300):
        args = _args(rng)
        va, vb = a.evaluate(*args), b.evaluate(*args)
        assert va == vb and [type(x) for x in va] == [type(x) for x in vb], args


@pytest.fixture
def fresh():
    previous = attach_program_store(None)
    compiled_program.cache_clear()
    yield
    attach_program_store(previous)
    compiled_program.cache_clear()


def test_record_round_trip_evaluates_bit_for_bit(fresh):
    prog = compiled_program(*FAMILY)
    record = json.loads(json.dumps(program_record(prog, repr(FAMILY))))
    back = program_from_record(record, repr(FAMILY), FAMILY)
    assert back is not None and back.evaluate is not prog.evaluate
    _same_program(back, prog)
    assert back.graph is prog.graph  # the symbolic graph is rebuilt only on demand, and shared


def test_a_later_process_loads_instead_of_compiling(fresh, tmp_path, monkeypatch):
    compiles = []
    real = gc._compile
    monkeypatch.setattr(gc, "_compile", lambda family: compiles.append(family) or real(family))
    first = ProgramStore(tmp_path, code="t")
    attach_program_store(first)
    prog = compiled_program(*FAMILY)
    assert len(compiles) == 1 and first.stats() == {"hits": 0, "misses": 1, "writes": 1}
    compiled_program.cache_clear()  # another process: nothing in memory, the same folder
    second = ProgramStore(tmp_path, code="t")
    attach_program_store(second)
    _same_program(compiled_program(*FAMILY), prog)
    assert len(compiles) == 1 and second.hits == 1


def test_other_specs_and_damaged_records_are_compiled_again(fresh, tmp_path):
    prog = compiled_program(*FAMILY)
    good = program_record(prog, repr(FAMILY))
    other = (model("gpt_oss_20b"), *FAMILY[1:])
    assert program_from_record(good, repr(other), other) is None  # a hash collision or a moved file
    for damage in ({**good, "format": 99}, {**good, "source": "def f(:"}, {**good, "source": "x = 1"},
                   {**good, "sections": [{"name": "s"}]}, {**good, "symbols": ["B"]}, None, [], "text",
                   {**good, "source": good["source"].replace("ceil(", "open(", 1)}):  # reads more than math
        assert program_from_record(damage, repr(FAMILY), FAMILY) is None
    store = ProgramStore(tmp_path, code="t")
    attach_program_store(store)
    compiled_program.cache_clear()
    compiled_program(*FAMILY)
    path = next(tmp_path.rglob("*.json"))
    path.write_text("{not json")
    compiled_program.cache_clear()
    _same_program(compiled_program(*FAMILY), prog)
    assert json.loads(path.read_text())["spec"] == repr(FAMILY)  # rewritten whole
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_function_reading_other_globals_is_not_kept(fresh):
    prog = compiled_program(*FAMILY)
    namespace = {"scale": 2.0}
    exec("def _lambdifygenerated(*a):\n    return [scale * x for x in a]\n", namespace)
    odd = gc.CompiledProgram(family=FAMILY, sections=prog.sections, weights_index=prog.weights_index,
                             kv_index=prog.kv_index, evaluate=namespace["_lambdifygenerated"])
    assert program_record(odd, repr(FAMILY)) is None


def test_code_versions_use_other_folders_and_the_env_switches_it_off(tmp_path, monkeypatch):
    assert ProgramStore(tmp_path, code="a").path("ab12") != ProgramStore(tmp_path, code="b").path("ab12")
    assert compiler_fingerprint().count("-") == 2  # source, SymPy, Python
    previous = attach_program_store(None)
    try:
        monkeypatch.setenv("GX_PROGRAM_STORE", "off")
        assert attach_default_program_store() is None
        monkeypatch.setenv("GX_PROGRAM_STORE", str(tmp_path))
        store = attach_default_program_store()
        assert store.root.parent == tmp_path and attach_default_program_store() is store  # kept once attached
    finally:
        attach_program_store(previous)


def test_results_are_byte_identical_with_the_store(pipeline, tmp_path, monkeypatch):
    monkeypatch.setenv("GX_PROGRAM_STORE", str(tmp_path / "programs"))
    runs = []
    for store in ("off", str(tmp_path / "programs"), str(tmp_path / "programs")):  # none, written, read
        monkeypatch.setenv("GX_PROGRAM_STORE", store)
        compiled_program.cache_clear()  # the forked run compiles or loads, as a fresh process would
        proc, out = pipeline("decode", "tracking.enabled=false")
        assert proc.returncode == 0, proc.stderr
        runs.append((out / "results.json").read_bytes())
    assert runs[0] == runs[1] == runs[2]
    assert len(list((tmp_path / "programs").rglob("*.json"))) == 1
