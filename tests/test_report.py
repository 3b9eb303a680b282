"""report: the report the end-to-end run built from what the real stages wrote (tests/conftest.py's ``workflow_run``),
a config without a model giving a report without it, the small-sample warning from the compare stage's own output,
and the pure rendering helpers."""

from __future__ import annotations

import argparse
import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from longrank.evaluate import compare as compare_stage
from longrank.evaluate.metrics import write_eval_tsv
from longrank.evaluate.significance import smallest_holm_wilcoxon_p, smallest_wilcoxon_p
from longrank.floors import model_floors
from longrank.io.json_yaml import read_json
from longrank.results.stage_outputs import CompareSettings, Interpolation, TrainSummary
from longrank.report import max_length
from longrank.report.comparison import small_sample_warning
from longrank.report.html import NOT_RUN_TITLE
from longrank.report.verdicts import pair_row
from longrank.report.verdict_section import signed
from longrank.tables import fmt_p

from conftest import E2E_CONFIG, resolved_for_report, snakemake

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

e2e = pytest.mark.e2e


def results_of(workdir):
    return workdir / "results" / "cranfield"


def report_md(workdir) -> str:
    return (results_of(workdir) / "report" / "report.md").read_text()


def section_of(md: str, title: str) -> str:
    """The text of the report section whose heading contains ``title``."""
    sections = ["## " + part for part in md.split("\n## ")[1:]]
    found = [text for text in sections if title in text.split("\n", 1)[0]]
    assert len(found) == 1, f"{len(found)} sections titled like {title!r}"
    return found[0]


@e2e
def test_the_interpolation_table_shows_every_interpolated_models_dev_curve(workflow_run):
    results = results_of(workflow_run)
    systems = pd.read_csv(results / "compare" / "table.csv")["system"].unique()
    interpolated = [s for s in systems if "+" in s]
    assert interpolated, "the end-to-end config interpolates models"
    md = report_md(workflow_run)
    rows = md_rows(section_of(md, "Interpolation with"), "\n")
    for system in interpolated:
        info = Interpolation.read(results / "runs" / f"{system}.interpolation.json")  # what the stage wrote
        model = system.split("+")[0]
        weight, dev, tried = rows[model][-3:]
        assert weight == f"{info.weight:.3f}"
        assert dev == f"{np.mean([f.dev_ndcg10 for f in info.folds]):.4f}" and dev != "–"
        assert tried.startswith(f"{len(info.folds[0].dev_ndcg10_by_weight)} (") and not tried.startswith("0")


@e2e
def test_every_section_the_run_has_data_for_shows_it(workflow_run):
    md = report_md(workflow_run)
    # every section but non-inferiority (no reference configured) and the length sweep (no two entries differ in
    # max_doc_len only)
    for title in (
        "Effectiveness",
        "First stages compared",
        "Diagnostics",
        "bootstrap 95% confidence",
        "by document-length bucket",
        "Probability of relevance",
        "Positions of the top-3 regions",
        "MIR: ablations",
        "Efficiency",
        "Interpolation with",
        "Training: dev curves",
        "Experiment log",
        "Provenance",
    ):
        assert "Not run:" not in section_of(md, title), title
    assert "Too few test queries" not in md  # ~80 test queries: a difference can be significant
    results = results_of(workflow_run)
    # training: a row per trained model and fold, with the numbers its train_summary.json holds
    training = md_rows(section_of(md, "Training: dev curves"), "Training keeps the weights")
    summary = TrainSummary.read(results / "models" / "knrm" / "fold0" / "train_summary.json")
    assert training["knrm"][2:5] == [str(summary.steps_run), str(summary.best_step), f"{summary.best_dev_ndcg10:.4f}"]
    # efficiency: every bench table, MIR's side-by-side claim, TKL's region positions
    for title in ("Efficiency of knrm", "MIR against BERT-MaxP", "MORES ranking speed"):
        assert title in md, title
    assert "Effectiveness and throughput measured side by side" in md
    assert md_rows(section_of(md, "Positions of the top-3 regions"), "\n")["tkl"][2] != "0"


