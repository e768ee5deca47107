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
