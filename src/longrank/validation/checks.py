"""The config checks past the JSON schema, each naming the key it refuses: what the schema cannot know (a model
type's own keys, ir-measures' names, the names a key must refer to, a path that is a directory) and the first stages'
resolution (``first_stages`` as a mapping, each model's ``first_stage``). ``longrank.validation.validate.validate_config`` runs
them after the schema."""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import fields
from pathlib import Path

from longrank.data.collections import max_file_bytes
from longrank.errors import InputError
from longrank.io.text_files import check_file_size, check_regular_file
from longrank.config.model_types import (
    DEFAULT_ENCODER,
    architecture_defaults,
    architecture_params,
    capabilities,
    has_batch_norm,
)
from longrank.config.user_models import check_not_type_and_class, is_user, kind_of
from longrank.retrieval import bm25, pisa
from longrank.retrieval.first_stage import HDCTSettings, parse_first_stage
from longrank.config.model_entries import interpolates
from longrank.config.train_settings import PLAN_KEYS, TrainSettings, seeds_of


def check_input_files(config: dict) -> None:
    """A path that must be a file (a local collection's files, a run file) and names a directory, a device or a named
    pipe, or a collection file larger than ``dataset.max_file_gb``, is an error now, naming the key. A path that does not exist is left to ``check_input_files_exist``, which the
    workflow runs when it is parsed (a config validated for later may name files still to come)."""
    limit = max_file_bytes(config["dataset"])
    for key, value in input_file_keys(config):
        if not value or not Path(value).exists():
            continue
        if Path(value).is_dir():
            raise InputError(
                f"config key {key}: {value} is a directory; expected a file (relative to the working directory)"
            )
        try:  # a device (/dev/zero) or a named pipe, or a collection file past dataset.max_file_gb: refused now
            check_regular_file(value)
            if key.startswith("dataset."):
                check_file_size(value, limit)
        except InputError as err:
            raise InputError(f"config key {key}: {err}") from None


def input_file_keys(config: dict) -> list[tuple[str, str | None]]:
    """(config key, its value) of every key that names an input file: a local collection's files and a run file
    brought as a first stage."""
    collection = ("docs", "queries", "qrels") if config["dataset"].get("source") == "local" else ()  # else unread
    files = (*collection, "train_queries", "train_qrels", "dev_queries", "dev_qrels")
    keys = [(f"dataset.{key}", config["dataset"].get(key)) for key in files]
    return keys + [
        (f"first_stages.{name}.path", spec.get("path"))
        for name, spec in config["first_stages"].items()
        if spec["method"] == "run_file"
    ]


def check_input_files_exist(config: dict) -> None:
    """Every input file a config key names exists, when the workflow is parsed (dry runs included): a missing one
    is named by its key and path before any job runs, not by Snakemake's list of a job's missing inputs. The
    workflow's own check (workflow/rules/common.smk): ``validate_config`` also checks configs of runs to come."""
    missing = [(key, value) for key, value in input_file_keys(config) if value and not Path(value).exists()]
    if missing:
        raise InputError(
            "input files the config names do not exist (paths are relative to the working directory "
            f"{Path.cwd()}):\n" + "\n".join(f"config key {key}: {value} not found" for key, value in missing)
        )


def check_word2vec_queries(config: dict) -> None:
    """word2vec.training_queries reads one split's training queries: with k folds every query is some fold's test
    query, and the vectors are built once per collection."""
    splits, dataset = config["splits"], config["dataset"]
    own_dev = dataset.get("dev_id") or dataset.get("dev_queries")  # then splits does not apply: one split
    if config["word2vec"].get("training_queries") and splits["method"] == "kfold" and not own_dev:
        raise InputError(
            f"word2vec.training_queries: splits.method is kfold ({splits.get('k')} folds), where every query is a test "
            "query of some fold and the vectors are built once per collection; use splits.method: holdout, or leave "
            "training_queries out"
        )


def check_measures(names) -> None:
    """Every configured measure through ir-measures' own parser, when the workflow is parsed (an unknown name
    used to fail only in evaluate, after the data and first stages ran), with trec_eval's spelling translated."""
    import ir_measures

    from longrank.evaluate.ncg import cutoff

    for i, name in enumerate(names):
        if cutoff(name):  # NCG@k: evaluate/ncg.py (ir-measures has none)
            continue
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