@e2e
def test_the_sections_the_run_has_no_data_for_say_which_key_switched_them_off(workflow_run):
    md = report_md(workflow_run)
    not_run = md_rows(section_of(md, NOT_RUN_TITLE), NOT_RUN_TITLE)
    for title, why in (
        ("Non-inferiority", "evaluation.noninferiority_reference: null"),
        ("vs maximum document length", "no two enabled model entries differ in max_doc_len only"),
        ("Attention scaling", "attention_scaling.enabled: false"),
        ("Training seeds", "no model trains more than one seed"),
    ):
        assert not any(title in line for line in md.splitlines() if line.startswith("## ")), title  # no stub
        [row] = [row for key, row in not_run.items() if title in key]  # listed once, with why
        assert why in row[1], (title, row)
    assert "Skipped" not in md and "*Not run:" not in md


@e2e
def test_the_report_opens_with_its_verdict_and_shows_each_system_query_by_query(workflow_run):
    """The verdict names the system with the highest nDCG@10 of compare's table, its difference from the first stage
    it ranks with compare's p, and its cost; the per-query section's wins, ties and losses add up to the test queries
    and per_query.csv's means are compare's."""
    results = results_of(workflow_run)
    md = report_md(workflow_run)
    assert md.split("\n## ", 2)[1].startswith("1. Verdict")
    table = pd.read_csv(results / "compare" / "table.csv")
    ndcg = table[table.measure == "nDCG@10"].set_index("system")["mean"]
    best = ndcg.idxmax()
    verdict = section_of(md, "Verdict")
    enabled = {m for m, e in read_json(results / "config.json")["models"].items() if e.get("enabled", True)}
    models = [s for s in ndcg.sort_values(ascending=False, kind="stable").index if s.split("+")[0] in enabled]
    headline = verdict.split("\n\n")[1]
    assert headline.startswith(f"The best model is {models[0]}, nDCG@10 {ndcg[models[0]]:.4f}; "), headline
    if best == models[0]:
        assert "; next is " in headline, headline
    elif best != "bm25":
        assert f"the highest row is {best} (" in headline, headline
    assert re.search(r"(over|below|level with) BM25 \([\d.]+\), (not )?significant \(Wilcoxon, Holm p", headline)
    assert "Cost: " in headline
    ranked = md_rows(verdict, "Every system by nDCG@10", key=1)
    assert list(ranked) == list(ndcg.sort_values(ascending=False, kind="stable").index)
    assert all(all(cell for cell in row) for row in ranked.values())
    pairs = pd.read_csv(results / "compare" / "pairs.csv")
    diff, p_holm, _ = pair_row(pairs, "nDCG@10", "knrm", "bm25")
    assert ranked["knrm"][3:5] == [f"{signed(diff)} vs BM25", fmt_p(p_holm)]
    per_query = section_of(md, "Per query")
    counts = md_rows(per_query, "Wins, ties and losses per query")
    n = int(read_json(results / "compare" / "settings.json")["n_queries"])
    assert "knrm" in counts and "bm25" not in counts  # a first stage is what the others are held against
    for system, row in counts.items():
        assert sum(int(c) for c in row[2:5]) <= n, (system, row)  # all ties: an interpolation at weight 0
        assert (row[5] != "–") == (int(row[2]) > 0) and (row[6] != "–") == (int(row[4]) > 0)
    assert any(int(row[2]) + int(row[4]) > 0 for row in counts.values())  # some system ranks otherwise than BM25
    long = pd.read_csv(results / "report" / "per_query.csv")
    means = long[long.measure == "nDCG@10"].groupby("system")["value"].mean()
    assert np.allclose(means[ndcg.index], ndcg, atol=1e-6)
    assert (results / "report" / "figures" / "per_query.png").stat().st_size > 0


