"""What a training is made from, by digest: a saved state resumes (or, finished, is copied out as the model) only if
every input is unchanged (``training_inputs``), and a state that does not fit is discarded with one line naming the
inputs that changed (``keep_only_a_fitting_state``). Every file a training reads is covered, by content or by the
parts of it the training reads (``train/input_files.py``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from longrank.config.schema import every_default
from longrank.data.corpus import Corpus, PseudoQueryCorpus
from longrank.results.file_records import sha256_of
from longrank.models.registry import entry_constructor_defaults
from longrank.train.state_sets import clear_state, newest_good_set, read_position
from longrank.train.code import training_code_digest
from longrank.train.input_files import content_files, directory_files
from longrank.train.position import PositionShapeError, TrainingPosition


def training_inputs(
    model_cfg: dict,
    corpus: Corpus,
    fold: dict,
    depth: int,
    candidates,
    built: dict[str, str],
    init: str | Path | None = None,
    collection_artifacts: str | Path | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> dict[str, str]:
    """A digest of each input that changes what training produces, by name: a saved state resumes (or, finished, is
    copied out as the model) only if every one is unchanged, and a mismatch is logged by these names."""
    train_dev = fold["train"] + fold["dev"]
    # With the model's defaults resolved: a state left before a default changed must not resume under the new one.
    resolved = {**entry_constructor_defaults(model_cfg), **model_cfg}
    # Not part of the recipe: the global batch and the update are the same on any number of processes or
    # micro-batches (float summation order and dropout noise aside, as the device, which is not fingerprinted
    # either) and of DataLoader workers, so a state left by a run on 4 GPUs resumes on 2 or on 1 accumulating
    # 4 micro-batches, and a config that only changes them finds its finished state.
    resolved["train"] = {
        k: v for k, v in resolved.get("train", {}).items() if k not in ("processes", "accumulation", "num_workers")
    }
    parts = {
        "model entry": resolved,
        "split": [fold["train"], fold["dev"]],
        "rerank depth": depth,
        "candidates": {q: sorted(candidates.get(q, {}).items()) for q in train_dev},
        # what the training and dev queries are judged (the sampler's positives, the dev score that picks the model)
        "judgments": {q: sorted(corpus.qrels.get(q, {}).items()) for q in train_dev},
        "query texts": {q: corpus.queries.get(q) for q in train_dev},
        "documents": _documents_digest(corpus),
        **built,  # the vocabulary and the initial weights (built_model_digests)
        # the starting weights by content: a state fine-tuned from an earlier pre-training must not resume from a
        # new one
        "init checkpoint": sha256_of(init) if init is not None else None,
        "collection artifacts": _directory_digest(Path(collection_artifacts))
        if collection_artifacts is not None
        else None,
        "optimiser layout": _optimiser_layout(optimizer),
        # the code that trains and the model's own (longrank.results.code_digest: the AST without docstrings): weights left
        # by other arithmetic are never resumed, as `snakemake -R train` after an edit used to
        "code": training_code_digest(model_cfg),
        # the defaults of the training keys the entry leaves out (and every other the schema states): the schema is a
        # file, read when the settings are resolved
        "schema defaults": every_default(),
        # torch's CPU arithmetic depends on the thread count, so the trained weights do (docs/training.md)
        "threads": str(torch.get_num_threads()),
        # what building the model reads by content: the encoder's directory (its tokenizer decides the token ids the
        # initial weights' digest cannot see), word vectors and the word vocabulary file
        **{f"file {f.label}": sha256_of(f.path) for f in content_files(resolved, corpus.dir)},
        # `deterministic: true` (runtime.set_deterministic) computes other bytes on a GPU: a state trained without it
        # is no answer to a request for it. Only when on, so the fingerprints of every earlier training stand.
        **({"deterministic": "on"} if torch.are_deterministic_algorithms_enabled() else {}),
    }
    return {name: value if isinstance(value, str) else _digest(value) for name, value in parts.items()}


def _optimiser_layout(optimizer: torch.optim.Optimizer | None) -> list | None:
    """The weights' shapes and their optimiser groups: a state left by other code (a parameter added, a parameter
    moved to another learning rate's group) cannot be loaded into this model, so it must not be resumed either."""
    if optimizer is None:
        return None
    return [[[list(p.shape) for p in g["params"]], g.get("initial_lr", g["lr"])] for g in optimizer.param_groups]


def built_model_digests(model: torch.nn.Module) -> dict[str, str]:
    """What the freshly built model (before any training or ``--init``) carries from files outside the config: its
    word vocabularies (the words, so which word each embedding row stands for, and their document frequencies) and
    its initial weights (GloVe or word2vec rows, a pretrained encoder, the seeded initialisation)."""
    from longrank.data.words import Vocabulary

    vocabularies = [
        [v.words, v.doc_freq, v.num_docs]
        for m in model.modules()
        for v in vars(m).values()
        if isinstance(v, Vocabulary)
    ]
    weights = hashlib.sha256()
    for key, tensor in sorted(model.state_dict().items()):
        weights.update(key.encode())
        weights.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return {"vocabulary": _digest(vocabularies), "initial weights": weights.hexdigest()}


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _documents_digest(corpus: Corpus) -> str:
    """The collection's text by content (streamed: MS MARCO's docs.jsonl is ~22 GB, hashed in about half a minute),
    and under pre-training the positives' texts that stand in for their documents."""
    files = [corpus.dir / "docs.jsonl"]
    if isinstance(corpus, PseudoQueryCorpus):
        files.append(corpus.pseudo_dir / "overrides.jsonl")
    return _digest([sha256_of(path) for path in files])


def _directory_digest(directory: Path) -> str:
    """Every file under ``directory`` that a model may read, by relative path and content (``directory_files``)."""
    return _digest([[f.label, sha256_of(f.path)] for f in directory_files(directory, ".")])


def fingerprint_of(inputs: dict[str, str]) -> str:
    return _digest(inputs)


def changed_inputs(saved: TrainingPosition, inputs: dict[str, str]) -> str:
    """Why a saved position does not fit this training, in a few words for the log."""
    changed = [name for name in inputs if saved.inputs.get(name) != inputs[name]]
    return "changed since it was saved: " + (", ".join(changed) or "the fingerprint")


def keep_only_a_fitting_state(state_dir: Path, inputs: dict[str, str], fingerprint: str) -> str | None:
    """Leave in ``state_dir`` only checkpoint sets this training may resume from: corrupt sets are moved aside (the
    newest good one is kept), and a state made for other inputs, or in the layout before checkpoint sets (no
    checksums), is discarded. Returns why it discarded one (for the caller's one line, which also says what comes
    next: training afresh, or a finished training restored from the history), None when it discarded none."""
    if (state_dir / "position.json").exists():  # files directly in train_state/: written before checkpoint sets
        clear_state(state_dir)
        return "it predates checksummed checkpoint sets"
    newest = newest_good_set(state_dir)
    if newest is None:
        return None
    try:
        saved = read_position(newest)
    except PositionShapeError as err:  # its manifest holds, so other code wrote it: never read in part
        clear_state(state_dir)
        return str(err)
    if saved.fingerprint != fingerprint:
        clear_state(state_dir)
        return changed_inputs(saved, inputs)
    return None
