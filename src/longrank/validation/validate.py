"""Config validation against the JSON schema (``workflow/schemas/config.schema.yaml``) with messages that name the
key and the schema rule it broke, defaults filled in from the schema. Torch-free, as everything the workflow's parse
imports: it asks the model types' table (``longrank.config.model_types``), never a model class. Stage ``resolved_config``
(``longrank.resolved_config``) writes the result beside the results it produced."""

from __future__ import annotations

import copy
import difflib
from pathlib import Path

from jsonschema import Draft202012Validator, validators

from longrank.data.doc_field import check_model_fields
from longrank.validation.checks import (
    check_batch_splits,
    check_seeds,
    check_input_files,
    check_measures,
    check_model_keys,
    check_noninferiority_reference,
    check_word2vec_queries,
    resolve_first_stages,
)
from longrank.data.grades import check_gain_order, integer_grades
from longrank.errors import InputError
from longrank.io.json_yaml import load_yaml, read_yaml
from longrank.config.model_types import MODEL_TYPES, capabilities
from longrank.config.names import check_config_names, check_name
from longrank.config.user_models import kind_of
from longrank.config.schema import DATASETS_DIR, SCHEMA, SCHEMA_PATH, load_schema
from longrank.config.model_entries import is_enabled


def _key(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def validate_config(
    config: dict, schema_path: str | Path = SCHEMA_PATH, datasets_dir: str | Path = DATASETS_DIR
) -> dict:
    """Validate ``config`` in place (filling defaults) or raise InputError listing every violation as
    ``config key a.b.c: <problem> (schema rule '<keyword>')``. ``datasets_dir`` holds the shipped dataset
    descriptions (``dataset: cranfield``)."""
    resolve_dataset(config, Path(datasets_dir))
    resolve_likes(config.get("models") or {})
    if "first_stage" in config:  # the single first stage of versions before 0.3
        raise InputError(
            "config key first_stage: replaced by first_stages, a list of named candidate generators, "
            "e.g. first_stages: [{name: bm25, method: bm25, k1: 0.9, b: 0.4, top_k: 100}]"
        )
    check_config_names(config)  # before the schema: its message names the key and the pattern, in words
    if Path(schema_path) == SCHEMA_PATH:
        schema = load_schema()
    else:
        with open(schema_path, encoding="utf-8") as f:
            schema = load_yaml(f)
    check_schema(config, schema)
    fill_defaults(config, schema)
    check_model_keys(config["models"])
    check_batch_splits(config["models"])
    check_seeds(config["models"])
    check_model_fields(config)
    check_word2vec_queries(config)
    check_gain_order(config["dataset"])
    check_measures(config.get("evaluation", {}).get("measures", []))
    resolve_first_stages(config)
    check_noninferiority_reference(config, model_order(config["models"]))
    check_input_files(config)
    return config


DESCRIPTION_SUFFIXES = (".yaml", ".yml")


def resolve_dataset(config: dict, datasets_dir: Path) -> None:
    """Turn ``dataset: <name>`` into the description it names, and give a ``gains`` map integer grades.

    Why a name and not a block in config/config.yaml: Snakemake merges ``--configfile`` dictionaries key by key,
    so a collection's block written over Cranfield's kept every key it did not set (Cranfield's reversed grade map
    reached TREC DL's graded judgments). A name is a string, and Snakemake replaces a string whole, with a string
    or with a block: a config that names another collection, or writes its own ``dataset:`` block, gets none of
    Cranfield's keys. ``<name>`` is a file ``<datasets_dir>/<name>.yaml``, or a path ending in ``.yaml`` (relative
    to the working directory) to a description of your own."""
    dataset = config.get("dataset")
    if isinstance(dataset, str):
        config["dataset"] = dataset = _dataset_description(dataset, datasets_dir)
    if not isinstance(dataset, dict):
        return  # the schema names the key and the type it expects
    if "name" not in dataset:
        raise InputError(
            "config key dataset: this block has no name. A dataset block describes a whole collection (name, source "
            "and its files or ir_datasets id) and replaces the one before it whole, so it cannot change one key "
            f"of a shipped description: copy the description from {datasets_dir} and edit the copy, or write "
            "`dataset: <name>` to use one as it is"
        )
    if isinstance(dataset.get("gains"), dict):
        dataset["gains"] = integer_grades(dataset["gains"])


def _dataset_description(value: str, datasets_dir: Path) -> dict:
    path = Path(value) if value.endswith(DESCRIPTION_SUFFIXES) else datasets_dir / f"{value}.yaml"
    if not value.endswith(DESCRIPTION_SUFFIXES):  # a shipped collection's name: a file of datasets_dir, never a path
        check_name(value, "dataset")
    if not path.is_file():
        shipped = sorted(p.stem for p in datasets_dir.glob("*.yaml"))
        raise InputError(
            f"config key dataset: {value!r} is neither a shipped collection ({', '.join(shipped)}: "
            f"{datasets_dir}/<name>.yaml) nor a description file ending in .yaml ({path} does not exist); "
            'or write the collection\'s block in the config (README, "Your own collection")'
        )
    description = read_yaml(path)
    if not isinstance(description, dict):
        raise InputError(
            f"config key dataset: {path} must hold a mapping of dataset keys (name, source, ...); "
            f"it holds {type(description).__name__}"
        )
    description.setdefault("name", path.stem)
    return description


def check_schema(config: dict, schema: dict) -> None:
    """Raise InputError listing every violation of the schema, each naming its key, with the closest known key for an
    unknown one (Snakemake's validate raises its first only, without the key's path)."""
    errors = sorted(Draft202012Validator(schema).iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [
            f"config key {_key(e.absolute_path)}: {e.message}{_did_you_mean(e)} (schema rule '{e.validator}')"
            for e in errors
        ]
        raise InputError(f"the config does not match {SCHEMA}:\n  " + "\n  ".join(lines))


def fill_defaults(config: dict, schema: dict) -> None:
    """The schema's defaults, filled in at every depth (inside each ``models.<name>`` entry and each first stage's
    method block too) by jsonschema's validator extended to set them: python-jsonschema's documented recipe, the one
    Snakemake's ``validate(..., set_default=True)`` runs, here over the schema already loaded (Snakemake's reads and
    parses the file again, a quarter of a second per config). ``schema`` is the caller's copy: the defaults it holds
    become the config's values. Only on a config ``check_schema`` passed: the filler writes into whatever a
    ``properties`` rule meets, so a value of the wrong type would crash it."""
    _DEFAULT_FILLING(schema).validate(config)


def _fill_from(validator_class):
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        for name, subschema in properties.items():
            if "default" in subschema:
                instance.setdefault(name, subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


_DEFAULT_FILLING = _fill_from(Draft202012Validator)


def _did_you_mean(error) -> str:
    """For a key the schema does not know, the closest key it does know at that place (``rerank_dpth``: rerank_depth)."""
    if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
        return ""
    known = list(error.schema.get("properties", {}))
    hints = []
    for key in sorted(set(error.instance) - set(known)):
        close = difflib.get_close_matches(str(key), known, n=1)
        if close:
            hints.append(f"did you mean {close[0]!r} for {key!r}?")
    return "; " + " ".join(hints) if hints else f"; known keys here: {sorted(known)}"


# keys an entry does not take from the entry it is ``like``: whether it runs is its own business, and what it is like
NOT_INHERITED = {"enabled", "like"}


def _merged(base: dict, own: dict) -> dict:
    """``own`` over ``base``, nested mappings merged key by key (as Snakemake merges config files)."""
    out = copy.deepcopy({k: v for k, v in base.items() if k not in NOT_INHERITED})
    for key, value in own.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def resolve_likes(models: dict) -> None:
    """Expand ``like: <model>`` in place: the entry becomes that model's entry (itself resolved) with its own keys
    merged over it, and ``like`` naming its base. An ablation file then names only what it changes, and stays right over any config it is
    layered on: ``{like: mir, graphs: []}`` over config/irled.yaml reads IRLeD's 416 tokens, where a YAML anchor
    (which cannot reach across files) would have repeated Cranfield's."""

    def resolve(name: str, chain: list[str]) -> dict:
        entry = models[name]
        if not isinstance(entry, dict) or "like" not in entry:
            return entry
        base = entry["like"]
        if not isinstance(base, str) or base not in models:
            raise InputError(
                f"config key models.{name}.like: expected the name of another configured model; got {base!r} "
                f"(configured: {sorted(models)})"
            )
        if base in chain:
            raise InputError(
                f"config key models.{name}.like: the entries are like each other in a circle "
                f"({' -> '.join(chain + [base])})"
            )
        # the resolved entry keeps the name of its base (a workflow key, never the model's): the report says what an
        # entry changes against it; resolving an entry again gives the same entry
        models[name] = {
            **_merged(resolve(base, chain + [base]), {k: v for k, v in entry.items() if k != "like"}),
            "like": base,
        }
        return models[name]

    for name in list(models):
        resolve(name, [name])


def model_order(models: dict) -> list[str]:
    """Enabled models grouped by family (the registry's order: word models, then encoders), then by the
    document length they read, then by name. Snakemake puts a ``--configfile``'s entries before the
    default config's, so config order would shuffle the report's rows between invocations."""
    family = {t: i for i, t in enumerate(MODEL_TYPES)}
    enabled = [name for name, entry in models.items() if is_enabled(entry)]  # the schema default
    return sorted(
        enabled,
        key=lambda n: (family.get(kind_of(models[n]), len(family)), capabilities(models[n]).document_budget or 0, n),
    )