@e2e
def test_every_timing_the_report_shows_carries_its_spread_or_says_one_run(workflow_run):
    """The e2e config times one pass (bench.repeats, mir_speed.repeats: 1): every docs/ms, latency and training time
    says "1 run", from the passes the bench stages wrote beside each figure."""
    from longrank.results.stage_outputs import BenchTable
    from longrank.report.effectiveness import RATE_HEADER

    results, md = results_of(workflow_run), report_md(workflow_run)
    benches = [BenchTable.read(p) for p in sorted((results / "bench").glob("*.json")) if "attention" not in p.name]
    rated = {name: b for b in benches for name in b.rates}
    assert "knrm" in rated and "mir" in rated  # the generic bench and MIR's side-by-side one
    for b in benches:
        assert set(b.rates) == set(b.docs_per_ms)  # every figure with the passes behind it
        assert all(r.runs == 1 and r.docs > 0 for r in b.rates.values())
    effectiveness = section_of(md, "Effectiveness")
    header = md_header(effectiveness, "\n")
    rows = md_rows(effectiveness, "\n")
    col = header.index(RATE_HEADER)
    # mir.speed.json's figure wins over a separate bench of the same entry (inputs.throughput)
    for system in rated:
        if system in rows:
            expected = next(b for b in sorted(benches, key=lambda b: -b.side_by_side) if system in b.rates)
            assert rows[system][col] == expected.rates[system].describe() and rows[system][col].endswith("(1 run)")
    assert "1 run (no spread)" in section_of(md, "Efficiency")
    side = md_rows(md, "Effectiveness and throughput measured side by side")
    assert side and all(row[3].endswith("(1 run)") for row in side.values())
    training = md_rows(section_of(md, "Training: dev curves"), "Training keeps the weights")
    assert training["knrm"][-1].split(" ", 1)[1].startswith("(1 run, ") and "s/step" in training["knrm"][-1]
    stages = section_of(md, "First stages compared")
    assert "(1 run)" in stages


@e2e
def test_the_length_bias_figure_names_every_pair_of_panels_that_plot_the_same_documents(workflow_run):
    """Two re-rankers whose top k (the figure's depth) holds the same documents on every evaluated test query draw the
    same curve: the caption's note must name them, with a reason; panels that differ carry no note."""
    from longrank.evaluate.lengths import top_k
    from longrank.evaluate.metrics import evaluable_queries, read_folds, test_queries
    from longrank.io.trec_files import read_qrels, read_run

    results, md = results_of(workflow_run), report_md(workflow_run)
    section = section_of(md, "Probability of relevance")
    depth = int(section.split("(top ", 1)[1].split(")", 1)[0])
    qrels = read_qrels(results / "data" / "qrels.txt")
    qids = evaluable_queries(qrels, test_queries(read_folds(results / "data" / "folds.json")))[0]
    systems = pd.read_csv(results / "compare" / "table.csv")["system"].unique()
    stages = set(read_json(results / "config.json")["first_stages"])
    panels = [s for s in systems if s not in stages and "+" not in s]  # the figure's: the re-rankers of the main table
    tops = {
        s: top_k({q: d for q, d in read_run(results / "runs" / f"{s}.run").items() if q in qids}, depth) for s in panels
    }
    same = [
        (a, b)
        for i, a in enumerate(panels)
        for b in panels[i + 1 :]
        if all(set(tops[a].get(q, [])) == set(tops[b].get(q, [])) for q in qids)
    ]
    note = section.split("**Note:** ", 1)[1].split("\n", 1)[0] if "**Note:** " in section else ""
    for a, b in same:
        assert f"{a} and {b}" in note or any(f"{a} and " in n and b in n for n in note.split("; ")), (a, b, note)
    if note:
        assert all(": " in part for part in note.split("; ")), note  # each with its reason
    else:
        assert not same


