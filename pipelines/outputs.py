"""Files a pipeline writes (results.json, artifacts, job folders) and the one-line user error.

``write_outputs`` writes the artifacts first and results.json last, each atomically (a results.json
means the run completed), mode 0644. ``user_error`` is the project's rule for bad input: one line on
stderr, exit code 2.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


class Artifacts(dict):
    """Extra files a pipeline writes next to results.json: name -> JSON-able object, bytes or str."""


FILE_MODE = 0o644  # rw-r--r--: results are read by other users and tools (mkstemp alone gives 0600)


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write ``path`` through a temporary file and a rename, so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, FILE_MODE)
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
    """Artifacts first, results.json last: a results.json means the run completed.

    results.json holds modelled values only (the same config gives the same bytes); measured
    wall-clock figures travel as the ``timings.json`` artifact beside it."""
    for name, content in (artifacts or {}).items():
        if isinstance(content, (bytes, str)):
            write_atomic(out_dir / name, content)
        else:
            write_atomic(out_dir / name, dump_json(content))
    write_atomic(out_dir / "results.json", dump_json(results))


def user_error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)
