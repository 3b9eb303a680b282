"""Collections of other shapes than Cranfield through the real workflow, each through a config written as a user
would write it (tests/collections/*.yaml over the shipped configs): 0-3 graded judgments with training queries of
their own and a TREC run as the first stage (every default model family), and long documents of thousands of words
(IRLeD's settings). Short abstracts: tests/test_short_documents.py. Each row's nDCG@10 must equal ir-measures'
computation from the run files with the collection's own grades, read from the user's qrels file, not the
workflow's copy of it."""

from __future__ import annotations

import gzip

import ir_measures
import pandas as pd
import pytest

from conftest import REPO, snakemake
from longrank.io.json_yaml import read_json

pytestmark = pytest.mark.e2e
COLLECTIONS = REPO / "tests" / "collections"


def run_collection(tmp_path_factory, name: str, *configs: str):
    workdir = tmp_path_factory.mktemp(name)
    (workdir / "config").symlink_to(REPO / "config")  # `configfile:` resolves against the working directory
    (workdir / "collections").symlink_to(COLLECTIONS)  # the user's files, relative to where they run
    snakemake(workdir, "report", "--configfile", *configs, str(COLLECTIONS / f"{name}.yaml"))
    return workdir / "results" / name


@pytest.fixture(scope="module")
def graded(tmp_path_factory, ir_datasets_home):
    return run_collection(tmp_path_factory, "graded")


@pytest.fixture(scope="module")
def long(tmp_path_factory, ir_datasets_home):
    return run_collection(tmp_path_factory, "long", str(REPO / "config" / "irled.yaml"))


def own_qrels(name: str):
    return list(ir_measures.read_trec_qrels(str(COLLECTIONS / name / "qrels.txt")))


def assert_reported_ndcg_equals_ir_measures(results, qrels) -> set[str]:
    """Every row of compare's table and of the report: nDCG@10 over the test queries from the system's run file."""
    table = pd.read_csv(results / "compare" / "table.csv")
    report = (results / "report" / "report.md").read_text()
    stages = set(read_json(results / "config.json")["first_stages"])
    test = {q for fold in read_json(results / "data" / "folds.json") for q in fold["test"]}
    measure = ir_measures.parse_measure("nDCG@10")
    systems = set(table.system)
    for system in systems:
        path = results / ("candidates" if system in stages else "runs") / f"{system}.run"
        run = [r for r in ir_measures.read_trec_run(str(path)) if r.query_id in test]
        expected = ir_measures.calc_aggregate([measure], [q for q in qrels if q.query_id in test], run)[measure]
        reported = table[(table.system == system) & (table.measure == "nDCG@10")]["mean"].item()
        assert reported == pytest.approx(expected, abs=1e-6), system
        assert f"{expected:.3f}" in report or f"{expected:.4f}" in report, (
            f"{system}'s nDCG@10 {expected:.4f} is not in the report"
        )
    return systems


def test_graded_judgments_keep_their_own_grades(graded):
    assert read_json(graded / "config.json")["dataset"]["gains"] == {}
    relevance = read_json(graded / "data" / "stats.json")["relevance"]
    assert relevance["gains"] == {"0": 0, "1": 1, "2": 2, "3": 3} and not relevance["reverses_grades"]
    by_grade = pd.Series([q.relevance for q in own_qrels("graded")]).value_counts()
    assert relevance["judgments_by_grade"]["3"] >= by_grade[3] > 0  # training judgments add to the evaluated ones
    assert (
        "grades -> gains applied: {'0': 0, '1': 1, '2': 2, '3': 3}"
        in (graded.parent.parent / "results" / "graded" / "logs" / "data.log").read_text()
    )


def test_graded_rows_equal_ir_measures_on_the_users_grades_for_every_family(graded):
    systems = assert_reported_ndcg_equals_ir_measures(graded, own_qrels("graded"))
    for family in (
        "knrm",
        "tk",
        "tkl",
        "bert_firstp",
        "mores",
        "bi_encoder",
        "ndrm3",
        "mir",
        "given",
        "bm25",
        "query_term_matches",
    ):
        assert family in systems, family


def test_the_users_training_queries_train_and_are_never_evaluated(graded):
    folds = read_json(graded / "data" / "folds.json")
    train_only = {
        line.split("\t")[0] for line in (COLLECTIONS / "graded" / "train_queries.tsv").read_text().splitlines()
    }
    for fold in folds:
        assert train_only <= set(fold["train"]) and not train_only & (set(fold["dev"]) | set(fold["test"]))
    evaluated = set(pd.read_csv(graded / "eval" / "knrm.tsv", sep="\t")["query_id"].astype(str))
    assert evaluated and not evaluated & train_only


def test_models_rerank_the_users_run_file(graded):
    given = {(r.query_id, r.doc_id) for r in ir_measures.read_trec_run(str(COLLECTIONS / "graded" / "run.trec"))}
    reranked = {(r.query_id, r.doc_id) for r in ir_measures.read_trec_run(str(graded / "runs" / "knrm.run"))}
    assert reranked and reranked <= given


def test_a_run_without_benches_times_nothing_and_its_report_says_why(graded):
    """graded.yaml turns every bench off (bench, mores_speed, mir_speed: enabled false): no bench job ran, the
    report's efficiency section names each key, and the effectiveness table has no docs/ms column."""
    assert not list(graded.glob("bench/*.json")), sorted(p.name for p in graded.glob("bench/*"))
    report = (graded / "report" / "report.md").read_text()
    efficiency = report.split(". Efficiency\n", 1)[1].split("\n## ", 1)[0]
    for key in ("bench", "mores_speed", "mir_speed"):
        assert f"{key}.enabled: false" in efficiency, (key, efficiency)
    assert "|" not in efficiency  # no table
    assert "Docs/ms" not in report.split(". Effectiveness\n", 1)[1].split("\n## ", 1)[0]


def test_long_documents_run_through_irleds_settings(long):
    stats = read_json(long / "data" / "stats.json")
    assert stats["doc_words"]["median"] > 3000 and stats["relevance"]["gains"] == {"0": 0, "1": 1}
    systems = assert_reported_ndcg_equals_ir_measures(long, own_qrels("long"))
    assert {"bm25", "knrm", "tkl", "mir"} <= systems
    assert (
        read_json(long / "graphs" / "mir" / "stats.json")["nodes"]["passages"]["mean"] > 1
    )  # several windows a document
    with gzip.open(COLLECTIONS / "long" / "docs.jsonl.gz", "rt") as f:
        assert sum(1 for _ in f) == stats["num_docs"]