@e2e
def test_the_sanity_table_reads_each_trained_model_against_the_count_over_the_words_it_reads(workflow_run):
    """Each trained model's own floor (the sanity stage's run over the words it reads, at its depth, on its first
    stage), evaluated, and compared with its model only (rule compare_floors: a Holm family of its own), fills that
    model's own-floor cells; the floors stay out of the main table's pairs, so they change none of its p-values."""
    results = results_of(workflow_run)
    floors = model_floors(read_json(results / "config.json"))  # as the workflow named them
    assert floors["tk"] == "query_term_matches@bm25-top10-first200w"  # TK's default 200 words, its depth 10
    assert floors["knrm_b75"] == "query_term_matches@bm25_b75-top20-first200w"  # the first stage it reranks
    assert "bi_encoder" not in floors  # zero-shot: no sanity row
    pairs = pd.read_csv(results / "compare" / "floors" / "pairs.csv")
    assert set(zip(pairs.system_a, pairs.system_b)) == set(floors.items())  # only each model against its own floor
    main = pd.read_csv(results / "compare" / "pairs.csv")
    assert not set(floors.values()) & (set(main.system_a) | set(main.system_b))
    md, caption = report_md(workflow_run), "Trained rerankers against the sanity references"
    header, rows = md_header(md, caption), md_rows(md, caption)
    assert set(rows) == set(floors)
    for model, floor in floors.items():
        cells = dict(zip(header, rows[model]))
        # the name, and where the count over the words it reads ranks as the whole document's, a note saying so
        assert cells["Own floor (the words it reads, its depth)"].startswith(floor)
        assert (results / "eval" / f"{floor}.tsv").stat().st_size > 0
        diff, p_holm, _ = pair_row(pairs, "nDCG@10", model, floor)
        assert cells["Mean difference vs own floor"] == f"{diff:+.4f}"
        assert cells["p vs own floor (Wilcoxon, Holm over these)"] == fmt_p(p_holm)
        assert "the count over the" in cells["vs own floor"], cells


@e2e
def test_provenance_shows_the_grade_to_gain_map_the_data_stage_applied(workflow_run):
    applied = read_json(results_of(workflow_run) / "data" / "stats.json")["relevance"]
    provenance = section_of(report_md(workflow_run), "Provenance")
    gains = ", ".join(f"{grade} → {gain:g}" for grade, gain in applied["gains"].items())
    assert f"Relevance: grade → gain {gains}" in provenance
    excluded = applied["exclude_grades"]
    assert (
        f"judgments of grade {', '.join(map(str, excluded))} excluded" if excluded else "no grade excluded"
    ) in provenance


@e2e
def test_a_model_removed_from_the_config_is_gone_from_the_report(workflow_run, tmp_path):
    """Its outputs stay in results/, as they do for a user who edits the config; the report must not read them."""
    removed = "knrm_b75"
    assert removed in report_md(workflow_run)
    workdir = tmp_path / "workdir"
    shutil.copytree(workflow_run, workdir, symlinks=True)  # a copy: the other tests read the shared run
    overlay = tmp_path / "without.yaml"
    overlay.write_text(yaml.safe_dump({"models": {removed: {"enabled": False}}}))
    snakemake(workdir, "report", "--configfile", str(E2E_CONFIG), str(overlay))
    assert (results_of(workdir) / "runs" / f"{removed}.run").exists()  # still there, not read
    md = report_md(workdir)
    before_config = md.split("<details>", 1)[0]
    assert removed not in before_config
    assert "knrm" in before_config  # the other models stay
    # the folded config holds the models that ran only; its summary counts and names the disabled entries
    summary, folded = md.split("<summary>", 1)[1].split("</summary>", 1)
    config = json.loads(folded.split("```", 2)[1])
    assert removed not in config["models"] and removed not in config["resolved_models"] and "knrm" in config["models"]
    disabled = [
        m for m, e in read_json(results_of(workdir) / "config.json")["models"].items() if e.get("enabled") is False
    ]
    assert (
        removed in disabled and f"{len(disabled)} disabled model entries left out (" in summary and removed in summary
    )


def write_evals(out_dir, n_queries: int, systems: int = 3):
    """Per-query nDCG@10 of ``systems`` systems, each above the previous on every query (differences all of one sign)."""
    rng = np.random.default_rng(0)
    base = rng.uniform(0.1, 0.5, n_queries)
    names = [f"s{i}" for i in range(systems)]
    for i, name in enumerate(names):
        frame = pd.DataFrame(
            {"nDCG@10": base + 0.1 * i + rng.uniform(0, 0.01, n_queries)},
            index=pd.Index([f"q{q}" for q in range(n_queries)], name="query_id"),
        )
        write_eval_tsv(out_dir / f"{name}.tsv", frame)
    return names


