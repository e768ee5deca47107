"""Shape checks for the files a user hands a pipeline: one line naming the file, the place and the rule.

A file rule is data: ``Obj(required={...}, optional={...})``, ``List(item, min_len=...)``, ``Int(lo)``,
``Num(lo)``, ``Str()``, ``AnyOf()``. ``load_json(path, rule, what=...)`` reads and checks a JSON file;
``check(value, rule, where)`` checks an object already in memory. A failure is a ``SpecError`` such as

    schedule.json: activations[3].lanes[0].bytes=1.5 must be a whole number >= 0

so a wrongly shaped or truncated file never reaches the code that would index it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectives.errors import SpecError


class Rule:
    def check(self, value: Any, where: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError


def _fail(where: str, value: Any, rule: str) -> None:
    shown = repr(value) if not isinstance(value, (dict, list)) else f"<a {type(value).__name__}>"
    if len(shown) > 60:
        shown = shown[:57] + "..."
    if where.endswith(": "):  # the whole document
        raise SpecError(f"{where}the document is {shown} and {rule}")
    raise SpecError(f"{where}={shown} {rule}")


@dataclass(frozen=True)
class Int(Rule):
    """A whole JSON number (not a bool, not 1.5 or 2.0) >= ``lo``."""

    lo: int | None = None

    def check(self, value, where):
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(where, value, f"must be a whole number{'' if self.lo is None else f' >= {self.lo}'}")
        if self.lo is not None and value < self.lo:
            _fail(where, value, f"must be a whole number >= {self.lo}")


@dataclass(frozen=True)
class Num(Rule):
    """A finite JSON number >= ``lo``."""

    lo: float | None = None

    def check(self, value, where):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            _fail(where, value, "must be a finite number")
        if self.lo is not None and value < self.lo:
            _fail(where, value, f"must be a number >= {self.lo}")


@dataclass(frozen=True)
class Str(Rule):
    choices: tuple[str, ...] = ()

    def check(self, value, where):
        if not isinstance(value, str):
            _fail(where, value, "must be a string")
        if self.choices and value not in self.choices:
            _fail(where, value, f"must be one of: {', '.join(self.choices)}")


@dataclass(frozen=True)
class AnyOf(Rule):
    """Any value, or one matching one of ``rules`` (None allowed when ``nullable``)."""

    rules: tuple[Rule, ...] = ()
    nullable: bool = False

    def check(self, value, where):
        if not self.rules or (self.nullable and value is None):
            return
        for r in self.rules:
            try:
                r.check(value, where)
                return
            except SpecError:
                continue
        self.rules[0].check(value, where)


@dataclass(frozen=True)
class List(Rule):
    item: Rule = field(default_factory=AnyOf)
    min_len: int = 0
    length: int | None = None

    def check(self, value, where):
        if not isinstance(value, list):
            _fail(where, value, "must be a list")
        if self.length is not None and len(value) != self.length:
            _fail(where, value, f"must have {self.length} entries, has {len(value)}")
        if len(value) < self.min_len:
            _fail(where, value, f"must have at least {self.min_len} entries, has {len(value)}")
        for i, v in enumerate(value):
            self.item.check(v, f"{where}[{i}]")


@dataclass(frozen=True)
class Obj(Rule):
    required: dict = field(default_factory=dict)
    optional: dict = field(default_factory=dict)

    def check(self, value, where):
        if not isinstance(value, dict):
            _fail(where, value, f"must be a mapping with {', '.join(self.required) or 'keys'}")
        for key, rule in self.required.items():
            if key not in value:
                raise SpecError(f"{where}: the key {key!r} is missing")
            rule.check(value[key], _join(where, key))
        for key, rule in self.optional.items():
            if key in value and value[key] is not None:
                rule.check(value[key], _join(where, key))


def _join(where: str, key: str) -> str:
    return f"{where}{key}" if where.endswith(": ") else f"{where}.{key}"


def check(value: Any, rule: Rule, where: str) -> None:
    """Check ``value`` against ``rule``; ``where`` names it (a file name, optionally ``"name: "``)."""
    rule.check(value, where)


def read_json(path: str | Path, what: str) -> Any:
    """Parse a JSON file; a missing, unreadable or truncated file is one line naming ``what=path``."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{what}={str(path)!r} does not exist or is not a file")
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{what}={str(path)!r} cannot be read ({type(exc).__name__}); give a UTF-8 JSON file") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{what}={str(path)!r} is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}; "
                        f"a truncated file?)") from None
    except RecursionError:
        raise SpecError(f"{what}={str(path)!r} nests too deeply to be a valid file") from None


