"""Config validation against ``config/schema.yaml`` with messages that name the key and the schema rule it
broke, defaults filled in from the schema; and stage ``config``, which writes the resolved config beside
the results it produced (the report prints it)."""

from __future__ import annotations

import json

import yaml
from jsonschema import Draft202012Validator, validators

from longrank.io import InputError, write_json


def _with_defaults(validator_class):
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub:
                    instance.setdefault(key, sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


_Validator = _with_defaults(Draft202012Validator)


def _key(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def validate_config(config: dict, schema_path: str) -> dict:
    """Validate ``config`` in place (filling defaults) or raise InputError listing every violation as
    ``config key a.b.c: <problem> (schema rule '<keyword>')``."""
    with open(schema_path, encoding="utf-8") as f:
        schema = yaml.safe_load(f)
    errors = sorted(_Validator(schema).iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [f"config key {_key(e.absolute_path)}: {e.message} (schema rule '{e.validator}')" for e in errors]
        raise InputError("the config does not match config/schema.yaml:\n  " + "\n  ".join(lines))
    return config


def document_budget(entry: dict) -> int | None:
    """How much of a document a model entry reads: ``max_doc_len`` (words or WordPiece tokens), or for the
    BERT ranker its passages (FirstP: ``passage_len``; MaxP: ``max_passages`` windows every ``passage_stride``,
    as :class:`longrank.models.bert_ranker.BertRanker` cuts them)."""
    if entry.get("type") == "bert_ranker" and entry.get("passage_len"):
        if entry.get("mode") == "maxp":
            return (entry.get("passage_stride") or entry["passage_len"]) * ((entry.get("max_passages") or 16) - 1) + entry["passage_len"]
        return entry["passage_len"]
    return entry.get("max_doc_len")


def model_order(models: dict) -> list[str]:
    """Enabled models grouped by family (the registry's order: word models, then encoders), then by the
    document length they read, then by name. Snakemake puts a ``--configfile``'s entries before the
    default config's, so config order would shuffle the report's rows between invocations."""
    from longrank.models.registry import MODEL_TYPES

    family = {t: i for i, t in enumerate(MODEL_TYPES)}
    enabled = [name for name, entry in models.items() if entry.get("enabled", True)]  # the schema default
    return sorted(enabled, key=lambda n: (family.get(models[n]["type"], len(family)), document_budget(models[n]) or 0, n))


def add_arguments(parser):
    parser.add_argument("--json", required=True, help="the resolved config as JSON")
    parser.add_argument("--out", required=True)


def run(args):
    write_json(args.out, json.loads(args.json))
