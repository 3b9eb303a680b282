"""Config validation against the JSON schema (``workflow/schemas/config.schema.yaml``) with messages that name the
key and the schema rule it broke, defaults filled in from the schema; and stage ``config``, which writes the resolved
config beside the results it produced (the report prints it)."""

from __future__ import annotations

import copy
import difflib
import json
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, validators

from longrank.data.grades import check_gain_order, integer_grades
from longrank.io import InputError, write_json
from longrank.retrieval import bm25, pisa
from longrank.retrieval.first_stage import parse_first_stage

# Where this checkout keeps the config schema (Snakemake's layout: workflow/schemas/) and the shipped collection
# descriptions, relative to the repository root. The one place the schema's location is named: the workflow
# (workflow/rules/common.smk), docgen, docs/ and the tests read it from here.
SCHEMA = "workflow/schemas/config.schema.yaml"
DATASETS = "config/datasets"
# Found from this module's place in the checkout (src/longrank/config.py), as the editable install runs it.
REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO / SCHEMA
DATASETS_DIR = REPO / DATASETS


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


def validate_config(
    config: dict, schema_path: str | Path = SCHEMA_PATH, datasets_dir: str | Path = DATASETS_DIR
) -> dict:
    """Validate ``config`` in place (filling defaults) or raise InputError listing every violation as
    ``config key a.b.c: <problem> (schema rule '<keyword>')``. ``datasets_dir`` holds the shipped dataset
    descriptions (``dataset: cranfield``)."""
    with open(schema_path, encoding="utf-8") as f:
        schema = yaml.safe_load(f)
    resolve_dataset(config, Path(datasets_dir))
    resolve_likes(config.get("models") or {})
    if "first_stage" in config:  # the single first stage of versions before 0.3
        raise InputError(
            "config key first_stage: replaced by first_stages, a list of named candidate generators, "
            "e.g. first_stages: [{name: bm25, method: bm25, k1: 0.9, b: 0.4, top_k: 100}]"
        )
    errors = sorted(_Validator(schema).iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [
            f"config key {_key(e.absolute_path)}: {e.message}{_did_you_mean(e)} (schema rule '{e.validator}')"
            for e in errors
        ]
        raise InputError(f"the config does not match {SCHEMA}:\n  " + "\n  ".join(lines))
    check_model_keys(config["models"])
    check_gain_order(config["dataset"])
    check_measures(config.get("evaluation", {}).get("measures", []))
    resolve_first_stages(config)
    check_noninferiority_reference(config)
    check_input_files(config)
    return config


def check_input_files(config: dict) -> None:
    """A path that must be a file (a local collection's files, a run file) and names a directory is an error now,
    naming the key. A path that does not exist yet is left to the data and candidates stages (another job, or the
    user, may make it before they run; they name the key if it is still missing)."""
    files = ("docs", "queries", "qrels", "train_queries", "train_qrels", "dev_queries", "dev_qrels")
    keys = [(f"dataset.{key}", config["dataset"].get(key)) for key in files]
    keys += [
        (f"first_stages.{name}.path", spec.get("path"))
        for name, spec in config["first_stages"].items()
        if spec["method"] == "run_file"
    ]
    for key, value in keys:
        if value and Path(value).is_dir():
            raise InputError(
                f"config key {key}: {value} is a directory; expected a file (relative to the working directory)"
            )


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
    if not path.is_file():
        shipped = sorted(p.stem for p in datasets_dir.glob("*.yaml"))
        raise InputError(
            f"config key dataset: {value!r} is neither a shipped collection ({', '.join(shipped)}: "
            f"{datasets_dir}/<name>.yaml) nor a description file ending in .yaml ({path} does not exist); "
            'or write the collection\'s block in the config (README, "Your own collection")'
        )
    with open(path, encoding="utf-8") as f:
        description = yaml.safe_load(f)
    if not isinstance(description, dict):
        raise InputError(
            f"config key dataset: {path} must hold a mapping of dataset keys (name, source, ...); "
            f"it holds {type(description).__name__}"
        )
    description.setdefault("name", path.stem)
    return description


def check_measures(names) -> None:
    """Every configured measure through ir-measures' own parser, when the workflow is parsed (an unknown name
    used to fail only in evaluate, after the data and first stages ran), with trec_eval's spelling translated."""
    import ir_measures

    for i, name in enumerate(names):
        try:
            ir_measures.parse_measure(name)
        except Exception:  # ir_measures raises NameError, ValueError, ... for names it cannot read
            raise InputError(
                f"config key evaluation.measures.{i}: {name!r} is not a measure ir-measures reads; "
                f"{_measure_hint(name)}"
            ) from None


def _measure_hint(name: str) -> str:
    import ir_measures

    try:
        trec = ir_measures.parse_trec_measure(name)
    except Exception:
        trec = []
    if trec:
        return f"did you mean {', '.join(map(repr, map(str, trec)))} (ir-measures' spelling of trec_eval's {name})?"
    close = difflib.get_close_matches(name.split("@")[0], list(ir_measures.measures.registry), n=1)
    return (
        f"did you mean {close[0] + name[len(name.split('@')[0]) :]!r}? " if close else ""
    ) + "measures are written as ir-measures names them, e.g. nDCG@10, P@10, RR@10, AP@100, R@1000"


def check_noninferiority_reference(config: dict) -> None:
    """``evaluation.noninferiority_reference`` names a system of this run (checked here, not after every model trained)."""
    from longrank.retrieval import sanity

    reference = config.get("evaluation", {}).get("noninferiority_reference")
    if reference is None:
        return
    models = model_order(config["models"])
    systems = [
        *config["first_stages"],
        sanity.NAME,
        *models,
        *(f"{m}+{config['models'][m]['first_stage']}" for m in models if config["models"][m].get("interpolate", True)),
    ]
    if reference not in systems:
        close = difflib.get_close_matches(reference, systems, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise InputError(
            f"config key evaluation.noninferiority_reference: {reference!r} is not a system of this run; "
            f"{hint}expected one of {systems}"
        )


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


def check_model_keys(models: dict) -> None:
    """Each model entry's architecture keys must be keys its type takes (the schema cannot know them: they are
    the model's constructor parameters). Checked when the workflow parses the config, not when a training
    job starts an hour later."""
    from longrank.models.registry import architecture_params, constructor_defaults

    for name, entry in models.items():
        known = set(constructor_defaults(entry["type"]))
        for key in sorted(set(architecture_params(entry)) - known):
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InputError(
                f"config key models.{name}.{key}: not a key of a {entry['type']!r} model; {hint}"
                f"it takes {sorted(known)} (documented in src/longrank/models/)"
            )


# first_stages[] keys that only one method reads (the schema lists them all, with their types)
# (hdct's are longrank.models.hdct.KEYS, written out here so that validating a config does not import torch; a test
# checks they agree)
METHOD_KEYS = {
    bm25.METHOD: bm25.KEYS,
    pisa.METHOD: pisa.KEYS,
    "run_file": {"path"},
    "model": {"model"},
    "hdct": {
        "encoder",
        "passage_words",
        "max_passages",
        "m",
        "combine",
        "targets",
        "title_field",
        "steps",
        "batch_size",
        "lr",
        "head_lr",
        "seed",
        "k1",
        "b",
    },
}


def resolve_first_stages(config: dict) -> dict:
    """Turn the ``first_stages`` list into a mapping name -> spec (in the configured order, the first being the
    default) and give every model entry the ``first_stage`` it reranks, checking the names on the way."""
    stages: dict[str, dict] = {}
    for i, spec in enumerate(config["first_stages"]):
        for key in sorted(set(spec) - {"name", "method", "top_k"} - METHOD_KEYS.get(spec["method"], set())):
            owners = [m for m, keys in METHOD_KEYS.items() if key in keys]
            raise InputError(
                f"config key first_stages.{i}.{key}: a key of method {' / '.join(map(repr, owners))}; "
                f"this first stage's method is {spec['method']!r}"
            )
        parse_first_stage(spec, where=f"first_stages[{i}]")  # each method's settings, typed: a bad value named
        if spec["name"] in stages:
            raise InputError(
                f"config key first_stages: the name {spec['name']!r} is used twice; names must be distinct"
            )
        stages[spec["name"]] = spec
    for name, entry in config["models"].items():
        if name in stages:
            raise InputError(
                f"config key models.{name}: {name!r} is also a first stage's name; system names must be distinct"
            )
        entry.setdefault("first_stage", next(iter(stages)))
        if entry["first_stage"] not in stages:
            raise InputError(
                f"config key models.{name}.first_stage: {entry['first_stage']!r} is not a first stage; "
                f"expected one of {list(stages)}"
            )
    for name, spec in stages.items():
        if spec["method"] == "model" and spec["model"] not in config["models"]:
            raise InputError(f"config key first_stages.{name}.model: {spec['model']!r} is not a configured model")
        targets = spec.get("targets", "titles")
        if spec["method"] == "hdct" and targets != "titles" and targets not in config.get("pseudo_queries", {}):
            raise InputError(
                f"config key first_stages.{name}.targets: {targets!r} is neither titles nor a set under pseudo_queries"
            )
    for name, entry in config["models"].items():
        _check_no_cycle(name, config["models"], stages)
        queries = (entry.get("train", {}).get("pretrain") or {}).get("queries")
        if queries is not None and queries not in config.get("pseudo_queries", {}):
            raise InputError(
                f"config key models.{name}.train.pretrain.queries: {queries!r} is not a set under pseudo_queries "
                f"(configured: {sorted(config.get('pseudo_queries', {}))})"
            )
    _check_graph_sets(config)
    config["first_stages"] = stages
    return config


def _check_graph_sets(config: dict) -> None:
    """A mir model names a graph set under mir_graphs (and no other model type names one); the set's PRF queries
    are a pseudo-query set; the model reads the documents with the set's tokenizer."""
    sets = config.get("mir_graphs", {})
    for name, graph_set in sets.items():
        prf = graph_set.get("prf_queries")
        if prf is not None and prf not in config.get("pseudo_queries", {}):
            raise InputError(
                f"config key mir_graphs.{name}.prf_queries: {prf!r} is not a set under pseudo_queries "
                f"(configured: {sorted(config.get('pseudo_queries', {}))})"
            )
    from longrank.models.modules.encoders import DEFAULT_ENCODER
    from longrank.models.registry import capabilities

    for name, entry in config["models"].items():
        graphs = entry.get("graph_set")
        if not capabilities(entry).reads_graph_set:
            if graphs is not None:
                raise InputError(
                    f"config key models.{name}.graph_set: only a mir model reads a graph set (this one is {entry['type']!r})"
                )
            continue
        if graphs not in sets:
            raise InputError(
                f"config key models.{name}.graph_set: a mir model names its graph set under mir_graphs; got {graphs!r} "
                f"(configured: {sorted(sets)})"
            )
        encoder, set_encoder = entry.get("encoder", DEFAULT_ENCODER), sets[graphs].get("encoder", DEFAULT_ENCODER)
        if encoder != set_encoder:
            raise InputError(
                f"config key models.{name}.encoder: {encoder!r}, but its graph set mir_graphs.{graphs} cut the "
                f"documents with {set_encoder!r}'s tokenizer; use the same encoder in both"
            )


def _check_no_cycle(model: str, models: dict, stages: dict) -> None:
    """A model cannot rerank candidates that it produces itself, directly or through other models' stages."""
    seen, current = [model], model
    while True:
        stage = stages[models[current]["first_stage"]]
        if stage["method"] != "model":
            return
        current = stage["model"]
        if current in seen:
            raise InputError(
                f"config key models.{model}.first_stage: {models[model]['first_stage']!r} depends on the model's own "
                f"ranking ({' -> '.join(seen + [current])}); a model cannot rerank candidates it produces"
            )
        seen.append(current)


def model_order(models: dict) -> list[str]:
    """Enabled models grouped by family (the registry's order: word models, then encoders), then by the
    document length they read, then by name. Snakemake puts a ``--configfile``'s entries before the
    default config's, so config order would shuffle the report's rows between invocations."""
    from longrank.models.registry import MODEL_TYPES, capabilities

    family = {t: i for i, t in enumerate(MODEL_TYPES)}
    enabled = [name for name, entry in models.items() if entry.get("enabled", True)]  # the schema default
    return sorted(
        enabled,
        key=lambda n: (family.get(models[n]["type"], len(family)), capabilities(models[n]).document_budget or 0, n),
    )


def add_arguments(parser):
    parser.add_argument("--json", required=True, help="the resolved config as JSON")
    parser.add_argument("--out", required=True)


# The version of what stage ``config`` writes beside the resolved config (a rule parameter: raise it when the shape of
# config.json changes, so that results made before rerun the stage rather than give the report an old shape)
CONFIG_JSON_SHAPE = 3


def run(args):
    config = json.loads(args.json)
    config["resolved_models"] = resolved_models(config["models"])
    write_json(args.out, config)


def resolved_models(models: dict) -> dict:
    """Each model entry as its jobs read it, for the report, which imports nothing from models/ or train/: its
    architecture keys with the model's defaults filled in, its training keys with the loop's, the entry it is
    ``like`` (if any), whether it is built on a pretrained WordPiece encoder, and its capabilities (what the report
    asks of its type: longrank.models.registry.Capabilities)."""
    from longrank.models.registry import architecture_params, capabilities, constructor_defaults, on_pretrained_encoder
    from longrank.train.settings import TrainSettings

    return {
        name: {
            "architecture": {**constructor_defaults(entry["type"]), **architecture_params(entry)},
            "train": {**TrainSettings.defaults(), **(entry.get("train") or {})},
            "like": entry.get("like"),
            "on_pretrained_encoder": on_pretrained_encoder(entry["type"]),
            "capabilities": capabilities(entry).to_json(),
        }
        for name, entry in models.items()
    }
