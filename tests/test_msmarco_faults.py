"""Faults on the TREC DL path, through the real ``msmarco-document/*`` loaders over a synthetic MS MARCO
(tests/collections/msmarco-mini/make.py, ``missing_documents=True``) whose collection lacks the relevant document of
a dev query and the grade-3 document of a judged query of each year, which the qrels and the official top-100 lists
still name: the data stage counts and reports them (stats.json, the report's provenance) and the ``official`` first
stage drops them with a warning and counts them (its stats.json); nothing crashes. The workflow runs the two stages
only (``snakemake <official.run>``), in an ir_datasets cache of its own."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import REPO, snakemake_command
from rehearsal import make_msmarco, rehearsal

pytestmark = pytest.mark.stage


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    home = tmp_path_factory.mktemp("ir_datasets")
    make_msmarco(home, train_queries=20, dev_queries=10, background_docs=20, missing_documents=True)
    workdir = tmp_path_factory.mktemp("faulty")
    (workdir / "config").symlink_to(REPO / "config")
    target = "results/trec-dl-2019/candidates/official.run"
    cmd, env = snakemake_command(workdir, target, "--configfile", *rehearsal("2019"))
    env["IR_DATASETS_HOME"] = str(home)
    done = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    results = workdir / "results" / "trec-dl-2019"
    logs = "".join(p.read_text() for p in sorted((results / "logs").glob("*.log")))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + logs[-3000:]
    return results


def test_judged_and_dev_documents_missing_from_the_collection_are_counted(faulty):
    stats = json.loads((faulty / "data" / "stats.json").read_text())
    missing = stats["missing_judged_documents"]
    # the judged query keeps its other relevant documents: still a test query (43 of 43)
    assert {k: missing["test"][k] for k in ("judgments", "relevant", "documents")} == {
        "judgments": 1,
        "relevant": 1,
        "documents": 1,
    }
    assert missing["test"]["queries_without_relevant"] == [] and stats["num_evaluable_queries"] == 43
    # the dev query had one relevant document: left out of the dev set, named
    assert missing["dev"]["judgments"] == 1 and len(missing["dev"]["queries_without_relevant"]) == 1
    assert stats["folds"] == [{"train": 20, "dev": 9, "test": 43}]
    assert "train" not in missing
    log = (faulty / "logs" / "data.log").read_text()
    assert "dataset.qrels: 1 judgments (1 relevant) name 1 documents not in the collection, dropped" in log
    assert "dataset.dev_id: 1 judgments (1 relevant) name 1 documents not in the collection, dropped" in log


def test_the_official_lists_documents_the_collection_lacks_are_dropped_with_a_warning(faulty):
    stats = json.loads((faulty / "candidates" / "official.stats.json").read_text())
    assert stats["method"] == "scoreddocs" and stats["unknown_documents_dropped"] == 3  # the three left out
    assert stats["unknown_document_entries_dropped"] >= 3
    docs = {json.loads(line)["doc_id"] for line in (faulty / "data" / "docs.jsonl").read_text().splitlines()}
    ranked = {line.split()[2] for line in (faulty / "candidates" / "official.run").read_text().splitlines()}
    assert ranked and ranked <= docs
    log = (faulty / "logs" / "candidates_official.log").read_text()
    assert "first stage 'official': 3 document ids not in the collection dropped" in log


def test_the_report_says_what_was_dropped():
    from longrank.report.provenance import missing_judged

    record = {"judgments": 2, "relevant": 1, "documents": 2, "queries_without_relevant": ["7"], "examples": ["7:D1"]}
    text = missing_judged({"dev": record})
    assert (
        "dev: 2 judgments (1 relevant) of 2 documents, e.g. 7:D1; 1 queries left with no relevant document (7)" in text
    )
    assert missing_judged({}) == ""


def test_the_generator_is_deterministic_and_writes_ir_datasets_layout(tmp_path):
    sizes = dict(train_queries=5, dev_queries=3, background_docs=5)
    counts = [make_msmarco(tmp_path / name, **sizes) for name in ("a", "b")]
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert [str(f) for f in files] == [
        "msmarco-document/collection.tsv.gz",
        *(f"msmarco-document/{s}/{f}" for s in ("dev", "train") for f in ("ms.run.gz", "qrels.gz", "queries.tsv.gz")),
        *(f"msmarco-document/trec-dl-{y}/{f}" for y in (2019, 2020) for f in ("ms.run.gz", "qrels", "queries.tsv.gz")),
    ]
    assert counts[0] == counts[1] and counts[0]["trec-dl-2019 queries"] == 43
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
