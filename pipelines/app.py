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


def run_guarded(fn: Callable[[], Any]) -> Any:
    """Run ``fn``; user errors become one line and exit 2."""
    from collectives.errors import SpecError

    try:
        return fn()
    except SpecError as exc:
        user_error(str(exc))


def gx_main(config_name: str, *, track: bool = True) -> Callable[[Callable], Callable[[], None]]:
    """Decorator turning ``fn(cfg) -> results | (results, artifacts)`` into a Hydra entry point.

    ``-m`` multiruns go to the ``gx_ray`` launcher (Ray + MLflow, ``pipelines.sweep``); a single
    run writes its files and, when ``tracking.enabled``, logs one MLflow run.
    """

    def deco(fn: Callable) -> Callable[[], None]:
        import hydra
        from hydra.core.hydra_config import HydraConfig

        def _main(cfg) -> None:
            out_dir = Path(HydraConfig.get().runtime.output_dir)
            outcome = run_guarded(lambda: fn(cfg))
            results, artifacts = outcome if isinstance(outcome, tuple) else (outcome, None)
            write_outputs(out_dir, results, artifacts)
            if track:
                track_single_run(config_name, cfg, results, out_dir)

        _main.gx_pipeline = config_name  # read by the gx_ray launcher
        hydra_main = hydra.main(version_base=None, config_path=CONF_DIR, config_name=config_name)(_main)

        @functools.wraps(fn)
        def entry() -> None:
            precheck_overrides(config_name, sys.argv[1:])
            hydra_main()

        entry.task = fn  # the undecorated task, for Ray workers and tests
        return entry

    return deco


def track_single_run(pipeline: str, cfg, results: dict, out_dir: Path) -> None:
    """Log a single (non-sweep) run to MLflow when the config enables tracking."""
    tracking = cfg.get("tracking") if hasattr(cfg, "get") else None
    if not tracking or not tracking.get("enabled", False):
        return
    from omegaconf import OmegaConf

    from pipelines.sweep import point_config
    from pipelines.tracking import Tracker, config_hash, default_uri

    plain = point_config(OmegaConf.to_container(cfg, resolve=True))
    tracker = Tracker(uri=tracking.get("uri") or default_uri(), experiment=tracking.get("experiment") or "gxnet")
    tracker.log_point(None, pipeline=pipeline, cfg_hash=config_hash(pipeline, plain), name=pipeline,
                      params=plain, results=results, artifact_dir=out_dir, error=None)


_HYDRA_FLAGS_WITH_VALUE = {"--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd", "--experimental-rerun"}


def precheck_overrides(config_name: str, argv: list[str]) -> None:
    """Compose the config before Hydra runs, so a bad override is one line and exit 2.

    Hydra itself reports composition errors with exit code 1 and a hint paragraph; the
    project's rule for bad input is one line and exit 2, keeping Hydra's own message. For a
    ``-m`` sweep, every value of every swept key is composed once (with the other keys at
    their first value), so a bad option fails before Ray starts, without composing the
    whole cartesian product.
    """
    if any(a in ("--help", "-h", "--hydra-help", "--info", "-i", "--cfg", "-c", "--shell-completion", "-sc") for a in argv):
        return
    overrides: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in _HYDRA_FLAGS_WITH_VALUE:
            skip = True
            continue
        if arg.startswith("-"):
            continue
        if arg.lstrip("+~").startswith("hydra.") or arg.lstrip("+~").startswith("hydra/"):
            continue
        overrides.append(arg)
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from pipelines.schema import validate

    try:
        variants, scalars = _sweep_variants(overrides)
        with initialize_config_dir(version_base=None, config_dir=CONF_DIR):
            for variant in variants:
                composed = compose(config_name=config_name, overrides=variant)
                validate(config_name, OmegaConf.to_container(composed, resolve=True))
                if variant is variants[0]:
                    base = composed
        for key, value in scalars:  # a swept plain value: set it on the first composition
            trial = OmegaConf.create(OmegaConf.to_container(base, resolve=False))
            OmegaConf.update(trial, key, value, merge=False)
            validate(config_name, OmegaConf.to_container(trial, resolve=True))
    except Exception as exc:  # Hydra/OmegaConf composition and parse errors
        message = " ".join(str(exc).split()).split(" Config search path:")[0]
        hint = "" if "Available options" in message else _option_hint(message)
        user_error(f"{message}{hint}")
    finally:
        GlobalHydra.instance().clear()


def _sweep_variants(overrides: list[str]) -> tuple[list[list[str]], list[tuple[str, Any]]]:
    """Override lists covering every value of every swept key at least once.

    Values of a config group (``fabric=all_eps,all_ocs``) or with a ``+``/``~`` prefix change
    the composition: each is composed (other keys at their first value). The other values of a
    plain key (``batch=range(1,65)``) are returned as (key, value) to be set on the first
    composition and validated there, which costs milliseconds instead of a composition each."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    base, swept, scalars = [], [], []
    for o in parsed:
        if o.is_sweep_override():
            key = o.get_key_element()
            values = [f"{key}={v}" for v in o.sweep_string_iterator()]
            base.append(values[0])
            group = o.is_add() or o.is_delete() or o.is_force_add() or "/" in key or "@" in key or \
                (Path(CONF_DIR) / key.split(".")[0]).is_dir()
            if group:
                swept.append((len(base) - 1, values))
            else:
                scalars.extend((key, v) for v in list(o.sweep_iterator())[1:])
        else:
            base.append(o.input_line)
    variants = [base]
    for pos, values in swept:
        for value in values[1:]:
            variants.append(base[:pos] + [value] + base[pos + 1:])
    return variants, scalars


def _option_hint(message: str) -> str:
    """Name the available options when Hydra could not find a config group option."""
    import re

    m = re.search(r"Could not find '([\w/]+)/([\w.-]+)'", message)
    if not m:
        return ""
    group_dir = Path(CONF_DIR) / m.group(1)
    if not group_dir.is_dir():
        return ""
    options = sorted(p.stem for p in group_dir.glob("*.yaml"))
    return f" (unknown {m.group(1)} {m.group(2)!r}; available: {', '.join(options)})"
