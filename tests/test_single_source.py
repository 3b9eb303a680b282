"""One source of truth: what the config schema allows is what the code implements (model types, losses,
the keys of a model entry), and every model type rejects a key it does not know, naming it. The schema's
training keys against train.settings.TrainSettings: tests/test_train_settings.py."""

from __future__ import annotations

import pytest
import yaml

from longrank.config import SCHEMA_PATH
from longrank.io import InputError
from longrank.model_types import MODEL_TYPES, WORKFLOW_KEYS
from longrank.models.registry import build_model, constructor_defaults, model_class
from longrank.train.losses import LOSSES

from conftest import synthetic_collection, write_local_collection

SCHEMA = yaml.safe_load(SCHEMA_PATH.read_text())
MODEL_ENTRY = SCHEMA["properties"]["models"]["additionalProperties"]


def test_schema_model_types_are_the_registry():
    assert set(MODEL_ENTRY["properties"]["type"]["enum"]) == set(MODEL_TYPES)


def test_schema_losses_are_the_implemented_losses():
    assert set(MODEL_ENTRY["properties"]["train"]["properties"]["loss"]["enum"]) == set(LOSSES)


@pytest.mark.parametrize("model_type", sorted(MODEL_TYPES))
def test_every_default_loss_is_implemented(model_type):
    assert model_class(model_type).default_loss in LOSSES


def test_schema_model_keys_are_workflow_or_architecture_keys():
    """The schema's keys of a model entry: the workflow's (model_types.WORKFLOW_KEYS, never passed to a model)
    all listed, and every other one an architecture key some model type takes."""
    listed = set(MODEL_ENTRY["properties"])
    assert WORKFLOW_KEYS <= listed, f"workflow keys the schema does not list: {sorted(WORKFLOW_KEYS - listed)}"
    architecture = {key for model_type in MODEL_TYPES for key in constructor_defaults(model_type)}
    assert listed - WORKFLOW_KEYS <= architecture, (
        f"schema keys no model takes: {sorted(listed - WORKFLOW_KEYS - architecture)}"
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from longrank.data.corpus import Corpus
    from longrank.data.prepare import prepare

    root = tmp_path_factory.mktemp("single_source")
    docs, queries, qrels = synthetic_collection(n_queries=4, docs_per_query=3)
    dataset = write_local_collection(root / "src", docs, queries, qrels)
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.25, "test": 0.25}, root / "data")
    return Corpus(root / "data")


@pytest.mark.parametrize("model_type", sorted(MODEL_TYPES))
def test_every_model_type_rejects_an_unknown_key_by_name(model_type, corpus):
    # a plausible typo of max_doc_len: silently ignored, it would train a model other than the one configured
    with pytest.raises(InputError, match="max_doc_length"):
        build_model({"type": model_type, "max_doc_length": 100}, corpus)


def test_schema_word2vec_defaults_are_the_stages():
    """The word2vec stage's keyword defaults (used from the command line) and the schema's (used by the workflow)."""
    import inspect

    from longrank.data.word2vec import build, train_word2vec

    stage = {
        k: p.default
        for function in (train_word2vec, build)  # the vectors' keys, and what the stage reads (training_queries)
        for k, p in inspect.signature(function).parameters.items()
        if p.default is not p.empty
    }
    keys = SCHEMA["properties"]["word2vec"]["properties"]
    schema = {k: v["default"] for k, v in keys.items() if "default" in v}  # doc_fields: the collection's, no default
    assert set(keys) - set(schema) == {"doc_fields"} and stage["doc_fields"] is None
    assert schema == {k: stage[k] for k in schema}
