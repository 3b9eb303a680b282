"""The learnability study's collection (tests/collections/msmarco-mini/make.py --learnability,
docs/studies/learnability.md): deterministic, its associated ("hidden") words in no query but in the relevant
documents and in no judged non-relevant one, the same documents and test queries at every training-set size; and
config/studies/learnability.yaml resolves to the five models it studies and its NDRM3 ablation (tests/test_config_matrix.py dry-runs it, from
its header, with every other overlay)."""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

from longrank.validation.validate import validate_config
from longrank.resolved_config import resolved_models
from longrank.config.files import merged
from rehearsal import generator

SMALL = dict(learnability=True, train_queries=20, train_pool=40, dev_queries=10, judged_queries=6, background_docs=10)


def files(home: Path) -> dict[str, str]:
    root = home / "msmarco-document"
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def read(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


def collection(home: Path) -> dict[str, set[str]]:
    text = read(home / "msmarco-document" / "collection.tsv.gz")
    return {
        doc_id: set(body.split())
        for doc_id, body in re.findall(r"<DOCNO>(\S+)</DOCNO>\n<TEXT>\n[^\n]*\n(.*?)\n</TEXT>", text, re.S)
    }


def test_the_same_arguments_write_the_same_bytes(tmp_path):
    make = generator().make
    assert make(tmp_path / "a", **SMALL) == make(tmp_path / "b", **SMALL)
    assert files(tmp_path / "a") == files(tmp_path / "b")


def test_associated_words_are_in_no_query_and_mark_the_relevant_documents(tmp_path):
    module = generator()
    module.make(tmp_path, **SMALL)
    root = tmp_path / "msmarco-document"
    associated = set(module.ASSOCIATED.values())
    docs = collection(tmp_path)  # title + body
    checked = {0: 0, 1: 0, 2: 0, 3: 0}
    for subset in ("train", "dev", "trec-dl-2019", "trec-dl-2020"):
        queries = dict(line.split("\t") for line in read(root / subset / "queries.tsv.gz").splitlines())
        qrels = root / subset / ("qrels.gz" if subset in ("train", "dev") else "qrels")
        for query_id, text in queries.items():
            assert not set(text.split()) & associated, f"{subset} query {query_id} has an associated word: {text}"
        for line in read(qrels).splitlines():
            query_id, _, doc_id, grade = line.split()
            topic = [w for w in queries[query_id].split() if w in module.ASSOCIATED]
            assert len(topic) == 3, queries[query_id]
            own = {module.ASSOCIATED[w] for w in topic}
            assert set(topic) <= docs[doc_id], "every judged document has the query's topic words"
            grade = 3 if subset in ("train", "dev") else int(grade)  # MS MARCO's single relevant document: grade 3
            assert len(own & docs[doc_id]) == grade, f"{subset} {query_id} {doc_id} grade {grade}"
            assert len(docs[doc_id] & associated) >= 3, "every judged document carries three associated words"
            checked[grade] += 1
    assert all(checked.values()), checked  # every grade was seen, non-relevant included


def test_the_training_query_pool_keeps_documents_and_test_queries(tmp_path):
    make = generator().make
    small = make(tmp_path / "small", **SMALL)
    large = make(tmp_path / "large", **{**SMALL, "train_queries": 40})
    assert (small["train queries"], large["train queries"]) == (20, 40)
    a, b = files(tmp_path / "small"), files(tmp_path / "large")
    assert {k for k in a if a[k] != b[k]} == {"train/queries.tsv.gz", "train/qrels.gz", "train/ms.run.gz"}
    first = read(tmp_path / "small/msmarco-document/train/queries.tsv.gz")
    assert read(tmp_path / "large/msmarco-document/train/queries.tsv.gz").startswith(first)


def test_the_config_trains_the_studied_models_on_the_generated_collection():
    config = validate_config(merged(("config/studies/learnability.yaml",)))
    assert config["dataset"]["id"].startswith("msmarco-document/") and config["dataset"]["train_id"]
    enabled = {name for name, entry in config["models"].items() if entry.get("enabled", True)}
    assert enabled <= set(resolved_models(config["models"]))
    assert enabled == {"knrm", "tk", "tkl", "ndrm3", "bert_firstp", "ndrm3_glove"}
    assert list(config["first_stages"]) == ["bm25"]
