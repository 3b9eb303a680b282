"""The learnability study's collection (tests/collections/msmarco-mini/make.py --learnability,
docs/studies/learnability.md): deterministic, its associated ("hidden") words in no query but in the relevant
documents and in no judged non-relevant one, the same documents and test queries at every training-set size; and
config/studies/learnability.yaml resolves to the five models it studies and its NDRM3 ablation (tests/test_config_matrix.py dry-runs it, from
its header, with every other overlay)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import re
from pathlib import Path

import numpy as np
import pandas as pd

from longrank.validation.validate import validate_config
from longrank.resolved_config import resolved_models
from longrank.config.files import merged
from conftest import REPO
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


GUARD = ("config/studies/learnability.yaml", "config/studies/learnability-guard.yaml")


def guard_module():
    spec = importlib.util.spec_from_file_location("learnability_guard", REPO / "benchmarks" / "learnability_guard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_guard_trains_one_word_model_ndrm3_and_one_encoder_and_the_old_recipe_changes_ndrm3_alone():
    guard = validate_config(merged(GUARD))
    enabled = {name for name, entry in guard["models"].items() if entry.get("enabled", True)}
    assert enabled == set(guard_module().FAMILIES) == {"knrm", "ndrm3_glove", "bert_firstp"}
    models = resolved_models(guard["models"])
    assert models["ndrm3_glove"]["train"]["scoring_lr"] == 0.05  # the fixed recipe: config/config.yaml's
    before = resolved_models(
        validate_config(merged((*GUARD, "config/studies/learnability-guard-ndrm3-before-fix.yaml")))["models"]
    )
    assert before["ndrm3_glove"]["train"]["scoring_lr"] == before["ndrm3_glove"]["train"]["lr"] == 0.001
    assert {m: e for m, e in before.items() if m != "ndrm3_glove"} == {
        m: e for m, e in models.items() if m != "ndrm3_glove"
    }


def test_the_guard_passes_a_family_above_bm25_by_its_margin_and_fails_the_rest(tmp_path):
    """On the compare stage's own tables: a family clearly above BM25 passes, one level with it or below fails."""
    from longrank.cli import main
    from longrank.evaluate.metrics import write_eval_tsv

    rng = np.random.default_rng(0)
    queries = pd.Index([f"q{i}" for i in range(40)], name="query_id")
    base = rng.uniform(0.3, 0.7, 40)
    offsets = {"bm25": 0.0, "knrm": 0.1, "ndrm3_glove": 0.005, "bert_firstp": -0.05}
    for system, offset in offsets.items():
        frame = pd.DataFrame({"nDCG@10": np.clip(base + offset + rng.normal(0, 0.01, 40), 0, 1)}, index=queries)
        write_eval_tsv(tmp_path / "eval" / f"{system}.tsv", frame)
    main(["compare", "--eval-dir", str(tmp_path / "eval"), "--systems", *offsets, "--bootstrap", "50",
          "--out-dir", str(tmp_path / "compare")])  # fmt: skip
    pairs, table = (pd.read_csv(tmp_path / "compare" / f"{name}.csv") for name in ("pairs", "table"))
    found = {model: (passed, line) for model, passed, line in guard_module().verdicts(pairs, table, 0.02, 0.05)}
    assert found["knrm"][0] and found["knrm"][1].startswith("PASS knrm (a word model): nDCG@10 ")
    assert not found["ndrm3_glove"][0] and "needs >= +0.02" in found["ndrm3_glove"][1]  # above, by less than the margin
    assert not found["bert_firstp"][0] and found["bert_firstp"][1].startswith("FAIL bert_firstp")
