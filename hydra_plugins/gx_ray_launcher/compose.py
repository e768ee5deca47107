"""Composing a sweep's points without running Hydra once per point.

Hydra composes a point by building its defaults list (config groups), merging the group
configs, then applying the plain ``key=value`` overrides to the result in order
(``hydra._internal.config_loader_impl``: ``_apply_overrides_to_config``). So points that select
the same config-group options share everything up to that last step. :class:`LeafComposer`
runs Hydra once per distinct set of group overrides (the *base*) and applies each point's
plain overrides to plain-dict copies of it: microseconds a point instead of ~0.1-0.5 s.

A point falls back to Hydra when anything in it is not a plain change of an existing scalar
(``+``/``~``/``++``, a dict or list value, an interpolation), or when the base holds an
interpolation that refers to another config node (its value could depend on a swept leaf);
the composed config is the same either way (tests/pipelines/test_sweep_compose.py).
"""


import json
import re
from dataclasses import dataclass
from typing import Any, Callable

# an interpolation that only calls an environment resolver cannot depend on a swept value
_NODE_REF = re.compile(r"\$\{(?!oc\.env:|oc\.decode:)")
_SUBDIR_KEYS = {"${hydra.job.num}": "num", "${hydra.job.id}": "id"}


@dataclass
class Base:
    """One Hydra composition shared by the points with the same group overrides."""
    cfg: Any             # the composed DictConfig (hydra node included)
    unresolved: dict     # plain config without hydra, interpolations kept (.hydra/config.yaml)
    resolved: dict | None  # plain resolved config without hydra; None: leaves need Hydra
    hydra: dict          # plain hydra node, unresolved


@dataclass
class Composed:
    """A point's configuration as the launcher needs it."""
    plain: dict          # resolved, without hydra (what the point computes from)
    unresolved: dict     # without hydra, interpolations kept
    hydra: dict          # the job's hydra node (plain, unresolved)
    subdir: str          # hydra.sweep.subdir, resolved for this job
    cfg: Any = None      # the DictConfig when Hydra composed the point itself
    base: dict | None = None  # the base's resolved config: ``plain`` shares its unchanged nodes


def _set_path(tree: dict, dotted: str, value) -> dict:
    """A copy of ``tree`` with ``dotted`` set: only the dicts on the path are copied (the rest
    is shared with the base, which is never mutated)."""
    parts = dotted.split(".")
    root = dict(tree)
    node = root
    for part in parts[:-1]:
        node[part] = dict(node[part])
        node = node[part]
    node[parts[-1]] = value
    return root


def _get_path(tree: dict, dotted: str):
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def _has_node_ref(obj) -> bool:
    if isinstance(obj, str):
        return bool(_NODE_REF.search(obj))
    if isinstance(obj, dict):
        return any(_has_node_ref(v) for v in obj.values())
    if isinstance(obj, list):
        return any(_has_node_ref(v) for v in obj)
    return False


