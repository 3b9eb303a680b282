"""The first-time user's example (examples/mine.yaml over examples/mine/, README "Your own collection"): its DAG is
the few jobs a first run needs, and run for real its report has a row for BM25, the query-word count and KNRM,
with provenance beside every run. ``examples/make.py`` writes the collection the repository ships, byte for byte."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from conftest import REPO, snakemake
from docs_snippets import documented
from longrank.results.run_metadata import schema_errors

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

EXAMPLES = REPO / "examples"
CONFIG = (
    "examples/mine.yaml"  # as the user types it, from the repository root (tests/test_docs_commands.py: as the README)
)
# the compared systems, with the query-word count over whole documents; the count over the 200 words KNRM reads (its
# own floor, at its depth 50) is compared with KNRM alone (compare/floors/), in the report's sanity table
SYSTEMS = {"bm25", "query_term_matches", "knrm", "knrm+bm25"}
OWN_FLOOR = "query_term_matches@bm25-top50-first200w"


def workdir_for(tmp_path):
    """A working directory laid out as the repository root: config/ (the defaults) and examples/."""
    (tmp_path / "config").symlink_to(REPO / "config")  # `configfile:` resolves against the working directory
    (tmp_path / "examples").symlink_to(EXAMPLES)
    return tmp_path


def test_make_rewrites_the_shipped_collection(tmp_path):
    shipped = {p.name: p.read_bytes() for p in (EXAMPLES / "mine").iterdir()}
    copy = tmp_path / "examples"
    copy.mkdir()
    (copy / "make.py").write_bytes((EXAMPLES / "make.py").read_bytes())
    subprocess.run([sys.executable, str(copy / "make.py")], check=True)
    assert {p.name: p.read_bytes() for p in (copy / "mine").iterdir()} == shipped
    assert len((EXAMPLES / "mine" / "docs.jsonl").read_text().splitlines()) == 50
    assert len((EXAMPLES / "mine" / "queries.tsv").read_text().splitlines()) == 10
    grades = {line.split()[3] for line in (EXAMPLES / "mine" / "qrels.txt").read_text().splitlines()}
    assert grades == {"0", "1", "2"}


def test_make_unseen_rewrites_the_collection_the_example_never_saw(tmp_path):
    files = ("docs.jsonl", "queries.tsv", "bm25.trec")  # (a run reranked from it caches hashes beside them)
    copy = tmp_path / "examples"
    copy.mkdir()
    (copy / "make_unseen.py").write_bytes((EXAMPLES / "make_unseen.py").read_bytes())
    subprocess.run([sys.executable, str(copy / "make_unseen.py")], check=True, capture_output=True)
    assert sorted(p.name for p in (copy / "unseen").iterdir()) == sorted(files)
    assert all((copy / "unseen" / f).read_bytes() == (EXAMPLES / "unseen" / f).read_bytes() for f in files)
    seen = {w for p in (EXAMPLES / "mine").iterdir() for w in re.findall(r"\w+", p.read_text().lower())}
    queries = dict(line.split("\t") for line in (EXAMPLES / "unseen" / "queries.tsv").read_text().splitlines())
    assert not {w for q in queries.values() for w in q.split()} & seen  # no query word of the training collection's


def test_the_example_config_keeps_nothing_of_cranfield_and_one_model():
    config = yaml.safe_load((EXAMPLES / "mine.yaml").read_text())
    assert config["dataset"]["source"] == "local" and config["dataset"]["name"] == "mine"
    assert [s["name"] for s in config["first_stages"]] == ["bm25"]
    defaults = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["models"]
    off = {name for name, entry in config["models"].items() if entry.get("enabled") is False}
    assert off == set(defaults) - {"knrm"}  # every other default model, a new one included, is switched off
    assert config["mores_speed"] == {"enabled": False}


def test_the_example_dry_run_is_the_first_runs_jobs(tmp_path):
    done = snakemake(workdir_for(tmp_path), "-n", "report", "--configfile", CONFIG)
    output = done.stdout + done.stderr
    assert "Exception" not in output, output[-4000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", output, re.M))
    assert counts["total"] == "19", output[-3000:]  # the target is rule report itself (no job of its own)
    assert counts["satisfiable"] == "1"  # the measures checked against the judgments before KNRM trains
    assert counts["compare_floors"] == "1" and counts["history"] == "1"  # KNRM's setting joins its history
    assert counts["train"] == counts["rerank"] == counts["candidates"] == "1"
    assert counts["sanity"] == "2"  # query_term_matches and KNRM's own floor
    assert not {"annotate", "graphs", "mores_speed", "word2vec", "pseudo_queries"} & set(counts)


@pytest.mark.e2e
def test_the_example_runs_to_a_report_with_bm25_the_query_word_count_and_knrm(tmp_path, ir_datasets_home, monkeypatch):
    workdir = workdir_for(tmp_path)
    done = snakemake(workdir, "report", "--configfile", CONFIG)
    results = workdir / "results" / "mine"
    # the console shows training's dev evaluations (not only its log) and ends with where the report is
    assert re.search(r"^\[train\] knrm fold 0 step \d+/\d+: loss [\d.]+, dev nDCG@10 [\d.]+", done.stdout, re.M)
    assert f"LongRank report: {results / 'report' / 'index.html'}" in done.stdout
    table = pd.read_csv(results / "compare" / "table.csv")
    assert set(table.system) == SYSTEMS
    floor_pairs = pd.read_csv(results / "compare" / "floors" / "pairs.csv")
    assert set(zip(floor_pairs.system_a, floor_pairs.system_b)) == {("knrm", OWN_FLOOR)}
    report = (results / "report" / "report.md").read_text()
    for system in SYSTEMS:
        assert re.search(rf"^\| \w \| {re.escape(system)} \|", report, re.M), f"no row for {system}"
    assert (results / "report" / "index.html").exists()
    # it answers first: the verdict line, then each system query by query; sections it has no data for are listed
    # once at the end, each with why, not left as stubs
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings[0] == "## 1. Verdict" and any(h.endswith(". Per query") for h in headings), headings
    assert "*Not run:" not in report and headings[-1].endswith("Not run in this report")
    for run in [*results.glob("candidates/*.run"), *results.glob("runs/*.run")]:
        meta = yaml.safe_load(run.with_name(run.name + ".meta.yaml").read_text())
        assert meta["implementation"]["source"]["commit"] and meta["longrank"]["run"]["wall_time_s"] >= 0
        assert schema_errors(meta) == [], run  # every record the workflow wrote follows ir_metadata's checklists
        # each written by its stage's command line, as the Snakemake rule ran it
        assert meta["implementation"]["executable"]["cmd"].startswith("python -m longrank "), run
    commit = meta["implementation"]["source"]["commit"]
    # ir_metadata: a trained model's run says what it reranked, on which data and split, and what trained it
    meta = yaml.safe_load((results / "runs" / "knrm.run.meta.yaml").read_text())
    assert meta["schema-version"] == "0.1" and meta["tag"] == "knrm"
    assert meta["implementation"]["executable"]["cmd"].startswith("python -m longrank rerank ")
    bm25, knrm = meta["method"]["retrieval"]  # the two-stage pipeline, its first stage from bm25.run's own record
    assert bm25["name"] == "bm25" and bm25["method"] == "bm25" and "reranks" not in bm25
    assert knrm["name"] == "knrm" and knrm["reranks"] == "bm25" and knrm["params"]["rerank_depth"] == 50
    assert knrm["method"] == "knrm" and meta["method"]["automatic"] is True
    docs_sha = hashlib.sha256((results / "data" / "docs.jsonl").read_bytes()).hexdigest()
    files = meta["longrank"]["data"]["files"]
    assert files["collection"] == {"documents": 50, "file": "docs.jsonl", "sha256": docs_sha}
    assert files["qrels"]["sha256"] == hashlib.sha256((results / "data" / "qrels.txt").read_bytes()).hexdigest()
    assert meta["data"]["test collection"]["name"] == "mine"
    [training] = meta["data"]["training data"]  # the same collection's training queries
    assert training["name"] == "mine" and "train part" in training["queries"]
    assert meta["data"]["other"] == [
        {"name": "GloVe embeddings (6B tokens, 50 dimensions)", "source": "https://nlp.stanford.edu/projects/glove/"}
    ]
    [split] = meta["longrank"]["data"]["split"]
    assert split["test"]["count"] + split["dev"]["count"] + split["train"]["count"] == 10
    assert split["test"]["ids"] == sorted(json.loads((results / "data" / "folds.json").read_text())[0]["test"])
    [trained] = meta["longrank"]["method"]["training"]
    manifest = json.loads((results / "models" / "knrm" / "fold0" / "model.manifest.json").read_text())
    assert trained["weights_sha256"] == manifest["files"]["model.safetensors"]["sha256"] and trained["seed"] == 0
    mixed = yaml.safe_load((results / "runs" / "knrm+bm25.run.meta.yaml").read_text())
    assert [c["name"] for c in mixed["method"]["retrieval"]] == ["bm25", "knrm", "knrm+bm25"]
    assert mixed["method"]["retrieval"][-1]["interpolates"] == ["knrm", "bm25"]
    assert f"Code: commit {commit}" in report

    # the README's next two commands, read from it and run as written from the working directory: the trained KNRM
    # exported, then reranking a collection it never saw
    from longrank.api import UnknownQueryWarning
    from longrank.cli import main

    export, rerank = [words for where, words in documented("longrank") if where.startswith("README.md")]
    assert export[1] == "export" and rerank[1] == "rerank"
    monkeypatch.chdir(workdir)
    main(export[1:])
    with pytest.warns(UnknownQueryWarning, match=r"query 'u4' has no word .* \(2 of 2 query words unknown, 100%\)"):
        main(rerank[1:])
    unseen = EXAMPLES / "unseen"
    out = workdir / rerank[rerank.index("--out") + 1]
    lines = [line.split() for line in out.read_text().splitlines()]
    first = [line.split()[2] for line in (unseen / "bm25.trec").read_text().splitlines() if line.startswith("u4 ")]
    assert [d for q, _, d, *_ in lines if q == "u4"] == first  # all alike: the first stage's order
    for qid in ("u1", "u2", "u3"):  # told apart by words KNRM never trained on
        assert len({s for q, _, _, _, s, _ in lines if q == qid}) == 8
    exported = yaml.safe_load(out.with_name(out.name + ".meta.yaml").read_text())
    assert schema_errors(exported) == []
    # the exported model trained on the workflow's collection ("mine"), as the export's ranker.json says
    assert [d["name"] for d in exported["data"]["training data"]] == ["mine"]
