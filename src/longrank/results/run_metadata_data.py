"""The ``data`` section of a run's ir_metadata record (:mod:`longrank.results.run_metadata`): the spec's ``test
collection``, ``training data`` and ``other`` (embeddings, a pre-trained encoder), and LongRank's own facts the spec
has no key for (each file's SHA-256, the documents and queries counted, the per-fold query split), which the record
keeps under ``longrank: data:``. Imports nothing heavy."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longrank.io.atomic import write_text

UNKNOWN = "unknown"
GLOVE = {"name": "GloVe embeddings (6B tokens, 50 dimensions)", "source": "https://nlp.stanford.edu/projects/glove/"}
MINILM = {"name": "all-MiniLM-L6-v2", "source": "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2"}
#: a query set of at most this many ids is listed whole; a larger one (MS MARCO's 367k training queries) by count
#: and digest
LISTED_QUERIES = 1000


def ir_datasets_url(dataset_id: str) -> str:
    """ir_datasets' documentation page of an id (``msmarco-document/trec-dl-2019`` ->
    ``https://ir-datasets.com/msmarco-document.html#msmarco-document/trec-dl-2019``)."""
    return f"https://ir-datasets.com/{dataset_id.split('/')[0]}.html#{dataset_id}"


def file_sha256(path: str | os.PathLike) -> str:
    """A file's SHA-256, remembered beside it in ``.sha256.json`` by size and modification time: a collection's
    documents are hashed once, not once per run written from them."""
    path = Path(path)
    stat = path.stat()
    cache_path = path.parent / ".sha256.json"
    try:
        cache = json.loads(cache_path.read_text())
    except (OSError, ValueError):
        cache = {}
    key = f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}"
    if key not in cache:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        cache = {k: v for k, v in cache.items() if not k.startswith(f"{path.name}:")} | {key: digest.hexdigest()}
        with contextlib.suppress(OSError):  # a read-only data directory: hashed again next time
            write_text(cache_path, json.dumps(cache, indent=1, sort_keys=True))
    return cache[key]


def query_set(ids: list[str]) -> dict:
    """A fold's query set: how many, the SHA-256 of its sorted ids (one a line), and the ids where they are few."""
    ids = sorted(ids)
    digest = hashlib.sha256("".join(f"{q}\n" for q in ids).encode()).hexdigest()
    return {"count": len(ids), "sha256": digest, **({"ids": ids} if len(ids) <= LISTED_QUERIES else {})}


def test_collection(name: str, source: dict) -> dict:
    """The spec's ``test collection`` from the data stage's record of where the collection came from (stats.json's
    ``source``): an ir_datasets id names its page for the collection, topics and qrels alike (ir_datasets serves all
    three); a local collection its configured files. A data directory written before stats.json said: unknown."""
    if source.get("source") == "ir_datasets":
        url = ir_datasets_url(source["id"])
        return {"name": name, "source": url, "qrels": url, "topics": url, "ir_datasets": source["id"]}
    if source.get("source") == "local":
        return {
            "name": name,
            "source": source.get("docs"),
            "qrels": source.get("qrels"),
            "topics": source.get("queries"),
        }
    return {"name": name, "source": UNKNOWN}


def workflow_training_data(collection: dict, source: dict, stats: dict) -> list[dict]:
    """What a workflow model trained on: the same collection's training queries, per fold (their ids are under
    ``longrank: data: split``), or the queries of ``dataset.train_id`` / ``train_queries`` where the config gave
    some (stats.json's ``query_sets`` says which in words)."""
    entry = {"name": collection["name"], "source": collection["source"]}
    if source.get("train_id"):
        entry |= {"source": ir_datasets_url(source["train_id"]), "ir_datasets": source["train_id"]}
    elif collection.get("ir_datasets"):
        entry["ir_datasets"] = collection["ir_datasets"]
    if source.get("train_qrels"):
        entry |= {"topics": source.get("train_queries"), "qrels": source["train_qrels"]}
    queries = (stats.get("query_sets") or {}).get("train")
    return [entry | ({"queries": queries} if queries else {})]


def ranker_json(folder: Path) -> dict | None:
    """An exported model's ``ranker.json`` (longrank.api.export), or None where it has no readable one."""
    try:
        return json.loads((folder / "ranker.json").read_text())
    except (OSError, ValueError):
        return None


