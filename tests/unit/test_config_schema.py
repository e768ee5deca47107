"""Structured-config schemas checked at entry (pipelines/schema.py)."""

import dataclasses
from pathlib import Path

import pytest
import yaml
from omegaconf.errors import ConfigKeyError, ValidationError

from gxnet.models import ModelSpec
from pipelines.schema import ModelSchema, validate


def test_model_schema_mirrors_every_spec_field_so_entry_checks_cannot_lag_behind():
    schema = {f.name for f in dataclasses.fields(ModelSchema)}
    assert schema == {f.name for f in dataclasses.fields(ModelSpec)} | {"description", "source"}


def test_a_spec_field_passes_and_a_typo_or_wrong_type_fails_at_entry():
    with open(Path(__file__).resolve().parents[2] / "conf/model/gpt_oss_120b.yaml") as f:
        model = yaml.safe_load(f)
    validate("decode", {"model": {**model, "tied_embeddings": True, "description": "tied variant"}})
    with pytest.raises(ConfigKeyError, match="tied_embedings"):
        validate("decode", {"model": {**model, "tied_embedings": True}})
    with pytest.raises(ValidationError, match="layers"):
        validate("decode", {"model": {**model, "layers": "many"}})


# --- field kinds applied to the composed config ---------------------------------------------
import math  # noqa: E402

from collectives.errors import SpecError  # noqa: E402
from pipelines.schema import FIELD_KINDS, FIELD_WORDS, SCHEMAS, check_numbers  # noqa: E402
from pipelines.units import KINDS  # noqa: E402

CONF = Path(__file__).resolve().parents[2] / "conf"


def _yaml_paths(node, prefix=""):
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            yield from _yaml_paths(value, path)
    elif isinstance(node, list):
        for value in node:
            yield from _yaml_paths(value, prefix)


def _declared_paths() -> set[str]:
    paths = set()
    for f in list(CONF.glob("*.yaml")) + list(CONF.glob("experiment/*.yaml")):
        paths |= set(_yaml_paths(yaml.safe_load(f.read_text()) or {}))
    for f in CONF.glob("*/*.yaml"):
        paths |= set(_yaml_paths(yaml.safe_load(f.read_text()) or {}, f.parent.name))
    for group, cls in SCHEMAS.items():
        paths |= {f"{group}.{f.name}" for f in dataclasses.fields(cls)}
    return paths


def test_every_field_of_the_kind_table_is_a_field_some_config_has():
    assert set(FIELD_KINDS.values()) <= set(KINDS)
    missing = sorted(set(FIELD_KINDS) - _declared_paths())
    assert not missing, f"FIELD_KINDS names fields no config or schema has: {missing}"
    assert set(FIELD_WORDS) <= set(FIELD_KINDS)


def test_every_number_in_every_shipped_config_file_obeys_its_kind():
    for f in CONF.glob("*/*.yaml"):
        data = yaml.safe_load(f.read_text()) or {}
        if f.parent.name != "experiment":
            data = {f.parent.name: data}
        data.pop("hydra", None)
        check_numbers(data)  # raises on the first field outside its kind
    for f in CONF.glob("*.yaml"):
        data = yaml.safe_load(f.read_text()) or {}
        data.pop("defaults", None)
        check_numbers(data)


@pytest.mark.parametrize("cfg,needle", [
    ({"batch": math.nan}, "batch=nan"), ({"context": math.inf}, "context=inf"),
    ({"fabric": {"link_rate": math.inf}}, "fabric.link_rate=inf"),
    ({"accelerator": {"hbm_bandwidth_Bps": math.inf}}, "accelerator.hbm_bandwidth_Bps"),
    ({"timeout": "0s"}, "timeout='0s'"), ({"size": [4096, 0]}, "size=0"), ({"size": "0..16MiB"}, "size='0'"),
    ({"meshes": [{"payloads": ["4KiB", math.nan]}]}, "meshes.payloads=nan"),
    ({"some": {"unlisted": math.nan}}, "some.unlisted=nan"),  # any other number: finite
])
def test_check_numbers_refuses_a_field_outside_its_kind(cfg, needle):
    with pytest.raises(SpecError) as info:
        check_numbers(cfg)
    assert needle in str(info.value)


def test_null_words_and_ranges_pass():
    check_numbers({"ports": None, "max_kernel_bytes": "auto", "network": {"buffer": "unlimited"},
                   "size": "1KiB..16MiB*4", "predict": {"nodes": "auto"}, "hydra": {"x": math.nan}})


def test_did_you_mean_names_the_closest_choice_or_lists_them():
    from pipelines.app import did_you_mean

    assert did_you_mean("fabirc", ["fabric", "batch"]) == "; did you mean 'fabric'?"
    assert did_you_mean("zzz", ["a", "b"]) == "; choose one of: a, b"
    assert did_you_mean("zzz", ["a", "b"], list_all=False) == ""


def test_no_schema_shows_up_as_an_option_of_its_group():
    from hydra.core.config_store import ConfigStore

    repo = ConfigStore.instance().repo
    assert not any(name.endswith("_schema") for group in SCHEMAS for name in repo.get(group, {}))
