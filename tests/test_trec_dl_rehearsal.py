"""The TREC DL run rehearsed end to end on the CPU (docs/studies/trec-dl-rehearsal.md): a synthetic MS MARCO
in ir_datasets' own cache layout (tests/collections/msmarco-mini/make.py) read by the real ``msmarco-document/*``
loaders, and ``snakemake report --configfile config/trec-dl.yaml config/trec-dl-<year>.yaml
config/studies/trec-dl-rehearsal.yaml`` for 2019: one run, shared by every assertion here. The overlay only makes
things smaller (tests/rehearsal.py's whitelist), so whatever runs here is the full-scale DAG.

2020 and the Dev run run their own jobs only, in the same checkout after 2019: their data and official top-100 lists
through the real loaders, and (the Dev run) the trainings it copies from 2019's. Every other job of their DAGs is one
of 2019's on the same documents, training and dev queries (test_config_matrix.py's dry runs check their DAGs against
the full-scale ones). Whole, they took 7 and 6 minutes of the quiet 2-core machine, checking 2019's code again, and
``.ci/run`` has a budget."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import IR_DATASETS_HOME, REPO, snakemake
from longrank.validation.validate import validate_config
from longrank.config.files import merged
from rehearsal import (
    DEV,
    PASSAGE,
    STAND_INS,
    YEARS,
    flat,
    full_scale,
    make_msmarco,
    outside_whitelist,
    pattern_of,
    published_figures_beside_measured,
    rehearsal,
    resolved,
)

pytestmark = pytest.mark.e2e


# ---- the overlay: size keys only, each smaller (no run needed) -----------------------------------------------------
@pytest.mark.parametrize("full_run", [YEARS[0], PASSAGE])
def test_the_overlay_sets_only_size_keys_each_smaller_than_the_full_scale_value(full_run):
    overlay = rehearsal(full_run)[-1]
    own = flat(yaml.safe_load((REPO / overlay).read_text()))
    full = flat(validate_config(merged(full_scale(full_run))))
    assert own, "the overlay sets nothing"
    for key, value in own.items():
        if key.startswith("first_stages.") and full.get(key) == value:
            continue  # the list is restated whole to shrink one entry: an entry's unchanged keys change nothing
        pattern = pattern_of(key)
        assert pattern is not None, f"{overlay}: {key} is not a size key (tests/rehearsal.py's whitelist)"
        if pattern in STAND_INS:
            assert value in STAND_INS[pattern], f"{key}: {value!r} is no CPU stand-in"
            assert full[key] not in ("word2vec", *STAND_INS[pattern]), f"{key}: {full[key]!r} is no download"
            continue
        if key not in full and key.endswith(".rerank_depth"):  # a model without its own depth reranks the global one
            full[key] = full["rerank_depth"]
        assert key in full, f"{key}: the full-scale config has no such key to shrink"
        size, full_size = (max(v) if isinstance(v, list) else v for v in (value, full[key]))
        assert size <= full_size, f"{key}: {value} is not smaller than the full-scale {full[key]}"


# ---- the rehearsal itself: one run per year ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def msmarco():
    """The synthetic MS MARCO in the tests' ir_datasets cache (conftest.IR_DATASETS_HOME), once for both years."""
    if not (IR_DATASETS_HOME / "msmarco-document" / "collection.tsv.gz").exists():
        make_msmarco(IR_DATASETS_HOME)
    return IR_DATASETS_HOME


# The 2019 run (168 jobs; 152 before the graph set's 3 shards, 155 before HDCT's 3, 159 before the impact indexes'
# 3 each; not timed since) takes about 10 minutes of the quiet 2-core machine; it leaves ~2.1 GB (a finished training keeps only
# its best weights: train/state_sets.py's finish_state). They run in .ci/run. The overlay's whitelist (above), its DAG against the full-scale one (test_config_matrix.py) and the SLURM
# resources of every job (test_slurm_profile.py) are checked without them.


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """One working directory for every run, as a researcher's checkout: results/trec-dl-2019, -2020 and msmarco-dev
    side by side, so a later run copies 2019's finished trainings (history.across_collections)."""
    workdir = tmp_path_factory.mktemp("rehearsal")
    (workdir / "config").symlink_to(REPO / "config")
    return workdir


