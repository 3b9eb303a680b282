"""The training recipe as typed settings: the schema's ``models.*.train`` and ``TrainSettings`` hold the same keys
(neither can gain one alone), of the same types and values, and the defaults live in ``TrainSettings`` alone; a wrong
key or type is refused naming ``models.<name>.train.<key>``."""

from __future__ import annotations

import dataclasses
import types
import typing

import pytest
import yaml

from longrank.errors import InputError
from longrank.train.losses import LOSSES
from longrank.config.train_settings import PLAN_KEYS, Pretraining, TrainSettings


def schema_path():
    """The schema the workflow validates against (longrank.validation.validate names its one place)."""
    from longrank.config.schema import SCHEMA_PATH

    return SCHEMA_PATH


@pytest.fixture(scope="module")
def train_schema() -> dict:
    schema = yaml.safe_load(schema_path().read_text())
    return schema["properties"]["models"]["additionalProperties"]["properties"]["train"]


def field_types() -> dict:
    return typing.get_type_hints(TrainSettings)


def test_the_schema_and_the_settings_have_the_same_keys(train_schema):
    assert train_schema.get("additionalProperties") is False  # the schema refuses a key the settings lack, too
    # and the plan's own keys (seeds: how many trainings, longrank.plan.seeds), which no training reads
    assert set(train_schema["properties"]) == set(TrainSettings.keys()) | PLAN_KEYS


def test_the_schema_states_no_default_the_settings_do_not_hold(train_schema):
    """The defaults are TrainSettings'; where the schema states one too (it need not), it is the same value."""
    defaults = TrainSettings.defaults()
    for key, rule in train_schema["properties"].items():
        if "default" in rule:
            assert rule["default"] == defaults[key], key


def test_the_schema_and_the_settings_agree_on_every_type_and_choice(train_schema):
    json_types = {int: "integer", float: "number", bool: "boolean", str: "string"}
    for key, annotation in field_types().items():
        rule = train_schema["properties"][key]
        union = isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
        options = [a for a in (typing.get_args(annotation) if union else (annotation,)) if a is not type(None)]
        if key == "pretrain":
            assert options == [Pretraining] and rule["type"] == "object" and rule["required"] == ["queries"]
            assert set(rule["properties"]) == {f.name for f in dataclasses.fields(Pretraining)} - {"overrides"}
        elif typing.get_origin(options[0]) is typing.Literal:
            assert list(typing.get_args(options[0])) == rule["enum"], key
        else:  # a schema that allows null (an overlay's way to unset a base's value) needs an optional setting
            allowed = rule["type"] if isinstance(rule["type"], list) else [rule["type"]]
            assert "null" not in allowed or type(None) in typing.get_args(annotation), f"{key}: null not a setting"
            assert [json_types[o] for o in options] == [t for t in allowed if t != "null"], key
    assert list(typing.get_args(typing.get_args(field_types()["loss"])[0])) == list(LOSSES)


def test_an_entry_without_train_keys_has_the_defaults_and_given_keys_win():
    assert TrainSettings.from_entry("knrm", {"type": "knrm"}) == TrainSettings()
    entry = {
        "type": "tk",
        "train": {"lr": 1, "steps": 20, "loss": "ranknet", "pretrain": {"queries": "ict", "lr": 0.1}},
    }
    settings = TrainSettings.from_entry("tk", entry)
    assert settings.lr == 1 and settings.steps == 20 and settings.loss == "ranknet" and settings.batch_size == 8
    assert settings.pretrain == Pretraining("ict", {"lr": 0.1})
    # as the config writes it: what train_summary.json and the config stage's resolved entries hold
    assert settings.as_dict() == {**TrainSettings.defaults(), **entry["train"]}
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.lr = 0.5


@pytest.mark.parametrize(
    "train, message",
    [
        ({"lr": "1e-3"}, r"models\.tk\.train\.lr: expected a number, got '1e-3' \(str\)"),
        ({"steps": 2.5}, r"models\.tk\.train\.steps: expected an integer, got 2\.5"),
        ({"steps": True}, r"models\.tk\.train\.steps: expected an integer, got True \(bool\)"),
        ({"negative_pairs": 1}, r"models\.tk\.train\.negative_pairs: expected true or false, got 1"),
        ({"loss": "hinge"}, r"models\.tk\.train\.loss: expected 'pairwise_hinge' or .* or null, got 'hinge'"),
        ({"epochs": 3}, r"models\.tk\.train: unknown keys \['epochs'\]"),
        ({"pretrain": {"steps": 3}}, r"models\.tk\.train\.pretrain: expected a mapping with `queries`"),
        ({"pretrain": {"queries": "ict", "stepz": 3}}, r"models\.tk\.train\.pretrain: unknown keys \['stepz'\]"),
        ({"pretrain": {"queries": "ict", "pretrain": {}}}, r"models\.tk\.train\.pretrain: unknown keys \['pretrain'\]"),
        ({"pretrain": {"queries": "ict", "lr": "x"}}, r"models\.tk\.train\.pretrain\.lr: expected a number"),
    ],
)
def test_a_wrong_key_or_type_is_named(train, message):
    with pytest.raises(InputError, match=message):
        TrainSettings.from_entry("tk", {"type": "tk", "train": train})


def test_the_config_stage_resolves_training_keys_from_the_settings():
    from longrank.resolved_config import resolved_models

    resolved = resolved_models({"k": {"type": "knrm", "train": {"steps": 5}}})
    assert resolved["k"]["train"] == {**TrainSettings.defaults(), "steps": 5}
