"""End to end: the real Snakemake DAG on Cranfield (through ir_datasets, offline) with tiny settings, then
what a user relies on afterwards: report numbers equal ir-measures on the run files, and a changed
hyper-parameter reruns only the jobs it affects."""

from __future__ import annotations

import re

import ir_measures
import pandas as pd
import pytest
import yaml

from longrank.io.json_yaml import read_json

from conftest import E2E_CONFIG, REPO, snakemake, snakemake_dry_runs

pytestmark = pytest.mark.e2e


FIRST_STAGES = yaml.safe_load(E2E_CONFIG.read_text())["first_stages"]
# The changes the tests below make to the end-to-end config, each merged over it in a dry run of the finished run
# (``planned``); None: no change.
CHANGES = {
    "none": None,
    "knrm_doc_len": {"models": {"knrm": {"max_doc_len": 150}}},
    "first_stage_k1": {"first_stages": [{**FIRST_STAGES[0], "k1": 1.2}, *FIRST_STAGES[1:]]},
    "titles_count": {"pseudo_queries": {"titles": {"count": 150}}},
    "mir_steps": {"models": {"mir": {"train": {"steps": 3}}}},
    "mir_p2p_top_k": {"mir_graphs": {"mir": {"p2p_top_k": 3}}},
    "mir_pretrain": {"models": {"mir": {"train": {"pretrain": {"queries": "titles", "steps": 2}}}}},
    "measures": {"evaluation": {"measures": ["nDCG@10", "RR@10", "AP@100", "nDCG@100", "R@100", "P(rel=1)@5"]}},
}


@pytest.fixture(scope="module")
def planned(workflow_run, tmp_path_factory) -> dict[str, dict[str, int] | str]:
    """Jobs a dry run of the finished run would execute, by rule, with each of ``CHANGES`` merged over the
    end-to-end config; all the dry runs in one batch (conftest.snakemake_dry_runs). A dry run that failed gives its
    output instead, for the test that reads it to fail with."""
    jobs = {}
    for key, change in CHANGES.items():
        files = [str(E2E_CONFIG)]
        if change:
            (workflow_run / f"change_{key}.yaml").write_text(yaml.safe_dump(change))
            files.append(str(workflow_run / f"change_{key}.yaml"))
        jobs[key] = (workflow_run, ["--quiet", "rules", "--configfile", *files])
    done = snakemake_dry_runs(jobs, tmp_path_factory.mktemp("dry_runs"))
    return {key: run.output if run.returncode != 0 else jobs_by_rule(run.output) for key, run in done.items()}


def jobs_by_rule(output: str) -> dict[str, int]:
    jobs = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] != "total":
            jobs[parts[0]] = int(parts[1])
    return jobs


def planned_jobs(planned: dict, change: str) -> dict[str, int]:
    jobs = planned[change]
    assert isinstance(jobs, dict), f"snakemake -n with change {change!r} failed:\n{jobs[-5000:]}"
    return jobs


def test_report_is_built_with_every_system(workflow_run):
    results = workflow_run / "results" / "cranfield"
    html = (results / "report" / "index.html").read_text()
    config = read_json(results / "config.json")
    for model, entry in config["models"].items():  # a disabled entry: named in the folded config's summary only
        assert model in html.split("<details>")[0] if entry.get("enabled", True) else model in html
    assert "bm25" in html and "data:image/png;base64" in html
    assert "split 0; word2vec 0; training 0 (" in html and "gensim" in html  # the seeds and versions a rerun needs
    assert (results / "report" / "report.md").exists()


def test_every_report_section_shows_data_and_no_cell_is_empty(workflow_run):
    """A reader sees a value (or "–" where one does not apply) in every table cell, and every section holds a
    table or a plot, or says why it has none."""
    html = (workflow_run / "results" / "cranfield" / "report" / "index.html").read_text()
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)]
    assert cells and all(cells), f"{cells.count('')} empty cells of {len(cells)}"
    for section in re.split(r"<h2[^>]*>", html)[1:]:
        title, body = section.split("</h2>", 1)
        said_why = re.search(r"Not run: \S", body)  # Section.not_run: the key or the missing input follows
        assert "<table" in body or "<img" in body or said_why, f"section {title!r} shows nothing"


