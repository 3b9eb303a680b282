"""MORES's passage run rehearsed end to end on the CPU (docs/studies/trec-dl-rehearsal.md): a synthetic MS
MARCO passage collection in ir_datasets' own cache layout (tests/collections/msmarco-mini/make.py --passages) read by
the real ``msmarco-passage/*`` loaders, and ``snakemake report --configfile config/trec-dl-passage.yaml
config/studies/trec-dl-rehearsal-passage.yaml``: BM25's top 1,000 through PISA, the BERT ranker and MORES with 1 to 4
interaction blocks trained and reranking, the report with MORES's Table 2 beside the measured values. The overlay only
makes things smaller (tests/rehearsal.py's whitelist, checked in test_trec_dl_rehearsal.py)."""

from __future__ import annotations

import json
import time

import pytest

from conftest import IR_DATASETS_HOME, REPO, snakemake
from rehearsal import (
    PASSAGE,
    full_scale,
    make_msmarco_passages,
    outside_whitelist,
    published_figures_beside_measured,
    rehearsal,
    resolved,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not (IR_DATASETS_HOME / "msmarco-passage" / "collection.tsv").exists():
        make_msmarco_passages(IR_DATASETS_HOME)
    workdir = tmp_path_factory.mktemp("passage_rehearsal")
    (workdir / "config").symlink_to(REPO / "config")
    started = time.monotonic()
    snakemake(workdir, "report", "--configfile", *rehearsal(PASSAGE))
    print(f"passage rehearsal: {time.monotonic() - started:.0f} s")
    return {"results": workdir / "results" / "trec-dl-2019-passage", "full": resolved(full_scale(PASSAGE))}


def test_the_report_is_built_from_the_msmarco_passage_loaders(run):
    results = run["results"]
    assert (results / "report" / "index.html").stat().st_size > 0
    stats = json.loads((results / "data" / "stats.json").read_text())
    assert stats["num_evaluable_queries"] == 43
    assert stats["folds"] == [{"train": 200, "dev": 100, "test": 43}]  # dev: dev_sample of dev/small's 110


def test_bm25_retrieves_up_to_a_thousand_passages_and_every_model_reranks_every_test_query(run):
    results = run["results"]
    test = set(json.loads((results / "data" / "folds.json").read_text())[0]["test"])
    ranked: dict[str, int] = {}
    for line in (results / "candidates" / "bm25.run").read_text().splitlines():
        ranked[line.split()[0]] = ranked.get(line.split()[0], 0) + 1
    # top_k 1,000: more than the documents' top 100 (BM25 returns the passages that share a word with the query: a
    # few hundred of the ~1,200 here)
    assert test <= set(ranked) and 100 < max(ranked[q] for q in test) <= 1000
    models = [m for m, e in run["full"]["models"].items() if e.get("enabled", True)]
    assert sorted(models) == ["bert_firstp", "mores", "mores_1ib", "mores_3ib", "mores_4ib"]
    report = (results / "report" / "report.md").read_text()
    rows = {line.split("|")[1].strip() for line in report.splitlines() if line.startswith("|")}
    for m in models:
        assert any(r == m or r.startswith(f"{m} ") for r in rows), f"{m}: no row in report.md"
        run_file = results / "runs" / f"{m}.run"
        assert test <= {line.split()[0] for line in run_file.read_text().splitlines()}, m


def test_mores_table_2_stands_beside_measured_values(run):
    systems = published_figures_beside_measured(run["results"], run["full"])
    assert systems == {"bert_firstp", "mores", "mores_1ib", "mores_3ib", "mores_4ib"}


def test_the_resolved_config_is_the_full_scale_one_outside_the_whitelist(run):
    config = json.loads((run["results"] / "config.json").read_text())
    full, mine = outside_whitelist(run["full"]), outside_whitelist(config)
    differ = {k: (full.get(k), mine.get(k)) for k in full.keys() | mine.keys() if full.get(k) != mine.get(k)}
    assert not differ, f"the rehearsal differs from the full-scale run outside the size keys: {differ}"