def run_compare(tmp_path, n_queries: int) -> tuple[CompareSettings, pd.DataFrame]:
    names = write_evals(tmp_path / "eval", n_queries)
    parser = argparse.ArgumentParser()
    compare_stage.add_arguments(parser)
    compare_stage.run(
        parser.parse_args(
            [
                "--eval-dir",
                str(tmp_path / "eval"),
                "--systems",
                *names,
                "--bootstrap",
                "50",
                "--out-dir",
                str(tmp_path / "compare"),
            ]
        )
    )
    return CompareSettings.read(tmp_path / "compare" / "settings.json"), pd.read_csv(tmp_path / "compare" / "pairs.csv")


@pytest.mark.parametrize("n_queries, warned", [(4, True), (6, True), (8, False), (60, False)])
def test_too_few_queries_for_any_significant_difference_are_said_above_the_tables(tmp_path, n_queries, warned):
    settings, pairs = run_compare(tmp_path, n_queries)
    # every difference is of one sign: the pairs reach the smallest p the compare stage says is possible (scipy's
    # exact test, up to 50 queries; beyond, its normal approximation stays above the bound)
    assert pairs["wilcoxon_p_holm"].min() >= settings.smallest_p_holm * (1 - 1e-9)
    if n_queries <= 50:
        assert pairs["wilcoxon_p"].min() == pytest.approx(smallest_wilcoxon_p(n_queries))
        assert pairs["wilcoxon_p_holm"].min() == pytest.approx(settings.smallest_p_holm)
    assert settings.smallest_p_holm == pytest.approx(smallest_holm_wilcoxon_p(n_queries, 3))
    warning = small_sample_warning(settings)
    assert (warning is not None) == warned
    assert warned == (pairs["wilcoxon_p_holm"] >= settings.alpha).all()  # the warning says what the tests then show
    if warned:
        assert f"with {n_queries} queries" in warning and "Holm" in warning


def test_first_stage_names_come_from_the_config():
    from types import SimpleNamespace

    from longrank.report.inputs import base_model, first_stages, interpolated, is_reranker, rerank_depth, stage_of

    config = {
        "first_stages": {"lex": {"method": "bm25"}, "official": {"method": "scoreddocs"}},
        "models": {
            "a": {"type": "knrm", "first_stage": "lex"},
            "b": {"type": "knrm", "first_stage": "official"},
            "c": {"type": "knrm"},
        },
        "rerank_depth": 100,
    }
    inp = SimpleNamespace(config=config, models=config["models"], resolved=resolved_for_report(config))
    assert list(first_stages(config)) == ["lex", "official"]
    assert list(first_stages({"first_stages": [{"name": "x", "method": "bm25"}]})) == ["x"]  # the YAML list form
    assert first_stages({}) == {}
    assert [interpolated(inp, m) for m in "abc"] == ["a+lex", "b+official", "c+lex"]  # c: the default, the first
    assert base_model(inp, "b+official") == "b" and base_model(inp, "b+lex") == "b+lex"
    assert [stage_of(inp, s) for s in ("lex", "official", "b", "b+official", "query_term_matches")] == [
        "lex",
        "official",
        "official",
        "official",
        "lex",
    ]
    assert [is_reranker(inp, s) for s in ("a", "query_term_matches", "official", "a+lex")] == [True, True, False, False]
    # a model's own floor ranks the candidates of the first stage and the depth its name says
    floor = "query_term_matches@official-top5-first200w"
    assert stage_of(inp, floor) == "official" and rerank_depth(inp, floor) == 5 and is_reranker(inp, floor)


def md_rows(md: str, after: str, key: int = 0) -> dict[str, list[str]]:
    """Column ``key`` -> cells of the first table after the text ``after`` in report.md."""
    lines = md.split(after, 1)[1].split("\n\n|", 1)[1].split("\n\n")[0].splitlines()
    rows = [
        [c.strip() for c in ("|" + line if i == 0 else line).strip().strip("|").split(" | ")]
        for i, line in enumerate(lines)
    ]
    return {r[key]: r for r in rows[2:]}


