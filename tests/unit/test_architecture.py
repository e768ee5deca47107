"""The house rules as tests: imports one way, no file-level import cycles, small functions."""

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("collectives", "fabrics", "gxnet", "pipelines")
# what each room may import from the project (pipelines -> gxnet -> fabrics -> collectives)
ALLOWED = {"collectives": {"collectives"}, "fabrics": {"fabrics", "collectives"},
           "gxnet": {"gxnet", "fabrics", "collectives"}, "pipelines": set(ROOMS) | {"hydra_plugins"}}
SIDE_EFFECT_LIBS = {"hydra", "omegaconf", "ray", "mlflow", "torch"}
MAX_FUNCTION_LINES = 120
LONG_FUNCTIONS: set[str] = set()  # "room/file.py:function" kept on purpose (none today)


def modules(room: str) -> dict[str, Path]:
    out = {}
    for path in (ROOT / room).rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imported(path: Path, package: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names |= {base} | {f"{base}.{a.name}" for a in node.names}
    return names


@pytest.mark.parametrize("room", ROOMS)
def test_imports_point_one_way_and_side_effect_libraries_stay_in_pipelines(room):
    for mod, path in modules(room).items():
        for name in imported(path, mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]):
            top = name.split(".")[0]
            if top in ROOMS or top == "hydra_plugins":
                assert top in ALLOWED[room], f"{path.relative_to(ROOT)} imports {name}"
            if room != "pipelines":
                assert top not in SIDE_EFFECT_LIBS, f"{path.relative_to(ROOT)} imports {name}"


@pytest.mark.parametrize("room", ROOMS)
def test_no_import_cycle_between_files(room):
    mods = modules(room)
    graph = nx.DiGraph()
    for mod, path in mods.items():
        graph.add_node(mod)
        pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for name in imported(path, pkg):
            if name in mods and name != mod and mods[name].name != "__init__.py":
                graph.add_edge(mod, name)
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("room", ("collectives", "fabrics", "gxnet"))
def test_no_function_over_the_limit_in_the_core_rooms(room):
    long = []
    for path in (ROOT / room).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                key = f"{path.relative_to(ROOT)}:{node.name}"
                if lines > MAX_FUNCTION_LINES and key not in LONG_FUNCTIONS:
                    long.append(f"{key} ({lines} lines)")
    assert not long, long
