"""Shared plumbing of every Hydra pipeline: config path, user-error handling, results files.

``gx_main("decode")`` wraps a function ``(cfg) -> dict`` as a Hydra app whose primary config is
``conf/decode.yaml``. A ``SpecError`` (or Hydra/OmegaConf config error) becomes one line on
stderr and exit code 2, and nothing is written; otherwise ``results.json`` is written
atomically into the Hydra run directory together with any artifacts the function returns.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


class Artifacts(dict):
    """Extra files a pipeline writes next to results.json: name -> JSON-able object, bytes or str."""


def write_atomic(path: Path, data: bytes | str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n"


def _json_default(o: Any) -> Any:
    import numpy as np  # local: numpy scalars appear in results

    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if hasattr(o, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def write_outputs(out_dir: Path, results: dict, artifacts: dict | None = None) -> None:
    """Artifacts first, results.json last: a results.json means the run completed."""
    for name, content in (artifacts or {}).items():
        if isinstance(content, (bytes, str)):
            write_atomic(out_dir / name, content)
        else:
            write_atomic(out_dir / name, dump_json(content))
    write_atomic(out_dir / "results.json", dump_json(results))


def user_error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def run_guarded(fn: Callable[[], Any]) -> Any:
    """Run ``fn``; user errors become one line and exit 2."""
    from collectives.errors import SpecError

    try:
        return fn()
    except SpecError as exc:
        user_error(str(exc))


def gx_main(config_name: str) -> Callable[[Callable], Callable[[], None]]:
    """Decorator turning ``fn(cfg) -> (results, artifacts)`` into a Hydra entry point."""

    def deco(fn: Callable) -> Callable[[], None]:
        import hydra
        from hydra.core.hydra_config import HydraConfig

        @hydra.main(version_base=None, config_path=CONF_DIR, config_name=config_name)
        def _main(cfg) -> None:
            out_dir = Path(HydraConfig.get().runtime.output_dir)
            outcome = run_guarded(lambda: fn(cfg))
            results, artifacts = outcome if isinstance(outcome, tuple) else (outcome, None)
            write_outputs(out_dir, results, artifacts)

        @functools.wraps(fn)
        def entry() -> None:
            _main()

        entry.task = fn  # the undecorated task, for Ray workers and tests
        return entry

    return deco