class LeafComposer:
    """``compose(master_config, overrides)`` is Hydra's own ``load_sweep_config``; ``is_group``
    tells whether a key names a config group (``loader.repository.group_exists``)."""

    def __init__(self, compose: Callable, master_config, is_group: Callable[[str], bool], max_bases: int = 64):
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self._compose, self.master, self.is_group = compose, master_config, is_group
        self._parser = OverridesParser.create()
        self._parsed: dict[str, Any] = {}
        self._leaf: dict[str, bool] = {}  # per override line (group_exists searches the config path)
        self._bases: dict[tuple, Base] = {}
        self.max_bases = max_bases
        self.hydra_compositions = 0  # how many times Hydra composed (bases + fallbacks)
        dirname = master_config.hydra.job.config.override_dirname
        self._dirname = (list(dirname.exclude_keys), str(dirname.item_sep), str(dirname.kv_sep))

    def parse(self, line: str):
        o = self._parsed.get(line)
        if o is None:
            o = self._parsed[line] = self._parser.parse_override(line)
        return o

    def is_leaf(self, o) -> bool:
        """A plain change of one value: applied after the composition, never changes it."""
        found = self._leaf.get(o.input_line)
        if found is None:
            found = self._leaf[o.input_line] = self._is_leaf(o)
        return found

    def _is_leaf(self, o) -> bool:
        if o.is_hydra_override() or o.package is not None or o.is_add() or o.is_delete() or o.is_force_add():
            return False
        if o.is_sweep_override() or self.is_group(o.key_or_group):
            return False
        value = o.value()
        return not isinstance(value, (dict, list)) and not (isinstance(value, str) and "${" in value)

    def split(self, overrides: list[str]) -> tuple[tuple, list]:
        """(the group overrides, as a base key; the leaf overrides, parsed)."""
        group, leaves = [], []
        for line in overrides:
            o = self.parse(line)
            if self.is_leaf(o):
                leaves.append(o)
            else:
                group.append(line)
        return tuple(group), leaves

    def base(self, key: tuple) -> Base:
        found = self._bases.get(key)
        if found is not None:
            return found
        from omegaconf import OmegaConf

        cfg = self._compose(self.master, list(key))
        self.hydra_compositions += 1
        plain = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
        hydra = plain.pop("hydra")
        resolved = None
        if not _has_node_ref(plain):  # resolved as the launcher always did: without the hydra node
            resolved = OmegaConf.to_container(OmegaConf.create(plain), resolve=True, enum_to_str=True)
        if len(self._bases) >= self.max_bases:  # a sweep over many group values: keep the newest
            self._bases.pop(next(iter(self._bases)))
        found = self._bases[key] = Base(cfg=cfg, unresolved=plain, resolved=resolved, hydra=hydra)
        return found

    def compose(self, overrides: list[str], job_num: int) -> Composed:
        """The point's config, as Hydra would compose it, job id/num set to ``job_num``."""
        key, leaves = self.split(overrides)
        base = self.base(key)
        if base.resolved is not None and self._subdir(base.hydra, job_num) is not None:
            try:
                return self._apply(base, overrides, leaves, job_num)
            except KeyError:
                pass  # a key the base lacks, or a scalar over a node: Hydra says so in its own words
        return self._hydra_point(overrides, job_num)

    def _apply(self, base: Base, overrides: list[str], leaves: list, job_num: int) -> Composed:
        plain, unresolved = base.resolved, base.unresolved
        for o in leaves:
            key, value = o.key_or_group, o.value()
            if isinstance(_get_path(unresolved, key), (dict, list)):
                raise KeyError(key)  # a scalar over a node: Hydra's merge rules apply
            plain, unresolved = _set_path(plain, key, value), _set_path(unresolved, key, value)
        hydra = dict(base.hydra)
        task = [line for line in overrides if not self.parse(line).is_hydra_override()]
        exclude, item_sep, kv_sep = self._dirname
        kept = sorted(line for line in task if self.parse(line).key_or_group not in exclude)
        hydra["overrides"] = {**hydra["overrides"], "task": task}
        hydra["job"] = {**hydra["job"], "override_dirname": re.sub("[=]", kv_sep, item_sep.join(kept)),
                        "id": str(job_num), "num": job_num}  # hydra.job.id is typed str
        return Composed(plain=plain, unresolved=unresolved, hydra=hydra, subdir=self._subdir(hydra, job_num),
                        base=base.resolved)

    @staticmethod
    def _subdir(hydra: dict, job_num: int) -> str | None:
        """``hydra.sweep.subdir`` when it names the job number only (the default); None otherwise."""
        subdir = str(hydra.get("sweep", {}).get("subdir"))
        if "${" not in subdir:
            return subdir
        return str(job_num) if subdir in _SUBDIR_KEYS else None

    def _hydra_point(self, overrides: list[str], job_num: int) -> Composed:
        from omegaconf import OmegaConf, open_dict

        cfg = self._compose(self.master, list(overrides))
        self.hydra_compositions += 1
        with open_dict(cfg):
            cfg.hydra.job.id = job_num
            cfg.hydra.job.num = job_num
        subdir = str(OmegaConf.select(cfg, "hydra.sweep.subdir"))
        unresolved = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
        hydra = unresolved.pop("hydra")
        plain = OmegaConf.to_container(OmegaConf.create(unresolved), resolve=True, enum_to_str=True)
        return Composed(plain=plain, unresolved=unresolved, hydra=hydra, subdir=subdir, cfg=cfg)

    def check(self, overrides: list[str]) -> None:
        """What Hydra's sweeper checks for a point (that it composes), at the cost of one
        composition per distinct base and one dict walk per leaf."""
        key, leaves = self.split(overrides)
        base = self.base(key)
        try:
            for o in leaves:
                _get_path(base.unresolved, o.key_or_group)
        except KeyError:
            self._compose(self.master, list(overrides))  # Hydra raises its own error


def same_config(a: Composed, b: Composed) -> bool:
    """Whether two compositions of a point agree (the test of the fast path)."""
    def dump(x) -> str:
        return json.dumps(x, sort_keys=True, default=str)

    return (dump(a.plain) == dump(b.plain) and dump(a.unresolved) == dump(b.unresolved)
            and dump(a.hydra) == dump(b.hydra) and a.subdir == b.subdir)