@pytest.fixture(scope="module")
def run(msmarco, checkout):
    year = YEARS[0]
    started = time.monotonic()
    snakemake(checkout, "report", "--configfile", *rehearsal(year))
    print(f"rehearsal {year}: {time.monotonic() - started:.0f} s")
    full = resolved(full_scale(year))
    return {"year": year, "results": checkout / "results" / full["dataset"]["name"], "full": full}


def test_the_second_years_own_jobs_read_its_judged_queries_and_official_lists(msmarco, checkout):
    """2020's data and its official top-100 lists, through the real ``msmarco-document/trec-dl-2020/*`` loaders: the
    jobs whose inputs differ from 2019's (every other job of its DAG is 2019's, on the same documents and training
    and dev queries)."""
    year = YEARS[1]
    results = checkout / "results" / resolved(full_scale(year))["dataset"]["name"]
    targets = [str(results.relative_to(checkout) / path) for path in ("data/stats.json", "candidates/official.run")]
    snakemake(checkout, *targets, "--configfile", *rehearsal(year))
    check_test_queries_and_their_official_lists(results, judged=45)


def check_test_queries_and_their_official_lists(results: Path, judged: int) -> None:
    """The run's judged test queries (all trained on the 200 training queries, chosen on 100 dev queries), each with
    candidates in the official top-100 lists."""
    stats = json.loads((results / "data" / "stats.json").read_text())
    assert stats["num_evaluable_queries"] == judged
    assert stats["folds"] == [{"train": 200, "dev": 100, "test": judged}]
    test = set(json.loads((results / "data" / "folds.json").read_text())[0]["test"])
    ranked = {line.split()[0] for line in (results / "candidates" / "official.run").read_text().splitlines()}
    assert test <= ranked, f"{results.name}: test queries without official candidates"


def test_the_report_is_built_from_the_msmarco_loaders(run):
    results = run["results"]
    assert (results / "report" / "index.html").stat().st_size > 0
    stats = json.loads((results / "data" / "stats.json").read_text())
    assert stats["num_evaluable_queries"] == 43
    assert stats["folds"] == [{"train": 200, "dev": 100, "test": 43}]  # dev: dev_sample of the 110
    assert "missing_judged_documents" not in stats or stats["missing_judged_documents"] == {}


def test_every_full_scale_model_has_a_row(run):
    report = (run["results"] / "report" / "report.md").read_text()
    models = [m for m, e in run["full"]["models"].items() if e.get("enabled", True)]
    assert len(models) >= 14
    rows = {line.split("|")[1].strip() for line in report.splitlines() if line.startswith("|")}
    missing = [m for m in models if not any(r == m or r.startswith(f"{m} ") for r in rows)]
    assert not missing, f"models without a row in report.md: {missing}"
    test = set(json.loads((run["results"] / "data" / "folds.json").read_text())[0]["test"])
    for m in models:  # each reranked every test query
        run_file = run["results"] / "runs" / f"{m}.run"
        assert test <= {line.split()[0] for line in run_file.read_text().splitlines()}, m


def test_the_published_figures_stand_beside_measured_values(run):
    published_figures_beside_measured(run["results"], run["full"])


def test_the_papers_tables_are_filled_from_the_run(run):
    """``longrank paper_tables`` over the checkout's results: TKL's and MIR's Table 1 get their TREC DL 2019 columns
    from this run (the Dev columns stay "–" without a Dev run), each cell the compare stage's mean."""
    from longrank.cli import main

    results, out = run["results"], run["results"].parent / "paper-tables"
    main(["paper_tables", "--results", str(results.parent), "--out", str(out)])
    cells = pd.read_csv(out / "paper_tables.csv")
    table = pd.read_csv(results / "compare" / "table.csv").set_index(["system", "measure"])["mean"]
    ours = cells[cells.collection == "trec-dl-2019"]
    assert set(ours.table) >= {"tkl-table1", "mir-table1"} and ours.measured.notna().all(), ours
    for r in ours.itertuples():
        assert r.measured == pytest.approx(table[(r.system, r.measure)]) and r.run == str(results)
    assert cells[cells.collection == "msmarco-dev"].measured.isna().all()
    assert "TKL (Hofstätter et al. 2020), Table 1" in (out / "index.html").read_text()
    assert "\\begin{tabular}" in (out / "tkl-table1.tex").read_text()


