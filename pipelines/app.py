"""Shared plumbing of every Hydra pipeline: config path, user-error handling, results files.

``gx_main("decode")`` wraps a function ``(cfg) -> dict`` as a Hydra app whose primary config is
``conf/decode.yaml``. A ``SpecError`` (or Hydra/OmegaConf config error) becomes one line on
stderr and exit code 2, and nothing is written; otherwise ``results.json`` is written
atomically into the Hydra run directory together with any artifacts the function returns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

from pipelines.outputs import user_error, write_outputs

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


def run_guarded(fn: Callable[[], Any], out_dir: Path | None = None) -> Any:
    """Run ``fn``; user errors become one line and exit 2. ``out_dir``: the run directory Hydra
    made for this run, emptied of what Hydra wrote there (``.hydra/``, the job log) so that bad
    input leaves nothing behind."""
    from collectives.errors import SpecError

    try:
        return fn()
    except SpecError as exc:
        if out_dir is not None:
            discard_run_dir(Path(out_dir))
        user_error(str(exc))


def discard_run_dir(out_dir: Path) -> None:
    """Remove Hydra's files of a run that refused its input, then the folders left empty (up to
    the working directory): the folder of a refused run must not look like a result."""
    import logging
    import shutil

    for handler in logging.getLogger().handlers[:]:  # Hydra's job log: close it before removing
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).parent == out_dir.resolve():
            handler.close()
            logging.getLogger().removeHandler(handler)
            Path(handler.baseFilename).unlink(missing_ok=True)
    shutil.rmtree(out_dir / ".hydra", ignore_errors=True)
    cwd, folder = Path.cwd().resolve(), out_dir.resolve()
    while folder != cwd and cwd in folder.parents:
        try:
            folder.rmdir()  # only when empty
        except OSError:
            break
        folder = folder.parent
    if folder == out_dir.resolve() != cwd and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()  # an absolute hydra.run.dir outside the working directory


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
            tracker = run_guarded(lambda: single_run_tracker(cfg), out_dir) if track else None  # store probed first
            outcome = run_guarded(lambda: fn(cfg), out_dir)
            results, artifacts = outcome if isinstance(outcome, tuple) else (outcome, None)
            write_outputs(out_dir, results, artifacts)
            if tracker is not None:
                track_single_run(config_name, cfg, results, out_dir, tracker)

        _main.gx_pipeline = config_name  # read by the gx_ray launcher
        hydra_main = hydra.main(version_base=None, config_path=CONF_DIR, config_name=config_name)(_main)

        @functools.wraps(fn)
        def entry() -> None:
            from pipelines.collector import pace_collector

            pace_collector()
            sys.argv[1:] = absolute_config_paths(sys.argv[1:])
            composed = precheck_overrides(config_name, sys.argv[1:])
            with known_hydra_mode(composed, sys.argv[1:]):
                hydra_main()

        entry.task = fn  # the undecorated task, for Ray workers and tests
        return entry

    return deco


def single_run_tracker(cfg):
    """The Tracker of a single run when its config enables tracking, probed before the run
    computes anything (an unreachable store is one line and exit 2, nothing written)."""
    tracking = cfg.get("tracking") if hasattr(cfg, "get") else None
    if not tracking or not tracking.get("enabled", False):
        return None
    from pipelines.tracking import open_tracker

    return open_tracker(dict(tracking), direct=True)


def track_single_run(pipeline: str, cfg, results: dict, out_dir: Path, tracker) -> None:
    """Log a single (non-sweep) run to MLflow. A store that fails now loses nothing: the run's
    directory keeps ``tracking.json`` beside ``results.json`` and ``gx sync`` uploads it."""
    if not (cfg.get("tracking") or {}).get("enabled", False):
        return  # the pipeline logged its own run (replay) and switched tracking off
    from omegaconf import OmegaConf

    from pipelines.sweep import point_config
    from pipelines.tracking import config_hash

    plain = point_config(OmegaConf.to_container(cfg, resolve=True))
    tracker.log_point(None, pipeline=pipeline, cfg_hash=config_hash(pipeline, plain), name=pipeline,
                      params=plain, results=results, artifact_dir=out_dir, error=None, out_dir=out_dir)
    if tracker.down:
        print(f"warning: this run is not in the store yet; upload it with: gx sync dir={out_dir}", file=sys.stderr)


_INFO_FLAGS = ("--help", "-h", "--hydra-help", "--info", "-i", "--cfg", "-c", "--shell-completion", "-sc")
_PATH_FLAGS = ("--config-path", "-cp", "--config-dir", "-cd")


def absolute_config_paths(argv: list[str]) -> list[str]:
    """``--config-path``/``--config-dir`` relative to the working directory, as a user means them
    (Hydra takes a relative ``--config-path`` relative to the app's source file)."""
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, value = arg.partition("=")
        if flag in _PATH_FLAGS and eq and not value.startswith("pkg://"):
            arg = f"{flag}={os.path.abspath(value)}"
        elif arg in _PATH_FLAGS and i + 1 < len(argv) and not argv[i + 1].startswith("pkg://"):
            out += [arg, os.path.abspath(argv[i + 1])]
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def config_loader(config_path: str | None, config_dir: str | None, overrides: list[str] = ()):
    """Hydra's config loader over the search path Hydra itself builds for a gx pipeline
    (``hydra._internal.utils._run_hydra``): the primary config dir (``--config-path`` or conf/),
    search-path plugins (hydra_plugins/gx_conf_searchpath: conf/ stays reachable), ``--config-dir``,
    then the ``hydra.searchpath`` of the overrides (the loader adds those only while composing;
    here they are on its repository too, so group options found there can be suggested)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.core.override_parser.overrides_parser import OverridesParser

    search_path = create_config_search_path(config_path or CONF_DIR)
    if config_dir is not None:
        search_path.prepend(provider="command-line", path=f"file://{os.path.abspath(config_dir)}",
                            anchor=SearchPathQuery(provider="schema"))
    for o in OverridesParser.create().parse_overrides([o for o in overrides if o.startswith("hydra.searchpath=")]):
        if isinstance(o.value(), list):
            for entry in o.value():
                search_path.prepend(provider="hydra.searchpath", path=str(entry),
                                    anchor=SearchPathQuery(provider="schema"))
    return ConfigLoaderImpl(config_search_path=search_path)


def precheck_overrides(config_name: str, argv: list[str]) -> dict | None:
    """Compose the config before Hydra runs, so a bad override is one line and exit 2; returns
    the (first) composition, Hydra's node included, or None where nothing was composed.

    Hydra itself reports composition errors with exit code 1 and a hint paragraph; the
    project's rule for bad input is one line and exit 2. The composition uses Hydra's own
    search path (``--config-path``, ``--config-dir``, ``hydra.searchpath``). For a ``-m`` sweep,
    every value of every swept key is composed once (with the other keys at their first value),
    so a bad option fails before Ray starts, without composing the whole cartesian product.
    """
    if any(a in _INFO_FLAGS for a in argv):
        return None
    from hydra._internal.utils import get_args_parser

    try:
        args = get_args_parser().parse_args(argv)
    except SystemExit:  # a malformed flag: Hydra's own parser reports it
        return None
    config_name = args.config_name or config_name
    loader = None
    try:
        for flag, path in (("--config-dir", args.config_dir), ("--config-path", args.config_path)):
            if path is not None and not path.startswith("pkg://") and not os.path.isdir(path):
                raise _Refused(f"{flag} {path} is not a directory; give a folder laid out like conf/ "
                               f"(e.g. DIR/model/my_model.yaml)")
        loader = config_loader(args.config_path, args.config_dir, args.overrides)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                composed = _compose_and_validate(loader, config_name, args.overrides)
            finally:  # a missing search dir is the cause of whatever composition then reported
                _refuse_missing_search_dirs(caught)
    except _Refused as exc:
        user_error(str(exc))
    except Exception as exc:  # Hydra/OmegaConf composition and parse errors, SpecError
        user_error(_explain(exc, loader, config_name, args.overrides))
    if args.multirun:
        start_sweep_ray_early(composed, args.overrides)
    return composed


@contextlib.contextmanager
def known_hydra_mode(composed: dict | None, argv: list[str]):
    """While Hydra runs: its ``hydra.mode`` taken from the precheck's composition.

    Before a run, Hydra composes the whole config once more only to read ``hydra.mode``
    (``Hydra.get_mode``, hydra/_internal/utils.py ``_run_hydra``), then again for the run itself:
    three compositions per command, ~0.07-0.2 s each on 2 cores. The precheck composed the same
    files a moment before, so its value stands in for a single run -- not for a ``-m`` sweep (the
    precheck composed its first variant only), nor where an override names ``hydra.mode`` or the
    value is an interpolation; there Hydra composes as before."""
    from hydra._internal.hydra import Hydra
    from hydra.types import RunMode

    mode = ((composed or {}).get("hydra") or {}).get("mode", "absent")
    sweep = any(a in ("-m", "--multirun") for a in argv)
    if sweep or not (mode is None or isinstance(mode, RunMode)) or any("hydra.mode" in a for a in argv):
        yield
        return
    real = Hydra.get_mode
    Hydra.get_mode = lambda self, config_name, overrides: mode
    try:
        yield
    finally:
        Hydra.get_mode = real


def start_sweep_ray_early(composed: dict, overrides: list[str]) -> None:
    """A ``-m`` sweep on the gx_ray launcher: begin starting its private Ray now, from the config
    the precheck composed -- Hydra composes it twice more (≈ 0.3 s on 2 cores) before the
    launcher's own early start, which then finds this one (``pipelines.ray_cluster.start_early``).
    Not when a command-line override touches ``ray``: a swept ``ray`` value would make the
    precheck's first variant differ from the launcher's config."""
    from hydra_plugins.gx_ray_launcher.gx_ray_launcher import GxRayLauncherConf

    launcher = ((composed.get("hydra") or {}).get("launcher") or {}).get("_target_")
    ray_cfg = composed.get("ray")
    if launcher != GxRayLauncherConf._target_ or not isinstance(ray_cfg, dict) or "${" in repr(ray_cfg):
        return  # not a gx sweep, or a ray node that only the launcher's config resolves
    if any(o.lstrip("+~").split("=", 1)[0].split(".", 1)[0].split("@", 1)[0] == "ray" for o in overrides):
        return
    from pipelines.ray_cluster import start_early

    start_early(dict(ray_cfg))


class _Refused(Exception):
    """An override refused at entry, with its one-line message."""


def _refuse_missing_search_dirs(caught: list) -> None:
    """Hydra only warns about a ``hydra.searchpath`` entry that does not exist."""
    for w in caught:
        text = str(w.message)
        if "is not available" in text:
            path = text.split("path=")[-1].removesuffix(" is not available.")
            raise _Refused(f"hydra.searchpath: {path} is not a directory; give file:///absolute/path "
                           f"entries of folders laid out like conf/")


def _compose_and_validate(loader, config_name: str, overrides: list[str]) -> dict:
    """Compose and validate every variant; returns the first composition, Hydra's node included
    (unresolved)."""
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from pipelines.schema import validate

    hydra_overrides = [o for o in overrides if _is_hydra_key(o)]
    task_overrides = [o for o in overrides if not _is_hydra_key(o)]
    variants, scalars = _sweep_variants(task_overrides, is_group=loader.repository.group_exists)
    base = first = None
    for variant in variants:
        composed = loader.load_configuration(config_name, hydra_overrides + variant, run_mode=RunMode.RUN)
        with_hydra = OmegaConf.to_container(composed, resolve=False)
        composed = OmegaConf.create({k: v for k, v in with_hydra.items() if k != "hydra"})
        _refuse_unknown_additions(loader, config_name, hydra_overrides, variant, composed)
        validate(config_name, OmegaConf.to_container(composed, resolve=True))
        base = composed if base is None else base
        first = with_hydra if first is None else first
    for key, value in scalars:  # a swept plain value: set it on the first composition
        trial = OmegaConf.create(OmegaConf.to_container(base, resolve=False))
        OmegaConf.update(trial, key, value, merge=False)
        validate(config_name, OmegaConf.to_container(trial, resolve=True))
    return first or {}


def _is_hydra_key(override: str) -> bool:
    key = override.lstrip("+~")
    return key.startswith("hydra.") or key.startswith("hydra/") or key == "hydra"


def _refuse_unknown_additions(loader, config_name: str, hydra_overrides: list[str], variant: list[str],
                              composed) -> None:
    """``+key=value`` adds a key Hydra did not have: refused unless it selects a config group
    option or names a field its group's schema declares (``+model.mtp_layers=1``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from pipelines.schema import SCHEMAS

    for o in OverridesParser.create().parse_overrides(variant):
        if not (o.is_add() or o.is_force_add()):
            continue
        path = o.key_or_group
        if loader.repository.group_exists(path):
            continue
        head, _, rest = path.partition(".")
        if head in SCHEMAS and rest:
            declared = [f.name for f in dataclasses.fields(SCHEMAS[head])]
            field = rest.split(".")[0]
            if field in declared:
                continue
            raise _Refused(f"{o.input_line}: {head} has no field {field!r}{did_you_mean(field, declared)}")
        if o.is_force_add():  # ++key=value overrides an existing key, or adds one
            others = [v for v in variant if v != o.input_line]
            before = loader.load_configuration(config_name, hydra_overrides + others, run_mode=RunMode.RUN)
            if _has_key(before, path):
                continue
        raise _Refused(_unknown_key_message(o.input_line, path, composed, loader, config_name))


def _has_key(cfg, path: str) -> bool:
    from omegaconf import OmegaConf

    parent, _, leaf = path.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return hasattr(node, "keys") and leaf in node


def _unknown_key_message(line: str, path: str, cfg, loader, config_name: str) -> str:
    """``line`` sets ``path``, which the composed config ``cfg`` lacks: name the first missing
    segment of the path and the closest key there."""
    parts = path.split(".")
    node, depth = cfg, 0
    while depth < len(parts) - 1 and hasattr(node, "keys") and parts[depth] in node:
        node, depth = node[parts[depth]], depth + 1
    parent, leaf = ".".join(parts[:depth]), parts[depth]
    known = [str(k) for k in node.keys()] if hasattr(node, "keys") else []
    known = [k for k in known if k not in (leaf, "hydra")] + ([] if parent else _chosen_groups(loader, config_name))
    where = f"{parent}" if parent else f"the {config_name} config"
    return f"{line}: {where} has no key {leaf!r}{did_you_mean(leaf, known)}"


def _chosen_groups(loader, config_name: str) -> list[str]:
    """The config groups the pipeline's defaults list chooses from (null choices included)."""
    base = _base_config(loader, config_name)
    choices = base.hydra.runtime.choices if base is not None else {}
    return [g for g in choices if not str(g).startswith("hydra")]


def did_you_mean(word: str, choices, *, list_all: bool = True) -> str:
    """'; did you mean 'x'?' for the closest of ``choices``, else (``list_all``) the choices."""
    import difflib

    choices = sorted(set(str(c) for c in choices))
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; choose one of: {', '.join(choices)}" if list_all and choices and len(choices) <= 40 else ""


def _explain(exc: Exception, loader, config_name: str, overrides: list[str]) -> str:
    """One line for a composition/validation error: what, which value, and the fix, with a
    did-you-mean for a mistyped key or option; never Hydra's ``+key`` append hint."""
    import re

    message = " ".join(str(exc).split()).split(" Config search path:")[0]
    if loader is None:
        return message
    m = re.search(r"Could not override '([\w.@/-]+)'\. (No match in the defaults list|To append)", message)
    if m:
        path = m.group(1)
        line = next((o for o in overrides if o.split("=", 1)[0].lstrip("~") == path), path)
        base = _base_config(loader, config_name)
        if m.group(2).startswith("No match") and base is not None and path in base:
            return (f"{line}: {path} is set in the {config_name} config itself, not chosen from "
                    f"conf/{path}/; set its fields instead ({path}.name=...)")
        return _unknown_key_message(line, path, base if base is not None else {}, loader, config_name)
    m = re.search(r"Could not find '([\w/]+)/([\w.-]+)'", message)
    if m:
        group, option = m.group(1), m.group(2)
        options = _options(loader, group)
        if options:
            return (f"{group}={option}: no such {group}{did_you_mean(option, options, list_all=False)} "
                    f"(options: {', '.join(options)}; own configs: --config-dir DIR with {group}/NAME.yaml)")
    m = re.search(r"Could not append to config\. An item is already at '([\w.]+)'", message)
    if m:
        key = m.group(1)
        line = next((o for o in overrides if o.split("=", 1)[0] == f"+{key}"), f"+{key}=...")
        return f"{line}: {key} already exists; set it without '+': {line[1:]}"
    m = re.search(r"Key '(\w+)' not in '(\w+)'", message)
    if m:
        return _schema_key_message(m.group(1), m.group(2)) or message
    m = re.search(r"^(.*?) full_key: ([\w.\[\]]+) object_type=(\w+)", message)
    if m:
        group = _schema_group(m.group(3))
        return f"{group + '.' if group else ''}{m.group(2)}: {m.group(1)}"
    return message


def _schema_group(class_name: str) -> str | None:
    from pipelines.schema import SCHEMAS

    return next((g for g, cls in SCHEMAS.items() if cls.__name__ == class_name), None)


def _schema_key_message(key: str, class_name: str) -> str | None:
    import dataclasses

    from pipelines.schema import SCHEMAS

    group = _schema_group(class_name)
    if group is None:
        return None
    declared = [f.name for f in dataclasses.fields(SCHEMAS[group])]
    return f"{group}.{key}: {group} has no field {key!r}{did_you_mean(key, declared)}"


def _base_config(loader, config_name: str):
    """The pipeline's config without the user's overrides (composed once per loader)."""
    from hydra.types import RunMode

    cache = loader.__dict__.setdefault("_gx_base", {})
    if config_name not in cache:
        try:
            cache[config_name] = loader.load_configuration(config_name, [], run_mode=RunMode.RUN)
        except Exception:
            cache[config_name] = None
    return cache[config_name]


def _options(loader, group: str) -> list[str]:
    return sorted(o for o in loader.get_group_options(group) if not o.endswith("_schema"))


def _sweep_variants(overrides: list[str], is_group: Callable[[str], bool] | None = None,
                    ) -> tuple[list[list[str]], list[tuple[str, Any]]]:
    """Override lists covering every value of every swept key at least once.

    Values of a config group (``fabric=all_eps,all_ocs``) or with a ``+``/``~`` prefix change
    the composition: each is composed (other keys at their first value). The other values of a
    plain key (``batch=range(1,65)``) are returned as (key, value) to be set on the first
    composition and validated there, which costs milliseconds instead of a composition each.
    ``is_group``: whether a key names a config group (default: a folder of conf/)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if is_group is None:
        is_group = lambda key: (Path(CONF_DIR) / key).is_dir()  # noqa: E731
    parsed = OverridesParser.create().parse_overrides(overrides)
    base, swept, scalars = [], [], []
    for o in parsed:
        if o.is_sweep_override():
            key = o.get_key_element()
            values = [f"{key}={v}" for v in o.sweep_string_iterator()]
            base.append(values[0])
            group = o.is_add() or o.is_delete() or o.is_force_add() or "/" in key or "@" in key or \
                is_group(key.split(".")[0])
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