def check_noninferiority_reference(config: dict, models: list[str]) -> None:
    """``evaluation.noninferiority_reference`` names a system of this run (checked here, not after every model trained);
    ``models`` are the enabled models in the report's order (longrank.validation.validate.model_order)."""
    from longrank.retrieval import sanity_floor

    reference = config.get("evaluation", {}).get("noninferiority_reference")
    if reference is None:
        return
    systems = [
        *config["first_stages"],
        sanity_floor.NAME,
        *models,
        *(f"{m}+{config['models'][m]['first_stage']}" for m in models if interpolates(config["models"][m])),
    ]
    if reference not in systems:
        close = difflib.get_close_matches(reference, systems, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise InputError(
            f"config key evaluation.noninferiority_reference: {reference!r} is not a system of this run; "
            f"{hint}expected one of {systems}"
        )


TRAINING_KEYS = frozenset(TrainSettings.keys()) | PLAN_KEYS  # the keys of an entry's train: block


def check_model_keys(models: dict) -> None:
    """Each model entry's architecture keys must be keys its type takes (the schema cannot know them: they are
    the model's constructor parameters). Checked when the workflow parses the config, not when a training
    job starts an hour later."""
    for name, entry in models.items():
        check_not_type_and_class(name, entry)
        if is_user(entry):  # its class's keys are its signatures', checked when a job loads it (longrank.models.user)
            continue
        known = set(architecture_defaults(entry["type"]))
        for key in sorted(set(architecture_params(entry)) - known):
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            if key in TRAINING_KEYS:  # `steps: 40` written beside the model's keys
                hint = f"{key!r} is a training key: models.{name}.train.{key} (under the entry's train: block); "
            raise InputError(
                f"config key models.{name}.{key}: not a key of a {entry['type']!r} model; {hint}"
                f"it takes {sorted(known)} (documented in src/longrank/models/)"
            )


def check_seeds(models: dict) -> None:
    """An entry sharing another's weights (``checkpoint_of``) has that entry's seeds (longrank.plan.seeds): seeds of
    its own, other than its source's (a ``like:`` of the source inherits the same), are refused, naming the key (the
    schema refuses an empty list, a repeated seed, a non-integer)."""
    for name, entry in models.items():
        source = entry.get("checkpoint_of")
        own = (entry.get("train") or {}).get("seeds")
        if source in models and own is not None and seeds_of(entry) != seeds_of(models[source]):
            raise InputError(
                f"config key models.{name}.train.seeds: this entry scores with {source!r}'s weights (checkpoint_of), "
                f"one model per seed of {source!r} ({seeds_of(models[source])}); leave its seeds out and set "
                f"models.{source}.train.seeds"
            )


def check_batch_splits(models: dict) -> None:
    """Each model's batch splits into its processes' equal shares and each share into ``train.accumulation`` equal
    micro-batches (its pre-training's too, as ``train.pretrain`` overrides the keys), and a model with batch norm
    takes its batch whole: refused when the workflow parses the config, naming the key, not when the job starts."""
    for name, entry in models.items():
        where = f"config key models.{name}.train"
        settings = TrainSettings.from_mapping(where, entry.get("train") or {})
        recipes = [(where, settings)]
        if settings.pretrain is not None:
            recipes.append((f"{where}.pretrain", dataclasses.replace(settings, **settings.pretrain.overrides)))
        for place, recipe in recipes:
            recipe.check_batch_split(place)
            if recipe.accumulation > 1 and has_batch_norm(entry):
                raise InputError(
                    f"{place}.accumulation: {recipe.accumulation} micro-batches, but this {entry['type']!r} model "
                    "has batch norm, whose training statistics would be each micro-batch's rather than the whole "
                    "batch's, so it would not train as one batch; expected 1 (several GPUs, train.processes, keep "
                    "the batch's statistics)"
                )


# first_stages[] keys that only one method reads (the schema lists them all, with their types)
METHOD_KEYS = {
    bm25.METHOD: bm25.KEYS,
    pisa.METHOD: pisa.KEYS,
    "run_file": {"path", "scores"},
    "model": {"model"},
    "hdct": {f.name for f in fields(HDCTSettings)} | {"shards"},  # shards: the stage's jobs, no setting of HDCT's
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
        if spec["method"] == "model" and is_user(config["models"][spec["model"]]):
            raise InputError(
                f"config key first_stages.{name}.model: {spec['model']!r} is your own class, which cannot rank the "
                "whole collection (it declares no per-document index, as NDRM's impact index); it reranks a first "
                "stage's candidates"
            )
        targets = spec.get("targets", "titles")
        if spec["method"] == "hdct" and targets != "titles" and targets not in config.get("pseudo_queries", {}):
            raise InputError(
                f"config key first_stages.{name}.targets: {targets!r} is neither titles nor a set under pseudo_queries"
            )
    for name, pseudo in config.get("pseudo_queries", {}).items():
        stage = pseudo.get("first_stage")
        if stage is not None and (stages.get(stage) or {}).get("method") != "pisa":
            raise InputError(
                f"config key pseudo_queries.{name}.first_stage: {stage!r} is not a pisa first stage "
                f"(pisa ones: {[n for n, s in stages.items() if s['method'] == 'pisa']})"
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
    for name, entry in config["models"].items():
        graphs = entry.get("graph_set")
        if not capabilities(entry).reads_graph_set:
            if graphs is not None:
                raise InputError(
                    f"config key models.{name}.graph_set: only a mir model reads a graph set (this one is {kind_of(entry)!r})"
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