def md_header(md: str, after: str) -> list[str]:
    """The header cells of the first table after the text ``after`` in report.md."""
    line = md.split(after, 1)[1].split("\n\n|", 1)[1].split("\n", 1)[0]
    return [c.strip() for c in ("|" + line).strip().strip("|").split(" | ")]


def test_a_table_row_with_a_missing_cell_is_refused_with_the_table_named():
    from longrank.report.html import Section

    sec = Section("Efficiency").table(["a", "b"], [["1", "2"]], caption="ok")
    with pytest.raises(ValueError, match="'speed'.*1 cells for 2 columns"):
        sec.table(["a", "b"], [["1"]], caption="speed")


def test_uniform_region_share_is_the_chance_baseline_of_the_position_table():
    import pandas as pd

    from longrank.evaluate.lengths import uniform_region_share

    lengths = pd.Series({"long": 5000.0, "short": 100.0, "mid": 1029.0})
    run = {"q": {"long": 3.0, "short": 2.0, "mid": 1.0}, "other": {"long": 1.0}}
    # long reads 2,000 words: 1,971 possible starts, 1,471 of them at >= 500; short: none; mid: 500 of 1,000
    expected = (1471 / 1971 + 0.0 + 500 / 1000) / 3
    assert uniform_region_share(run, ["q"], lengths, read_len=2000) == pytest.approx(expected)
    assert uniform_region_share(run, ["q"], lengths, read_len=2000, top_docs=1) == pytest.approx(1471 / 1971)


def test_models_are_reported_by_family_then_length_whatever_the_config_order():
    from longrank.validation.validate import model_order

    models = {
        "mores_1ib": {"type": "mores", "max_doc_len": 128, "enabled": True},
        "tkl_4k": {"type": "tkl", "max_doc_len": 4000, "enabled": True},
        "bert_maxp": {
            "type": "bert_ranker",
            "mode": "maxp",
            "passage_len": 64,
            "passage_stride": 32,
            "max_passages": 8,
            "enabled": True,
        },
        "knrm": {"type": "knrm", "max_doc_len": 200, "enabled": True},
        "bert_firstp": {"type": "bert_ranker", "mode": "firstp", "passage_len": 128, "enabled": True},
        "tkl": {"type": "tkl", "max_doc_len": 400, "enabled": True},
        "off": {"type": "tk", "max_doc_len": 200, "enabled": False},
    }
    assert model_order(models) == ["knrm", "tkl", "tkl_4k", "bert_firstp", "bert_maxp", "mores_1ib"]


def test_a_length_sweep_joins_entries_that_differ_in_max_doc_len_only():
    from longrank.resolved_config import resolved_models

    entries = {
        "a": {"type": "tkl", "max_doc_len": 2000, "saturation": "embedding", "train": {"steps": 150}},
        "b": {"type": "tkl", "max_doc_len": 200, "train": {"steps": 150}},
        "c": {"type": "tkl", "max_doc_len": 2000, "saturation": "linear", "train": {"steps": 150}},
        "d": {"type": "tkl", "max_doc_len": 2000, "train": {"steps": 100}},
        "e": {"type": "tkl", "max_doc_len": 4000, "like": "b", "train": {"steps": 150}},
    }
    resolved = resolved_models(entries)  # as the config stage writes them into config.json
    key = {name: max_length.sweep_key(entry, resolved[name]) for name, entry in entries.items()}
    assert key["a"] == key["b"] == key["e"]  # the default saturation, spelled out or not; an entry like another
    assert key["c"] != key["b"] and key["d"] != key["b"]


def test_the_training_plot_draws_any_number_of_untrained_references(tmp_path):
    import pandas as pd

    from longrank.report import plots

    curves = {"knrm": pd.DataFrame({"step": [10, 20], "dev_ndcg10": [0.3, 0.4]})}
    path = plots.training_plot(curves, tmp_path / "fig.png", {f"stage{i}": 0.1 * i for i in range(6)})
    assert path.exists() and path.stat().st_size > 0
