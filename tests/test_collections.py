"""Collections of other shapes than Cranfield through the real workflow, each through a config written as a user
would write it (tests/collections/*.yaml over the shipped configs): 0-3 graded judgments with training queries of
their own and a TREC run as the first stage (every default model family), and long documents of thousands of words
(IRLeD's settings). Short abstracts: tests/test_short_documents.py. Each row's nDCG@10 must equal ir-measures'
computation from the run files with the collection's own grades, read from the user's qrels file, not the
workflow's copy of it."""

from __future__ import annotations

import gzip
import re

import ir_measures
import pandas as pd
import pytest

from conftest import REPO, snakemake
from longrank.io.json_yaml import read_json
from longrank.report.html import NOT_RUN_TITLE

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


def seed_runs(results, system: str) -> list:
    """The runs of a seeded model's system (train.seeds): the first seed's under the entry's name, then
    ``<model>@seed<n>`` (and ``<model>@seed<n>+<first stage>``) for the others; [] for an unseeded system."""
    model, plus, rest = system.partition("+")
    pattern = re.compile(re.escape(model) + r"@seed[0-9]+" + re.escape(plus + rest) + r"\.run")
    others = sorted(p for p in (results / "runs").glob(f"{model}@seed*.run") if pattern.fullmatch(p.name))
    return [results / "runs" / f"{system}.run", *others] if others else []


def assert_reported_ndcg_equals_ir_measures(results, qrels) -> set[str]:
    """Every row of compare's table and of the report: nDCG@10 over the test queries from the system's run file."""
    table = pd.read_csv(results / "compare" / "table.csv")
    report = (results / "report" / "report.md").read_text()
    stages = set(read_json(results / "config.json")["first_stages"])
    test = {q for fold in read_json(results / "data" / "folds.json") for q in fold["test"]}
    measure = ir_measures.parse_measure("nDCG@10")
    systems = set(table.system)
    for system in systems:
        expected = 0.0
        paths = seed_runs(results, system) or [
            results / ("candidates" if system in stages else "runs") / f"{system}.run"
        ]
        for path in paths:  # a seeded model's row: each query's mean over its seeds, so the mean of their means
            run = [r for r in ir_measures.read_trec_run(str(path)) if r.query_id in test]
            found = ir_measures.calc_aggregate([measure], [q for q in qrels if q.query_id in test], run)[measure]
            expected += found / len(paths)
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
    assert not any(line.endswith(". Efficiency") for line in report.splitlines() if line.startswith("## "))
    # listed once among the sections that did not run, with the key of each bench
    [efficiency] = [
        line for line in report.split(NOT_RUN_TITLE, 1)[1].splitlines() if line.startswith("| Efficiency |")
    ]
    for key in ("bench", "mores_speed", "mir_speed"):
        assert f"{key}.enabled: false" in efficiency, (key, efficiency)
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


def job_counts(output: str) -> dict[str, int]:
    """A dry run's job stats table (``--quiet rules``): rule -> jobs."""
    table = output.split("Job stats:", 1)[1].split("total", 1)[0]
    return {
        parts[0]: int(parts[1]) for line in table.splitlines() if len(parts := line.split()) == 2 and parts[1].isdigit()
    }


def test_seeds_each_train_and_the_comparison_reads_each_querys_mean_over_them(graded):
    """graded.yaml's knrm trains seeds 0 and 1 (``seeds: 2``): seed 0 as the entry itself, seed 1 as knrm@seed1, each
    its own training with its own seed; knrm's row is each query's mean over the two, and the report's seed section
    shows both seeds' numbers and their spread, with the per-seed rows in seeds.csv."""
    first = read_json(graded / "models" / "knrm" / "fold0" / "train_summary.json")
    second = read_json(graded / "models" / "knrm@seed1" / "fold0" / "train_summary.json")
    assert (first["hyperparameters"]["seed"], second["hyperparameters"]["seed"]) == (0, 1)
    per_seed = [pd.read_csv(graded / "eval" / f"knrm@seed{s}.tsv", sep="\t", index_col="query_id") for s in (0, 1)]
    assert not per_seed[0].equals(per_seed[1])  # two trainings, not one copied
    mean = pd.read_csv(graded / "eval" / "knrm.tsv", sep="\t", index_col="query_id")
    pd.testing.assert_frame_equal(mean, (per_seed[0] + per_seed[1]) / 2, atol=2e-6)
    seeds = pd.read_csv(graded / "report" / "seeds.csv")
    assert set(seeds["system"]) == {"knrm", "knrm+given"} and set(seeds["seed"]) == {0, 1}
    assert seeds["mean"].notna().all() and (seeds["n_queries"] == len(mean)).all()
    section = (graded / "report" / "report.md").read_text().split(". Training seeds\n", 1)[1].split("\n## ", 1)[0]
    assert "Not run" not in section and "knrm+given" in section and " ± " in section
    assert "within the spread of training seeds" in section or "the same sign for every pair of seeds" in section
    assert (graded / "report" / "figures" / "seeds.png").stat().st_size > 0


def test_an_added_seed_trains_alone(graded, tmp_path):
    """A third seed: its own training, rerank and interpolation, the two evaluations of knrm's means and its own,
    then the comparison and the report; no other model's job, and neither earlier seed's training."""
    overlay = tmp_path / "third_seed.yaml"
    overlay.write_text(
        "models:\n  knrm:\n    train: {steps: 20, batch_size: 8, eval_every: 10, patience: 2, seeds: 3}\n"
    )
    workdir = graded.parent.parent
    done = snakemake(workdir, "report", "-n", "--quiet", "rules", "--configfile", str(COLLECTIONS / "graded.yaml"),
                     str(overlay))  # fmt: skip
    counts = job_counts(done.stdout + done.stderr)
    assert counts["train"] == 1 and counts["rerank"] == 1 and counts["interpolate"] == 1, counts
    # knrm@seed2 and knrm@seed2+given alone; knrm and knrm+given as each query's mean over three seeds
    assert counts["evaluate"] == 4, counts
    assert set(counts) <= {"train", "rerank", "interpolate", "evaluate", "compare", "compare_floors", "history",
                           "report", "all", "resolved_config"}, counts  # fmt: skip


def test_export_takes_the_seed_with_the_best_dev_score_unless_one_is_named(graded, tmp_path):
    from longrank.api.export import export
    from longrank.errors import InputError

    dev = {
        seed: read_json(graded / "models" / name / "fold0" / "train_summary.json")["best_dev_ndcg10"]
        for seed, name in ((0, "knrm"), (1, "knrm@seed1"))
    }
    chosen = export(graded, "knrm", 0, tmp_path / "best")
    ranker = read_json(chosen / "ranker.json")
    assert ranker["source"]["seed"] == max(dev, key=lambda s: (dev[s], -s))
    named = read_json(export(graded, "knrm", 0, tmp_path / "second", seed=1) / "ranker.json")
    assert named["source"]["seed"] == 1 and named["config"]["train"]["seed"] == 1
    assert named["source"]["weights_of"] == "knrm@seed1" and "seeds" not in named["config"]["train"]
    assert (tmp_path / "second" / "model.safetensors").read_bytes() == (
        graded / "models" / "knrm@seed1" / "fold0" / "model.safetensors"
    ).read_bytes()
    with pytest.raises(InputError, match=r"--seed 5: knrm trained the seeds \[0, 1\]"):
        export(graded, "knrm", 0, tmp_path / "absent", seed=5)
