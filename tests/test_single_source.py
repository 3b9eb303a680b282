"""One source of truth: what the config schema allows is what the code implements (model types, losses,
the keys of a model entry), and every model type rejects a key it does not know, naming it. The schema's
training keys against config.train_settings.TrainSettings: tests/test_train_settings.py."""

from __future__ import annotations

import pytest
import yaml

from longrank.config.schema import SCHEMA_PATH
from longrank.errors import InputError
from longrank.config.model_types import MODEL_TYPES, WORKFLOW_KEYS
from longrank.config.user_models import USER_KEYS
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
    assert listed >= WORKFLOW_KEYS, f"workflow keys the schema does not list: {sorted(WORKFLOW_KEYS - listed)}"
    # a class entry's own workflow keys (longrank.config.user_models: class, reads) are listed too
    assert listed >= USER_KEYS, f"class-entry keys the schema does not list: {sorted(USER_KEYS - listed)}"
    architecture = {key for model_type in MODEL_TYPES for key in constructor_defaults(model_type)}
    assert listed - WORKFLOW_KEYS - USER_KEYS <= architecture, (
        f"schema keys no model takes: {sorted(listed - WORKFLOW_KEYS - USER_KEYS - architecture)}"
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from longrank.data.corpus import Corpus
    from longrank.data.data import prepare

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


def _schema_defaults(node: dict, path: str, out: dict[str, dict[str, object]]) -> None:
    """key name -> {dotted path: default} of every key the schema states a default for (empty containers left out:
    they say the key may be absent, not what a setting is)."""
    for key, child in (node.get("properties") or {}).items():
        if "default" in child and child["default"] not in ({}, [], None):
            out.setdefault(key, {})[f"{path}{key}"] = child["default"]
        _schema_defaults(child, f"{path}{key}.", out)
    for nested in ("additionalProperties", "items"):
        if isinstance(node.get(nested), dict):
            _schema_defaults(node[nested], f"{path}*.", out)


def _literal(node):
    import ast

    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _literal  # not a literal: equal to no default


def default_literals(source: str, keys: dict, parameters: bool = False) -> list[tuple[int, str, str]]:
    """Where ``source`` writes a schema default again, as the same key's literal: ``add_argument("--key", default=v)``,
    ``x.get("key", v)`` or ``{"key": v}``; with ``parameters``, a function parameter ``key=v`` only. (line, key, what)."""
    import ast

    def same(key: str, value_node) -> bool:
        value = _literal(value_node)
        return any(value == d and type(value) is type(d) for d in keys.get(key, {}).values())

    found = []
    for node in ast.walk(ast.parse(source)):
        if parameters:
            if isinstance(node, ast.arguments):
                named = [*node.posonlyargs, *node.args]
                pairs = list(zip(named[len(named) - len(node.defaults) :], node.defaults))
                pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None]
                found += [(d.lineno, a.arg, f"parameter {a.arg}={ast.unparse(d)}") for a, d in pairs if same(a.arg, d)]
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            if node.func.attr == "get" and len(node.args) == 2 and same(first.value, node.args[1]):
                found.append((node.lineno, first.value, ast.unparse(node)))
            if node.func.attr == "add_argument" and first.value.startswith("--"):
                key = first.value[2:].replace("-", "_")
                for kw in node.keywords:
                    if kw.arg == "default" and same(key, kw.value):
                        found.append((node.lineno, key, f"add_argument({first.value!r}, default=...)"))
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and same(k.value, v):
                    found.append((node.lineno, k.value, f"{{{k.value!r}: {ast.unparse(v)}}}"))
    return found


# Keys that share a name and a value with a schema key but are not it, each with the reason: (file, key).
NOT_THE_SCHEMAS = {
    # a bench's or the bootstrap's own random seed: no config key sets it
    ("src/longrank/bench/attention_scaling.py", "seed"): "the bench's seed",
    ("src/longrank/bench/mores_speed.py", "seed"): "the bench's seed",
    ("src/longrank/evaluate/compare.py", "seed"): "the bootstrap's seed",
    # a random seed of its own: the vectors of words without a pretrained one, a random encoder, the bootstrap
    ("src/longrank/data/words.py", "seed"): "the random vectors' seed",
    ("src/longrank/models/modules/encoders.py", "seed"): "a random encoder's seed",
    ("src/longrank/evaluate/significance.py", "seed"): "the bootstrap's seed",
    # HDCT's batch when it weights a collection's passages: no config key sets it
    ("src/longrank/train/hdct_build.py", "batch_size"): "HDCT's weighting batch",
    # generated from the models' signatures: a model entry's encoder, whose default the schema leaves to the model
    ("src/longrank/config/model_defaults.py", "encoder"): "a model's encoder",
}


def second_defaults(parameters: bool) -> list[str]:
    from longrank.config.schema import REPO

    keys: dict[str, dict[str, object]] = {}
    _schema_defaults(SCHEMA, "", keys)
    return [
        f"{path.relative_to(REPO)}:{line}: {what} (schema: {', '.join(f'{p}={d!r}' for p, d in keys[key].items())})"
        for path in sorted((REPO / "src" / "longrank").rglob("*.py"))
        for line, key, what in default_literals(path.read_text(encoding="utf-8"), keys, parameters)
        if (str(path.relative_to(REPO)), key) not in NOT_THE_SCHEMAS
    ]


def test_no_schema_default_is_written_again_in_src():
    """A key's default lives in the schema, which validation fills into the config every stage is given; a stage, a
    bench or a hand-typed command that needs it reads it there (longrank.config.schema.schema_default). The same value
    written again for the same key is a second home that drifts when the schema's changes."""
    found = second_defaults(parameters=False)
    assert not found, f"{len(found)} schema default(s) written again in src/:\n" + "\n".join(found)


def test_no_function_parameter_repeats_a_schema_default():
    """The same for keyword defaults: ``rerank(..., batch_size=...)``, ``train_word2vec(dim=...)``, the API's
    ``device=...`` take the schema's (``schema_default("rerank.batch_size")``), never the value again."""
    found = second_defaults(parameters=True)
    assert not found, f"{len(found)} keyword default(s) repeat a schema default:\n" + "\n".join(found)


def test_the_scan_finds_each_form_of_a_second_default():
    keys = {"batch_size": {"rerank.batch_size": 32}, "method": {"splits.method": "holdout"}}
    source = (
        "p.add_argument('--batch-size', type=int, default=32)\n"
        "x = splits.get('method', 'holdout')\n"
        "D = {'batch_size': 32}\n"
        "def f(batch_size: int = 32): pass\n"
        "ok = [p.add_argument('--batch-size', default=16), splits.get('method'), {'batch_size': n}]\n"
    )
    assert [(line, key) for line, key, _ in default_literals(source, keys)] == [
        (1, "batch_size"),
        (2, "method"),
        (3, "batch_size"),
    ]
    assert [(line, key) for line, key, _ in default_literals(source, keys, parameters=True)] == [(4, "batch_size")]
