"""benchmarks/scaling.py: the synthetic MS MARCO-shaped collection, the stages' commands (the workflow's own, from
its dry run) and the first stages run with them at a tiny size, and the fit / extrapolation."""

from __future__ import annotations

import importlib.util
import json
import os
import types
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "scaling.py"


@pytest.fixture(scope="module")
def scaling():
    spec = importlib.util.spec_from_file_location("longrank_bench_scaling", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def collection(scaling, tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic")
    info = scaling.generate_collection(out, n_docs=200, n_queries=20, seed=3)
    docs = {}
    with open(out / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            assert set(record) == {"doc_id", "text"}
            docs[record["doc_id"]] = record["text"]
    queries = dict(
        line.rstrip("\n").split("\t")
        for line in (out / "queries.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    )
    qrels = [line.split() for line in (out / "qrels.txt").read_text(encoding="utf-8").splitlines()]
    return out, info, docs, queries, qrels


def test_counts_and_formats(collection):
    _, info, docs, queries, qrels = collection
    assert len(docs) == info["n_docs"] == 200
    assert len(queries) == info["n_queries"] == 20
    assert len(qrels) == info["judgments"]
    assert all(len(row) == 4 and row[1] == "0" and row[3] == "1" for row in qrels)
    per_query = Counter(row[0] for row in qrels)
    assert set(per_query) == set(queries) and all(1 <= n <= 3 for n in per_query.values())
    assert all(3 <= len(text.split()) <= 8 for text in queries.values())
    assert all(not qid.startswith("query") for qid in queries)  # no header line


def test_relevant_documents_exist_and_contain_the_query(collection):
    _, _, docs, queries, qrels = collection
    for qid, _, doc_id, _ in qrels:
        assert doc_id in docs
        assert set(queries[qid].split()) <= set(docs[doc_id].split()), (qid, doc_id)


def test_deterministic(scaling, collection, tmp_path):
    out, *_ = collection
    scaling.generate_collection(tmp_path, n_docs=200, n_queries=20, seed=3)
    for name in ("docs.jsonl", "queries.tsv", "qrels.txt"):
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes()


def test_length_distribution_is_ms_marco_shaped(scaling):
    lengths = scaling.sample_doc_lengths(np.random.default_rng(0), 200_000)
    assert 550 <= np.median(lengths) <= 610  # the log-normal's median: 580 words
    assert 1000 <= lengths.mean() <= 1200  # its mean: 1,100 words
    assert np.percentile(lengths, 99) > 8000  # a long tail
    assert lengths.min() >= scaling.MIN_DOC_WORDS and lengths.max() <= scaling.MAX_DOC_WORDS


def test_words_follow_zipf(collection, scaling):
    _, info, docs, _, _ = collection
    counts = Counter(word for text in docs.values() for word in text.split())
    ranked = [n for _, n in counts.most_common()]
    assert ranked[0] > 30 * ranked[99]  # Zipf s ~ 1.05: about 100^1.05 = 126 times
    assert counts.most_common(1)[0][0] == scaling.synthetic_word(0)
    assert len(counts) == info["word_types"] < scaling.VOCAB_SIZE
    assert len({scaling.synthetic_word(r) for r in range(20_000)}) == 20_000  # one word per rank


@pytest.fixture(scope="module")
def planned(scaling, collection, tmp_path_factory):
    _, info, *_ = collection
    config = scaling.workflow_config(info, steps=7)
    return config, scaling.plan(tmp_path_factory.mktemp("plan"), config, cores=1, env=dict(os.environ))


def test_every_stage_runs_its_rules_job_from_the_workflows_plan(scaling, planned):
    """Each stage's command is the job the workflow plans for the benchmark's config (plan raises when a stage's job
    is missing or of another rule), so a rule's changed command line is the benchmark's too."""
    config, jobs = planned
    assert set(scaling.STAGE_OUTPUTS) == set(scaling.STAGES)
    for stage, path in scaling.STAGE_OUTPUTS.items():
        job = jobs[path]
        rule = scaling.RULE_OF_STAGE[stage]
        assert job["rule"] == rule and f"{scaling.RESULTS}/{path}" in job["output"], stage
        assert f"python -m longrank {rule} " in job["command"], (stage, job["command"])
        assert job["log"] and job["log"][0] in job["command"], stage  # the rule's log, as Snakemake writes it
        if stage in ("train", "rerank"):
            assert "--model knrm" in job["command"] and '"steps": 7' in job["command"], stage  # the benchmark's
    assert config["dataset"]["docs"] in jobs["data/stats.json"]["command"]
    pisa = jobs[scaling.STAGE_OUTPUTS["pisa_candidates"]]["command"]
    assert '"method": "pisa"' in pisa and f"--artifacts {scaling.RESULTS}/pisa/pisa" in pisa
    for run in scaling.RUN_OF_STAGE.values():  # the first stages' evaluations, by rule evaluate too
        job = jobs[f"eval/{run}.tsv"]
        assert job["rule"] == "evaluate" and f"--run {scaling.RESULTS}/candidates/{run}.run" in job["command"]


def test_the_first_stages_run_with_the_planned_commands(scaling, tmp_path):
    """data and candidates at 200 documents through run_size: the planned commands run in the work directory as
    Snakemake runs them, and their rows carry what the outputs read back."""
    args = types.SimpleNamespace(queries=20, seed=3, steps=2, device="cpu", threads=1, stages=["data", "candidates"])
    rows = scaling.run_size(200, args, tmp_path, log=lambda *_: None)
    assert [r["stage"] for r in rows] == ["data", "candidates"]
    assert all(r["peak_rss_mb"] > 0 and r["cpu_seconds"] > 0 for r in rows)
    candidates = rows[1]
    assert 0 < candidates["ndcg10"] <= 1 and 0 < candidates["recall100"] <= 1 and candidates["query_ms"] > 0
    results = tmp_path / "n200" / scaling.RESULTS
    assert (results / "logs" / "candidates_bm25.log").exists() and (results / "eval" / "bm25.tsv").exists()
    assert not (results / "models").exists()  # the stages not asked for are planned, not run


def test_a_collection_wide_stage_runs_with_the_planned_command(scaling, tmp_path):
    """word2vec at 200 documents through run_size, with TREC DL's settings (collection_stages_config)."""
    args = types.SimpleNamespace(queries=20, seed=3, steps=2, device="cpu", threads=1, stages=["data", "word2vec"])
    rows = scaling.run_size(200, args, tmp_path, log=lambda *_: None)
    assert [r["stage"] for r in rows] == ["data", "word2vec"]
    assert rows[1]["peak_rss_mb"] > 0 and rows[1]["cpu_seconds"] > 0
    meta = json.loads((tmp_path / "n200" / scaling.RESULTS / "data" / "word2vec.json").read_text(encoding="utf-8"))
    assert meta["dim"] == 128 and meta["min_count"] == 100  # config/trec-dl.yaml's word2vec


def test_fit_and_extrapolation(scaling):
    a, b = scaling.fit_linear([1000, 2000, 4000], [5 + 0.01 * n for n in (1000, 2000, 4000)])
    assert a == pytest.approx(5) and b == pytest.approx(0.01)
    assert scaling.extrapolate((a, b), 3_200_000) == pytest.approx(32_005)
    a, b = scaling.fit_linear([2000, 10000], [100, 180])  # two sizes: exactly through both points
    assert (a, b) == (pytest.approx(80), pytest.approx(0.01))
    a, b = scaling.fit_linear([1, 2, 3], [1, 3, 2])  # least squares, not interpolation
    assert (a, b) == (pytest.approx(1), pytest.approx(0.5))
    with pytest.raises(ValueError):
        scaling.fit_linear([1000, 1000], [1, 2])


def test_profile_and_verdict(scaling, tmp_path):
    profile = tmp_path / "config.yaml"
    profile.write_text(
        'default-resources:\n  mem_mb: "4000 * attempt"\n  runtime: "60 * attempt"\n'
        'set-resources:\n  train:\n    mem_mb: "32000 * 2 ** (attempt - 1)"\n    runtime: "1440 + 720 * (attempt - 1)"\n'
        "  candidates:\n    mem_mb: 64000\n",
        encoding="utf-8",
    )
    assert scaling.profile_resources(profile, "train") == {"mem_mb": 32000, "runtime": 1440}
    assert scaling.profile_resources(profile, "train", attempt=2) == {"mem_mb": 64000, "runtime": 2160}
    assert scaling.profile_resources(profile, "candidates") == {
        "mem_mb": 64000,
        "runtime": 60,
    }  # runtime from the default
    assert scaling.profile_resources(profile, "evaluate") == {"mem_mb": 4000, "runtime": 60}
    # the repository's profile leaves the GPU jobs' time and memory to the rules, which compute them per job
    assert scaling.profile_resources(scaling.REPO / "profiles" / "slurm" / "config.yaml", "rerank") == {
        "mem_mb": "per job: longrank.plan.job_resources",
        "runtime": "per job: longrank.plan.job_resources",
    }
    # annotate's and graphs' runtime is the rule's own, one unsharded job's (collection_stage_minutes)
    repo_profile = scaling.REPO / "profiles" / "slurm" / "config.yaml"
    assert scaling.profile_resources(repo_profile, "annotate") == {"mem_mb": 16000, "runtime": 1440}
    assert scaling.profile_resources(repo_profile, "graphs", attempt=2) == {"mem_mb": 64000, "runtime": 1440}
    rows = [
        {
            "size": n,
            "stage": stage,
            "seconds": sec,
            "peak_rss_mb": mem,
            "cpu_seconds": sec,
            "words": 10 * n,
            "word_types": n,
        }
        for n in (2000, 10000)
        for stage, mem, sec in (("train", 500 + 0.02 * n, 10.0), ("evaluate", 100.0, 1.0))
    ]
    report = scaling.extrapolation_report(rows, profile, target=3_200_000, steps=30, queries=1000)
    train_line = next(line for line in report.splitlines() if line.startswith("| train"))
    assert "64,500" in train_line and "does not fit" in train_line  # 500 + 0.02 * 3.2M = 64,500 MB > 32,000
    evaluate_line = next(line for line in report.splitlines() if line.startswith("| evaluate"))
    assert evaluate_line.endswith("| fits |")
    assert "exactly through both points" in report
    assert "| 300,000 |" in report  # the estimate of a larger run


def test_tsv_round_trip(scaling, tmp_path):
    rows = [
        {
            "size": 2000,
            "stage": "train",
            "seconds": 14.381,
            "peak_rss_mb": 829.496,
            "steps_per_second": 4.031,
            "cpu_seconds": 13.8,
            "ndcg10": "",
            "bm25_ndcg10": "",
            "words": 2185339,
            "word_types": 121368,
            "generate_seconds": 0.702,
            "model_words": 90512,
            "recall100": "",
            "query_ms": "",
            "index_mb": "",
            "index_s": "",
        },
        {  # a first stage's row: its effectiveness, latency, index size and time
            "size": 2000,
            "stage": "pisa_index",
            "seconds": 3.5,
            "peak_rss_mb": 150.25,
            "steps_per_second": "",
            "cpu_seconds": 3.25,
            "ndcg10": 0.875,
            "bm25_ndcg10": "",
            "words": 2185339,
            "word_types": 121368,
            "generate_seconds": 0.702,
            "model_words": "",
            "recall100": 0.5,
            "query_ms": 0.25,
            "index_mb": 12.5,
            "index_s": 3.125,
        },
    ]
    scaling.write_tsv(tmp_path / "scaling.tsv", rows)
    assert scaling.read_tsv(tmp_path / "scaling.tsv") == rows


def test_word_model_memory_is_taken_at_the_vocabulary_cap(scaling, tmp_path):
    import yaml

    knrm = yaml.safe_load((scaling.REPO / "config" / "trec-dl.yaml").read_text())["models"]["knrm"]
    assert (knrm["min_doc_freq"], knrm["max_vocabulary"]) == (scaling.MIN_DOC_FREQ, scaling.MAX_VOCABULARY)
    cap = scaling.MAX_VOCABULARY
    below = [
        {"size": n, "stage": "train", "peak_rss_mb": 500 + 0.001 * w, "model_words": w}
        for n, w in ((10, cap // 4), (20, cap // 2))
    ]
    mem, text = scaling.vocabulary_memory(below, "train")
    assert (
        mem == pytest.approx(500 + 0.001 * cap) and "per 1k vocabulary words" in text
    )  # the line in words, at the cap
    reached = below + [{"size": 30, "stage": "train", "peak_rss_mb": 1400.0, "model_words": cap}]
    assert scaling.vocabulary_memory(reached, "train") == (1400.0, f"at the {cap:,}-word cap (measured)")
    assert scaling.vocabulary_memory(reached, "evaluate") is None
    (tmp_path / "df.tsv").write_text("word\tdoc_freq\na\t4\nb\t5\nc\t9\n")
    assert scaling.model_words(tmp_path / "df.tsv") == 2 and scaling.model_words(tmp_path / "df.tsv", max_words=1) == 1


def test_the_two_bm25_engines_side_by_side_and_extrapolated(scaling):
    def row(size, stage, rss, cpu, **extra):
        return {"size": size, "stage": stage, "peak_rss_mb": rss, "seconds": 1.0, "cpu_seconds": cpu, **extra}

    rows = []
    for n, k in ((10_000, 1), (100_000, 10)):
        effectiveness = {"ndcg10": 0.5, "recall100": 0.75}
        rows.append(row(n, "candidates", 1000.0 * k, 20.0 * k, query_ms=2.0, **effectiveness))
        rows.append(row(n, "pisa_index", 300.0, 5.0 * k, index_mb=10.0 * k))
        rows.append(row(n, "pisa_candidates", 200.0 + k, 1.0, query_ms=1.0, **effectiveness))
    table = scaling.engines_report(rows, target=1_000_000)
    assert "| bm25s | 100,000 | 200.0 | 10,000 | in memory | 2.00 | 0.5000 | 0.7500 |" in table
    assert "| pisa | 100,000 | 50.0 | 300 | 100 | 1.00 | 0.5000 | 0.7500 |" in table  # peak: the index build
    # linear in N through both points: 1,000 MB per 10,000 documents for bm25s; PISA's memory flat at its largest
    assert "| **bm25s, extrapolated** | **1,000,000** | 2,000 | 100,000 | in memory | 2.00 | | |" in table
    assert "| **pisa, extrapolated** | **1,000,000** | 500 | 300 | 1,000 | 1.00 | | |" in table