def load_json(path: str | Path, rule: Rule, what: str) -> Any:
    """``read_json`` then ``check`` against ``rule``; errors name the file and the JSON path."""
    obj = read_json(path, what)
    check(obj, rule, f"{Path(path).name}: ")
    return obj


def square_matrix(value: Any, n: int, where: str) -> None:
    """A list of ``n`` lists of ``n`` whole numbers >= 0 (a demand matrix)."""
    check(value, List(List(Int(0), length=n), length=n), where)


# --- the file formats ---------------------------------------------------------------------------------

LANE = Obj(required={"src": Int(0), "dst": Int(0), "bytes": Int(0)},
           optional={"origin": Int(), "final": Int(), "path": Obj()})
SCHEDULE = Obj(required={"format": Str(), "world_size": Int(2), "demand_bytes": List(List(Int(0)), min_len=2),
                         "activations": List(Obj(required={"lanes": List(LANE)}))},
               optional={"scheduler": Str(), "platform": Str(), "meta": Obj()})
RANK_REPORT = Obj(required={"name": Str(), "elapsed_s": List(Num(0), min_len=1), "activation_s": List(List(Num(0))),
                            "checked_bytes": Int(0), "expected_bytes": Int(0), "mismatched_bytes": Int(0)},
                  optional={"first_mismatch": AnyOf((Str(),), nullable=True)})
REPORTS = Obj(required={"world_size": Int(1), "reports": List(List(RANK_REPORT), min_len=1)})


def load_schedule(path: str | Path, what: str = "schedule") -> dict:
    """A ``schedule.json`` (``AlltoallvSchedule.to_json``) with every field of the right shape."""
    obj = load_json(path, SCHEDULE, what)
    square_matrix(obj["demand_bytes"], obj["world_size"], f"{Path(path).name}: demand_bytes")
    return obj


def load_reports(path: str | Path, what: str = "reports") -> dict:
    """The ``rank_reports.json`` rank 0 of a torchrun replay writes."""
    return load_json(path, REPORTS, what)


def read_array(path: str | Path, what: str):
    """A numeric array from a .npy, .json or .csv file; anything else is one line naming ``what=path``.

    Only readability, a numeric dtype and finiteness are checked here; the reader that uses the
    array (``collectives.alltoallv.workloads.demand_matrix``, ``gxnet.expert_routing.trace_ids``) checks its
    shape and values against the run."""
    import numpy as np

    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{what}={str(path)!r} does not exist or is not a file; give a .npy, .json or .csv array")
    try:
        if p.suffix == ".npy":
            a = np.load(p, allow_pickle=False)
        elif p.suffix == ".json":
            a = np.asarray(read_json(p, what))
        else:
            a = np.loadtxt(p, delimiter=",", ndmin=2)
    except SpecError:
        raise
    except Exception as exc:  # numpy's readers raise ValueError, EOFError, OSError, TypeError, ... on bad files
        raise SpecError(f"{what}={str(path)!r} is not a readable numeric array ({type(exc).__name__}); write a "
                        f".npy, a JSON list of lists or comma-separated numbers") from None
    if a.ndim == 0 or a.dtype.kind not in "iuf":
        raise SpecError(f"{what}={str(path)!r} holds {'one value' if a.ndim == 0 else f'{a.dtype} values'}; "
                        f"it must be an array of numbers")
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise SpecError(f"{what}={str(path)!r} holds NaN or infinite values; every entry must be a finite number")
    return a


def check_input_files(cfg: Any) -> None:
    """The data files a config names (``workload=file``, ``routing=trace``) can be read as arrays."""
    from pipelines.specs import plain

    def group(key):
        try:
            node = cfg.get(key) if hasattr(cfg, "get") else None
        except Exception:  # omegaconf missing values: reported by the pipeline itself
            return {}
        node = plain(node)
        return node if isinstance(node, dict) else {}

    workload = group("workload")
    if workload.get("name") == "file" and workload.get("path") not in (None, "", "???"):
        read_array(workload["path"], "workload.path")
    routing = group("routing")
    if routing.get("model") == "trace" and routing.get("trace_path"):
        read_array(routing["trace_path"], "routing.trace_path")