def exported_training_data(ranker_dirs: Sequence[Path]) -> list[dict]:
    """What an exported model trained on, from its own ``ranker.json`` (``source``: the collection's name, its
    ir_datasets id, the fold): ``longrank rerank --ranker`` scores text the model never saw."""
    out = []
    for folder in ranker_dirs:
        meta = ranker_json(folder)
        if meta is None:
            out.append({"name": UNKNOWN, "source": f"{folder} (no readable ranker.json)"})
            continue
        source = meta.get("source") or {}
        entry: dict[str, Any] = {"name": source.get("dataset") or UNKNOWN, "source": UNKNOWN}
        if source.get("dataset_id"):
            entry |= {"source": ir_datasets_url(source["dataset_id"]), "ir_datasets": source["dataset_id"]}
        fold = source.get("fold")
        out.append(entry | {"queries": f"the training queries of fold {fold}", "fold": fold})
    return out


def other_data(entry: dict) -> list[dict]:
    """The spec's ``other``: the pre-trained word embeddings or encoder a model starts from (its entry's
    ``embeddings`` / ``encoder``, else its type's default); nothing for a first stage or a lexical reranker."""
    from longrank.config.model_defaults import ARCHITECTURE_DEFAULTS

    defaults = ARCHITECTURE_DEFAULTS.get(str(entry.get("type")), {})
    out = []
    embeddings = entry.get("embeddings", defaults.get("embeddings"))
    if embeddings == "glove-6b-50d":
        out.append(GLOVE)
    elif embeddings == "word2vec":
        out.append({"name": "word2vec embeddings", "source": "trained on the collection's documents (stage word2vec)"})
    elif embeddings:
        out.append({"name": "word embeddings", "source": str(embeddings)})
    encoder = entry.get("encoder", defaults.get("encoder"))
    if encoder == "minilm":
        out.append(MINILM)
    elif encoder == "random-bert-base":
        out.append({"name": "random-bert-base", "source": "none: random weights in BERT-base's shape"})
    elif encoder:
        out.append({"name": str(encoder), "source": str(encoder)})  # a Hugging Face checkpoint or a directory
    return out


def workflow_data(data_dir: Path, entry: dict, trained: bool) -> tuple[dict, dict]:
    """(the spec's ``data`` section, LongRank's extra facts) of a run made from the data stage's directory; a trained
    model's (``entry``: its config entry) says what it trained on and started from."""
    try:
        stats = json.loads((data_dir / "stats.json").read_text())
        folds = json.loads((data_dir / "folds.json").read_text())
    except (OSError, ValueError):
        stats, folds = {}, []
    source = stats.get("source") or {}
    collection = test_collection(data_dir.parent.name, source)
    spec: dict[str, Any] = {"test collection": collection}
    if trained:
        spec["training data"] = workflow_training_data(collection, source, stats)
        spec["other"] = other_data(entry)
    names = {"collection": "docs.jsonl", "topics": "queries.tsv", "qrels": "qrels.txt"}
    files: dict[str, dict] = {
        role: {"file": name, "sha256": file_sha256(data_dir / name)}
        for role, name in names.items()
        if (data_dir / name).is_file()
    }
    files["collection"] = {"documents": stats.get("num_docs"), **files.get("collection", {})}
    files["topics"] = {"queries": stats.get("num_queries"), **files.get("topics", {})}
    split = [
        {"fold": index, **{part: query_set(fold.get(part, [])) for part in ("train", "dev", "test")}}
        for index, fold in enumerate(folds)
    ]
    return spec, {"files": files, "split": split}


def given_files_data(files: dict[str, str | os.PathLike], ranker_dirs: Sequence[Path]) -> tuple[dict, dict]:
    """(``data``, extras) of a run made outside the workflow (``longrank rerank --ranker``): the given documents and
    topics are the test collection (unjudged: no qrels), the export's own files say what the model trained on."""
    collection = {
        "name": Path(files["collection"]).name,
        "source": str(files["collection"]),
        "topics": str(files["topics"]),
    }
    spec: dict[str, Any] = {"test collection": collection}
    if ranker_dirs:
        spec["training data"] = exported_training_data(ranker_dirs)
        entries = [(ranker_json(folder) or {}).get("config") or {} for folder in ranker_dirs]
        other = [item for entry in entries for item in other_data(entry)]
        spec["other"] = [item for i, item in enumerate(other) if item not in other[:i]]
    hashed = {role: {"file": str(path), "sha256": file_sha256(path)} for role, path in files.items()}
    return spec, {"files": hashed}