def test_reported_means_equal_ir_measures_on_the_run_files(workflow_run):
    results = workflow_run / "results" / "cranfield"
    folds = read_json(results / "data" / "folds.json")
    test_qids = {q for f in folds for q in f["test"]}
    qrels = [q for q in ir_measures.read_trec_qrels(str(results / "data" / "qrels.txt")) if q.query_id in test_qids]
    table = pd.read_csv(results / "compare" / "table.csv")
    runs = {
        "bm25": results / "candidates" / "bm25.run",
        "knrm": results / "runs" / "knrm.run",
        "knrm+bm25": results / "runs" / "knrm+bm25.run",
    }
    for system, path in runs.items():
        run = [r for r in ir_measures.read_trec_run(str(path)) if r.query_id in test_qids]
        expected = ir_measures.calc_aggregate(
            [ir_measures.parse_measure("nDCG@10"), ir_measures.parse_measure("R@100")], qrels, run
        )
        for measure, value in expected.items():
            reported = table[(table.system == system) & (table.measure == str(measure))]["mean"].item()
            assert reported == pytest.approx(value, abs=1e-6), (system, measure)  # table.csv keeps 6 decimals


def test_changing_one_model_reruns_only_that_model(planned):
    assert planned_jobs(planned, "none") == {}, "a finished workflow has nothing to do"
    jobs = planned_jobs(planned, "knrm_doc_len")
    assert jobs.get("train") == 1 and jobs.get("rerank") == 1 and jobs.get("bench") == 1
    assert jobs.get("interpolate") == 1 and jobs.get("evaluate") == 3  # knrm, knrm+bm25, its floor; bm25 is untouched
    # knrm's own floor now counts over its 150 words (a new system); query_term_matches and the 200-word floor, which
    # knrm_pretrained still reads, are untouched
    assert jobs.get("sanity") == 1
    assert "data" not in jobs and "candidates" not in jobs
    assert jobs.get("compare") == 1 and jobs.get("compare_floors") == 1 and jobs.get("report") == 1
    assert jobs.get("history") == 1  # knrm's new setting joins its history; no other model's is touched


def test_changing_the_measures_reruns_their_check_and_the_evaluations_not_a_training(planned):
    """Every training waits for the measures' check (rule satisfiable) through an ancient input: new measures rerun
    the check and what evaluates, never a model."""
    jobs = planned_jobs(planned, "measures")
    assert jobs.get("satisfiable") == 1 and jobs.get("evaluate", 0) > 0 and jobs.get("compare") == 1
    assert not {"data", "train", "train_pretrain", "rerank", "interpolate", "candidates"} & set(jobs), jobs


def test_changing_one_first_stage_reruns_only_what_reranks_it(workflow_run, planned):
    stages = FIRST_STAGES
    jobs = planned_jobs(planned, "first_stage_k1")
    config = read_json(workflow_run / "results" / "cranfield" / "config.json")
    on_first = [
        m for m, e in config["models"].items() if e.get("enabled", True) and e["first_stage"] == stages[0]["name"]
    ]
    assert 0 < len(on_first) < len(config["models"])  # the e2e config has a model on the second first stage
    # its candidates, and those of a first stage a retrained model produces (NDRM's fullrank) are made again
    produced = [s for s in stages if s["method"] == "model" and s["model"] in on_first]
    assert "data" not in jobs and jobs.get("candidates") == 1 + len(produced)
    assert jobs.get("train") == len(on_first) and jobs.get("rerank") == len(on_first)


def test_two_first_stages_give_rows_for_both_and_a_comparison(workflow_run):
    results = workflow_run / "results" / "cranfield"
    table = pd.read_csv(results / "compare" / "table.csv")
    for system in ("bm25", "bm25_b75", "ndrm3_full", "knrm_b75", "knrm_b75+bm25_b75"):
        assert system in set(table.system), system
    # knrm_b75 reranked the second first stage: below its rerank depth its run is that stage's order
    ranked = ir_measures.read_trec_run(str(results / "runs" / "knrm_b75.run"))
    assert {r.doc_id for r in ranked} <= {
        r.doc_id for r in ir_measures.read_trec_run(str(results / "candidates" / "bm25_b75.run"))
    }
    html = (results / "report" / "index.html").read_text()
    assert "First stages" in html and "bm25_b75" in html