def test_every_first_stage_produces_a_run(run):
    stages = {s["name"]: s["method"] for s in run["full"]["first_stages"].values()}
    assert {"scoreddocs", "pisa", "model"} <= set(stages.values()), stages
    test = json.loads((run["results"] / "data" / "folds.json").read_text())[0]["test"]
    for name in stages:
        ranked = {}
        for line in (run["results"] / "candidates" / f"{name}.run").read_text().splitlines():
            ranked.setdefault(line.split()[0], []).append(line.split()[2])
        assert set(test) <= set(ranked), f"{name}: test queries without candidates"
        assert min(len(ranked[q]) for q in test) >= 50, name


def test_the_resolved_config_is_the_full_scale_one_outside_the_whitelist(run):
    config = json.loads((run["results"] / "config.json").read_text())
    full = outside_whitelist(run["full"])
    mine = outside_whitelist(config)
    differ = {k: (full.get(k), mine.get(k)) for k in full.keys() | mine.keys() if full.get(k) != mine.get(k)}
    assert not differ, f"the rehearsal differs from the full-scale run outside the size keys: {differ}"


def test_2019_trains_every_model_itself(run):
    trained = sorted(p.parent.parent.name for p in run["results"].glob("models/*/fold0/train_state"))
    assert len(trained) >= 14, trained  # steps: 0 keeps none
    for model in trained:
        log = (run["results"] / "logs" / f"train_{model}_fold0.log").read_text()
        assert "trained before" not in log, model


def test_the_dev_runs_own_jobs_and_the_trainings_it_copies_from_2019(run, checkout):
    """The Dev run (MS MARCO document Dev as a test set: the dev queries but the 100 that choose) after 2019 in one
    checkout: its resolved config, its data (the 10 judged dev queries beyond the 100), its official lists, and the
    trainings of every model on the official lists but NDRM (whose word2vec vectors and impact index are built per
    collection) that 2019 trained (not the bi-encoder: at ``steps: 0`` it keeps no training to copy). The years and
    the Dev run train on the same documents, training and dev queries, so each training is copied from 2019's (the
    training fingerprint matches), to the byte, not run again."""
    first = run["results"]
    full = resolved(full_scale(DEV))
    results = checkout / "results" / full["dataset"]["name"]
    models = [
        m
        for m, e in full["models"].items()
        if e.get("enabled", True) and e["first_stage"] == "official" and e["type"] != "ndrm"
        if (first / "models" / m / "fold0" / "train_state").is_dir()
    ]
    assert len(models) >= 8, models
    paths = ["config.json", "data/stats.json", "candidates/official.run"]
    paths += [f"models/{m}/fold0/model.safetensors" for m in models]
    snakemake(checkout, *(str(results.relative_to(checkout) / p) for p in paths), "--configfile", *rehearsal(DEV))

    config = json.loads((results / "config.json").read_text())
    assert outside_whitelist(config) == outside_whitelist(full)
    check_test_queries_and_their_official_lists(results, judged=10)
    for model in models:
        log = (results / "logs" / f"train_{model}_fold0.log").read_text()
        found = re.search(r"restoring \S+ fold 0 from (\S+): trained before", log)
        assert found and found.group(1) == f"results/{first.name}/models/{model}/fold0", (model, log[-500:])
        weights = Path("models") / model / "fold0" / "model.safetensors"
        assert (results / weights).read_bytes() == (first / weights).read_bytes(), model