def test_pretraining_and_hdct_run_through_the_workflow(workflow_run):
    results = workflow_run / "results" / "cranfield"
    table = pd.read_csv(results / "compare" / "table.csv")
    assert {"hdct", "knrm_pretrained"} <= set(table.system)
    assert read_json(results / "models" / "knrm_pretrained" / "pretrained" / "train_summary.json")["steps_run"] == 10
    assert read_json(results / "pseudo_queries" / "titles" / "stats.json")["pseudo_queries"] >= 190
    assert (
        read_json(results / "candidates" / "hdct.stats.json")["documents"]
        == read_json(results / "data" / "stats.json")["num_docs"]
    )
    html = (results / "report" / "index.html").read_text()
    assert "Best pseudo-dev" in html and "What pre-training changed" in html


def test_changing_a_pseudo_query_set_reruns_only_what_reads_it(planned):
    jobs = planned_jobs(planned, "titles_count")
    assert jobs.get("pseudo_queries") == 1 and jobs.get("train_pretrain") == 1  # knrm_pretrained pre-trains on it
    assert jobs.get("graphs") == 1 and "annotate" not in jobs  # MIR's graph set weights its term pivots with it
    assert jobs.get("train") == 3  # knrm_pretrained, mir and mir_no_graph
    assert "data" not in jobs and "candidates" not in jobs and "hdct" not in jobs  # HDCT reads the titles, not this set


def test_mir_and_an_ablation_share_one_graph_set_and_reach_the_report(workflow_run):
    results = workflow_run / "results" / "cranfield"
    table = pd.read_csv(results / "compare" / "table.csv")
    assert {"mir", "mir+bm25", "mir_no_graph"} <= set(table.system)
    stats = read_json(results / "graphs" / "mir" / "stats.json")
    assert stats["documents"] == read_json(results / "data" / "stats.json")["num_docs"]
    assert (results / "annotations" / "stats.json").exists() and not (results / "artifacts" / "mir").exists()
    speed = read_json(results / "bench" / "mir.speed.json")
    assert set(speed["by_length"]) == {"64", "96"} and speed["graph_ms_per_document"] > 0
    assert all(v["ratio"] > 0 for v in speed["by_length"].values())
    assert all(len(row) == len(speed["columns"]) for row in speed["rows"])  # a lost cell shifts the report's columns
    assert speed["side_by_side"] and set(speed["docs_per_ms"]) == {"mir"}  # not the ablation: another architecture
    html = (results / "report" / "index.html").read_text()
    assert "MIR ablations" in html and "query group" in html and "MIR against BERT-MaxP" in html


def test_a_mir_training_key_reruns_no_graph_stage_and_a_graph_key_reruns_its_readers(planned):
    jobs = planned_jobs(planned, "mir_steps")
    assert jobs.get("train") == 1 and "graphs" not in jobs and "annotate" not in jobs
    jobs = planned_jobs(planned, "mir_p2p_top_k")
    assert jobs.get("graphs") == 1 and "annotate" not in jobs and jobs.get("train") == 2  # mir and its ablation
    assert "data" not in jobs and "candidates" not in jobs and "pseudo_queries" not in jobs


def test_a_pretrained_mir_reads_its_own_graph_set_of_the_pseudo_queries_positives(planned):
    jobs = planned_jobs(planned, "mir_pretrain")
    # the positives without their titles, graphed once for pre-training; the fine-tuning reads the collection's set
    assert jobs.get("graphs_pretrain") == 1 and jobs.get("train_pretrain") == 1 and jobs.get("train") == 1
    assert "graphs" not in jobs and "annotate" not in jobs and "pseudo_queries" not in jobs


def test_bad_config_names_the_key_and_the_rule(tmp_path):
    (tmp_path / "config").symlink_to(REPO / "config")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "first_stages": [{"name": "bm25", "method": "bm25", "top_k": "many"}],
                "models": {"knrm": {"train": {"epochs": 2}}},
            }
        )
    )
    done = snakemake(tmp_path, "-n", "--configfile", str(bad), check=False)
    assert done.returncode != 0
    assert (
        "config key first_stages.0.top_k: 'many' is not of type 'integer' (schema rule 'type')"
        in done.stderr + done.stdout
    )
    assert "config key models.knrm.train" in done.stderr + done.stdout and "'epochs'" in done.stderr + done.stdout
