"""The papers' published figures (src/longrank/report/published.yaml): each is found in its paper's text
(../shared/papers, LONGRANK_SHARED) with the value in the column of its collection and measure, each names an entry
its config has on that collection, and the report's "Published figures" section sets them beside a run's means."""

from __future__ import annotations

import os
import tomllib
from types import SimpleNamespace

import ir_measures
import pandas as pd
import pytest
import yaml
from importlib import resources

from conftest import REPO, SHARED
from longrank.validation.validate import validate_config
from longrank.config.model_entries import effective_settings
from longrank.resolved_config import resolved_models
from longrank.evaluate import ncg
from longrank.config.files import configfiles, merged
from longrank.results.stage_outputs import CompareSettings
from longrank.report import reproduction
from longrank.evaluate.comparison_tables import ComparisonTables
from longrank.report.comparison import Comparison
from longrank.report.reproduction import Figure, load_published, numbers, published

FIGURES = published()
DOC = yaml.safe_load(resources.files("longrank.report").joinpath(reproduction.PUBLISHED).read_text("utf-8"))
TABLES = DOC["tables"]


def flat(text: str) -> str:
    return " ".join(text.split())


def problems(fig: Figure, tables: dict, paper_text: str | None) -> list[str]:
    """What is wrong with a figure: its snippet not in the paper (when given), its value not the snippet's last
    number, that number's column not one of its collection's, or the column's measure not the figure's."""
    out = []
    table = tables[fig.table_key]
    if paper_text is not None and flat(fig.snippet) not in flat(paper_text):
        out.append(f"snippet not in the paper: {fig.snippet!r}")
    found = numbers(fig.snippet)
    if not found or found[-1] != fig.value:
        out.append(f"value {fig.value} is not the snippet's last number ({found[-1:] or 'none'})")
    position = len(found) - 1
    if position not in table["collections"].get(fig.collection, []):
        out.append(f"column {position} is not one of {fig.collection}'s in {fig.table_key}")
    elif table["measures"].get(table["columns"][position]) != fig.measure:
        out.append(f"column {table['columns'][position]!r} is not {fig.measure}")
    return out


@pytest.fixture(scope="module")
def papers() -> dict[str, str]:
    """Paper key -> its text, from ../shared/papers. CI has them (LONGRANK_REQUIRE_SHARED=1 fails without); elsewhere
    the tests that read them are skipped, saying why."""
    path = SHARED / "papers"
    files = {key: path / p["file"] for key, p in DOC["papers"].items()}
    absent = [str(f) for f in files.values() if not f.exists()]
    if absent:
        why = (
            f"the papers' text is not at {path} ({', '.join(absent)}; set LONGRANK_SHARED to the directory "
            "holding papers/)"
        )
        if os.environ.get("LONGRANK_REQUIRE_SHARED") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return {key: f.read_text(encoding="utf-8") for key, f in files.items()}


def test_every_figure_is_in_its_paper_as_stated(papers):
    for key, table in TABLES.items():
        text = flat(papers[table["paper"]])
        assert flat(table["caption"]) in text, f"{key}: caption not in the paper"
        assert flat(table["header"]) in text, f"{key}: header not in the paper"
    found = {f"{f.paper} {f.table} {f.model} {f.measure}": problems(f, TABLES, papers[f.paper]) for f in FIGURES}
    assert {k: v for k, v in found.items() if v} == {}


def test_figures_are_well_formed_without_the_papers():
    assert len(FIGURES) == 89  # 42, CK Table 1's five NCG@100, MORES Table 2's 15 and the 27 Dev figures
    assert len({(f.table_key, f.system, f.measure, f.collection) for f in FIGURES}) == len(FIGURES)
    for key, table in TABLES.items():
        assert " ".join(table["columns"]) in table["header"], key
        assert set(table["measures"]) <= set(table["columns"]), key
        assert set(table["collections"]) <= set(DOC["collections"]), key
    found = {f"{f.paper} {f.table} {f.model} {f.measure}": problems(f, TABLES, None) for f in FIGURES}
    assert {k: v for k, v in found.items() if v} == {}
    for f in FIGURES:  # the measure as ir-measures names it (or NCG@k, evaluate/ncg.py), as the compare table has it
        assert ncg.cutoff(f.measure) or str(ir_measures.parse_measure(f.measure)) == f.measure
        assert f.candidates is None or f.candidates in DOC["candidates"]


def test_every_pair_names_two_entries_of_its_table():
    pairs = reproduction.published_pairs()
    assert len(pairs) == 8
    for pair in pairs:
        systems = {f.system for f in FIGURES if f.table_key == pair.table}
        assert {pair.baseline, pair.improved} <= systems, pair


def test_the_check_can_fail():
    fig = next(f for f in FIGURES if f.system == "tkl" and f.measure == "RR@10")
    text = "<i>i</i>\tTKL\t2,000\t^{a-fh} 0.634\t^e 0.915\t^{cdef} 0.264"
    assert problems(fig, TABLES, text) == []
    assert problems(fig, TABLES, text.replace("0.915", "0.951"))[0].startswith("snippet not in the paper")
    assert "is not the snippet's last number" in problems(Figure(**{**vars(fig), "value": 0.634}), TABLES, None)[0]
    assert "is not RR@10" not in " ".join(problems(fig, TABLES, None))
    wrong = Figure(**{**vars(fig), "measure": "AP@100"})  # the MRR@10 column read as MAP@100
    assert problems(wrong, TABLES, None) == ["column 'MRR@10' is not AP@100"]
    dev = Figure(**{**vars(fig), "snippet": fig.snippet + " ^{cdef} 0.264 ^{a-fhj} 0.403", "value": 0.403})
    assert problems(dev, TABLES, None) == ["column 3 is not one of trec-dl-2019's in tkl-table1"]  # a Dev column


# Measures a figure needs that its config does not evaluate (the section says "not measured: add ..."). Reported to
# the config's owner rather than edited here: CK Table 1's RR is at rank 100.
KNOWN_UNMEASURED = {("trec-dl-2020.yaml", "RR@100")}


@pytest.mark.parametrize("config_file", sorted({f.config for f in FIGURES}))
def test_every_named_entry_is_in_its_config_on_the_figures_collection(config_file):
    config = validate_config(merged(configfiles(f"config/{config_file}")))  # the year over its base
    models = {m for m, e in config["models"].items() if e.get("enabled", True)}
    stages = config["first_stages"]
    figures = [f for f in FIGURES if f.config == config_file]
    for f in figures:
        assert config["dataset"]["id"] in f.ir_datasets, (f.model, config["dataset"]["id"])
        assert f.system in models | set(stages), f"{config_file} has no entry {f.system} ({f.model})"
        if f.candidates:  # a reranker of the paper's; the config's entry reranks a configured first stage
            assert f.system in models
            assert config["models"][f.system]["first_stage"] in stages
        else:
            assert f.system in stages  # a first stage's own figures
    assert reproduction.on_collection(FIGURES, config["dataset"]) == figures
    missing = {(config_file, f.measure) for f in figures} - {(config_file, m) for m in config["evaluation"]["measures"]}
    assert missing <= KNOWN_UNMEASURED


def test_the_figures_ship_as_package_data():
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert reproduction.PUBLISHED in package_data["longrank.report"]
    shipped = resources.files("longrank.report").joinpath(reproduction.PUBLISHED).read_text("utf-8")
    assert load_published(shipped) == list(FIGURES)


# --- the report section on a small context --------------------------------------------------------------------

TREC_DL_2019 = {"name": "trec-dl-2019", "source": "ir_datasets", "id": "msmarco-document/trec-dl-2019/judged"}


def context(dataset, models: dict, stages: dict, table: list[tuple], n_queries: int = 43, rerank_depth: int = 100):
    """A report context with the compare stage's table rows (system, measure, mean, ci_low, ci_high)."""
    frame = pd.DataFrame(table, columns=["system", "measure", "mean", "ci_low", "ci_high"])
    systems = list(dict.fromkeys(frame["system"]))
    frame["letter"] = frame["system"].map({s: chr(97 + i) for i, s in enumerate(systems)})
    frame["better_than"], frame["n_queries"] = "", n_queries
    settings = CompareSettings(
        systems=systems,
        measures=list(dict.fromkeys(frame["measure"])),
        reference=None,
        margins=[],
        alpha=0.05,
        bootstrap=1000,
        seed=0,
        n_queries=n_queries,
        letters_test="wilcoxon",
        noninferiority_test="ttest",
        smallest_p_holm=1e-6,
    )
    cmp = Comparison(systems, ComparisonTables(frame, pd.DataFrame()), settings, {})
    config = {"dataset": dataset, "first_stages": stages, "models": models, "rerank_depth": rerank_depth}
    return SimpleNamespace(inp=inputs(config, models, stages), cmp=cmp)


def inputs(config: dict, models: dict, stages: dict) -> SimpleNamespace:
    """The report's inputs of a config, with resolved_models as stage resolved_config writes them."""
    resolved = resolved_models(models, effective_settings(config))
    return SimpleNamespace(config=config, models=models, first_stages=stages, resolved=resolved)


def rows_of(sec) -> dict[tuple[str, str], list[str]]:
    """(system, measure) -> the cells of the section's table."""
    table = next(b for b in sec.blocks if b.kind == "table")
    cells = [[getattr(c, "text", c) for c in row] for row in table.rows]
    return {(r[0], r[3].split(" ")[0]): r for r in cells}


def test_the_papers_own_depth_is_what_a_run_s_depth_is_set_beside():
    """MORES reranked BM25's top 1,000 passages (published.yaml's candidates: pisa, depth 1000), TKL the track's top
    100: a run's other depth is named against the paper's own, not against 100 for every paper."""
    stages = {"bm25": {"method": "pisa"}}
    models = {"mores": {"type": "mores", "rerank_depth": 10}, "bert_firstp": {"type": "bert_ranker"}}
    table = [("mores", "nDCG@10", 0.64, 0.59, 0.68), ("bert_firstp", "nDCG@10", 0.66, 0.62, 0.71)]
    dataset = {"name": "trec-dl-2019-passage", "id": "msmarco-passage/trec-dl-2019/judged"}
    rows = rows_of(reproduction.section(context(dataset, models, stages, table, rerank_depth=1000)))
    # the differences are said on a model's first row (RR, Table 2's first TREC column)
    assert rows[("mores", "RR")][7] == "reranks the top 10; the paper the top 1,000"
    assert rows[("bert_firstp", "RR")][7] == "–"  # the global depth, 1,000: as the paper


def test_the_section_sets_the_figures_beside_the_measured_means():
    stages = {"official": {"method": "scoreddocs"}}
    models = {"tkl": {"type": "tkl"}, "tk": {"type": "tk", "rerank_depth": 50}, "mir": {"type": "mir"}}
    table = [
        ("official", "nDCG@10", 0.49, 0.40, 0.58),
        ("official", "AP@100", 0.23, 0.18, 0.28),
        ("tkl", "nDCG@10", 0.60, 0.55, 0.65),
        ("tkl", "AP@100", 0.30, 0.27, 0.33),
        ("tk", "nDCG@10", 0.70, 0.65, 0.75),
        ("tk", "AP@100", 0.25, 0.20, 0.30),
    ]
    sec = reproduction.section(context(TREC_DL_2019, models, stages, table))
    rows = rows_of(sec)
    assert rows[("tkl", "nDCG@10")][4:7] == ["0.634", "0.6000 [0.5500, 0.6500]", "yes"]
    assert rows[("tkl", "AP@100")][3:7] == ["AP@100 (MAP@100)", "0.264", "0.3000 [0.2700, 0.3300]", "no: paper below"]
    assert rows[("tk", "nDCG@10")][6] == "no: paper below" and rows[("tk", "AP@100")][6] == "yes"
    assert rows[("tk", "nDCG@10")][7] == "reranks the top 50; the paper the top 100"
    # RR@10 is not among this run's measures: said in the row and below the table
    assert rows[("tkl", "RR@10")][5:7] == ["not measured: add RR@10 to evaluation.measures", "–"]
    # MIR reranked HDCT's candidates in the paper; the run's mir the track's; the run never compared it
    assert rows[("mir", "nDCG@10")][5] == "not in this run's comparison"
    assert rows[("mir", "nDCG@10")][7].startswith("reranks OFFICIAL (scoreddocs); the paper HDCT's top 100")
    # both papers' BM25 rows are the official candidates': one row each
    table_block = next(b for b in sec.blocks if b.kind == "table")
    official = [[getattr(c, "text", c) for c in row][1:3] for row in table_block.rows if row[0] == "official"]
    assert official == [
        ["TKL (Hofstätter et al. 2020), Table 1", "BM25"],
        ["", ""],
        ["", ""],
        ["MIR (Fu et al. 2022), Table 1", "BM25 (line 1)"],
        ["", ""],
        ["", ""],
    ]
    assert table_block.text.startswith("Published figures on trec-dl-2019: 6 of 8 measured")
    notes = [b.text for b in sec.blocks if b.kind == "note"]
    assert any("Add RR@10 and nDCG@100 to evaluation.measures" in n for n in notes)
    assert any("left out: bert_firstp_mir, bert_maxp128, knrm, tkl_4k" in n for n in notes)
    assert not [b for b in sec.blocks if b.kind == "warning"]  # 43 test queries, as the paper's


def test_fewer_test_queries_than_the_papers_are_warned_about():
    sec = reproduction.section(
        context(
            TREC_DL_2019,
            {"tkl": {"type": "tkl"}},
            {"official": {"method": "scoreddocs"}},
            [("tkl", "nDCG@10", 0.6, 0.5, 0.7)],
            n_queries=30,
        )
    )
    assert "over its 30 test queries, the papers' over 43" in next(b.text for b in sec.blocks if b.kind == "warning")


def test_the_ck_figures_on_trec_dl_2020_name_the_rank_100_rr():
    dataset = {"name": "trec-dl-2020", "id": "msmarco-document/trec-dl-2020/judged"}
    stages = {"official": {"method": "scoreddocs"}, "ndrm1_full": {"method": "model", "model": "ndrm1"}}
    measured = [("ndrm1", "RR@10", 0.93, 0.88, 0.97), ("ndrm1_full", "nDCG@10", 0.50, 0.45, 0.55)]
    sec = reproduction.section(context(dataset, {"ndrm1": {"type": "ndrm"}}, stages, measured, n_queries=45))
    rows = rows_of(sec)
    assert rows[("ndrm1", "RR@100")][5] == "not measured: add RR@100 to evaluation.measures"  # RR@10 is another measure
    assert rows[("ndrm1_full", "nDCG@10")][4:7] == ["0.5991", "0.5000 [0.4500, 0.5500]", "no: paper above"]
    assert rows[("ndrm1", "AP@100")][4] == "0.4150"  # as printed
    assert "tkl" not in {s for s, _ in rows}  # the run has no tkl: the CK paper's TKL run is left out, and said so
    assert any("left out: ndrm3, ndrm3_full, tkl" in b.text for b in sec.blocks if b.kind == "note")


@pytest.mark.parametrize(
    "dataset",
    [
        "cranfield",
        {"name": "irled", "source": "local"},
        {"name": "cranfield", "source": "ir_datasets", "id": "cranfield"},
    ],
)
def test_a_collection_no_paper_reports_on_is_one_line(dataset):
    sec = reproduction.section(
        context(dataset, {"tkl": {"type": "tkl"}}, {"bm25": {"method": "bm25"}}, [("tkl", "nDCG@10", 0.6, 0.5, 0.7)])
    )
    assert [b.kind for b in sec.blocks] == ["note"]
    assert sec.blocks[0].text.startswith("Not run: the papers report no figure on ")


def test_the_section_reads_the_compare_stages_own_outputs(tmp_path):
    """The measured cell is the mean and CI the compare stage wrote to table.csv, read as the report reads it."""
    import argparse

    import numpy as np

    from longrank.evaluate import compare as compare_stage
    from longrank.evaluate.metrics import write_eval_tsv
    from longrank.report.comparison import load_comparison

    rng = np.random.default_rng(0)
    qids = pd.Index([f"q{q}" for q in range(43)], name="query_id")
    for system, centre in (("official", 0.49), ("tkl", 0.63)):
        frame = pd.DataFrame(
            {
                "nDCG@10": np.clip(rng.normal(centre, 0.2, 43), 0, 1),
                "AP@100": np.clip(rng.normal(centre / 2, 0.1, 43), 0, 1),
            },
            index=qids,
        )
        write_eval_tsv(tmp_path / "eval" / f"{system}.tsv", frame)
    parser = argparse.ArgumentParser()
    compare_stage.add_arguments(parser)
    compare_stage.run(
        parser.parse_args(
            [
                "--eval-dir",
                str(tmp_path / "eval"),
                "--systems",
                "official",
                "tkl",
                "--bootstrap",
                "200",
                "--out-dir",
                str(tmp_path / "compare"),
            ]
        )
    )
    out = tmp_path / "compare"
    files = {"table": out / "table.csv", "pairs": out / "pairs.csv", "settings": out / "settings.json"}
    manifest = SimpleNamespace(
        compare={k: str(v) for k, v in files.items()},
        evals={s: str(tmp_path / "eval" / f"{s}.tsv") for s in ("official", "tkl")},
    )
    cmp = load_comparison(SimpleNamespace(manifest=manifest))
    stages, models = {"official": {"method": "scoreddocs"}}, {"tkl": {"type": "tkl"}}
    config = {
        "dataset": TREC_DL_2019,
        "first_stages": stages,
        "models": models,
        "evaluation": {"measures": ["nDCG@10", "AP@100"]},
        "rerank_depth": 100,  # the schema's default, which validation fills in
    }
    ctx = SimpleNamespace(inp=inputs(config, models, stages), cmp=cmp)
    rows = rows_of(reproduction.section(ctx))
    written = pd.read_csv(files["table"]).set_index(["system", "measure"])
    r = written.loc[("tkl", "nDCG@10")]
    assert rows[("tkl", "nDCG@10")][5] == f"{r['mean']:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}]"
    expected = (
        "yes" if r.ci_low <= 0.634 <= r.ci_high else "no: paper above" if r.ci_high < 0.634 else "no: paper below"
    )
    assert rows[("tkl", "nDCG@10")][6] == expected
    assert rows[("tkl", "RR@10")][5] == "not measured: add RR@10 to evaluation.measures"


# --- Effect Ratio and ΔRI (Breuer et al. SIGIR 2020, repro-eval) ---------------------------------------------------


def test_effect_ratio_and_delta_ri_are_breuer_et_al_s_by_hand():
    """TK 0.594 -> TKL 0.634 published (nDCG@10), 0.58 -> 0.60 measured: ER = 0.02 / 0.04 = 0.5; ΔRI = the paper's
    relative improvement 0.04 / 0.594 minus the run's 0.02 / 0.58."""
    from longrank.report.effect_ratio import effect_ratio

    er, dri = effect_ratio(0.634, 0.594, 0.60, 0.58)
    assert er == pytest.approx(0.5) and dri == pytest.approx(0.04 / 0.594 - 0.02 / 0.58)
    assert effect_ratio(0.9333, 0.9333, 0.9, 0.8)[0] is None  # no published difference: no ratio


def test_effect_ratio_from_means_is_repro_evals_over_per_topic_scores():
    """The papers print means: the report gives repro-eval one topic per side. Over per-topic scores of the same
    topics repro-eval's ER and ΔRI are the same numbers, so nothing is lost."""
    import numpy as np
    from repro_eval.measure.overall_effects import DRI, ER

    from longrank.report.effect_ratio import effect_ratio

    rng = np.random.default_rng(0)
    runs = [{f"q{t}": {"ndcg": float(x)} for t, x in enumerate(rng.uniform(0, 1, 43))} for _ in range(4)]
    mean = [float(np.mean([s["ndcg"] for s in r.values()])) for r in runs]
    er, dri = effect_ratio(*mean)
    assert er == pytest.approx(ER(*runs)["ndcg"]) and dri == pytest.approx(DRI(*runs)["ndcg"])


def test_the_section_gives_er_and_delta_ri_for_each_pair_the_run_measures():
    stages = {"official": {"method": "scoreddocs"}, "hdct": {"method": "hdct"}}
    models = {m: {"type": "bert_ranker", "first_stage": "hdct"} for m in ("bert_firstp_mir", "bert_maxp128")}
    models |= {"mir": {"type": "mir", "first_stage": "hdct"}, "tk": {"type": "tk"}}
    table = [
        ("bert_firstp_mir", "nDCG@10", 0.60, 0.55, 0.64),
        ("bert_maxp128", "nDCG@10", 0.62, 0.56, 0.68),
        ("mir", "nDCG@10", 0.70, 0.65, 0.75),
        ("tk", "nDCG@10", 0.59, 0.50, 0.65),
    ]
    sec = reproduction.section(context(TREC_DL_2019, models, stages, table))
    block = [b for b in sec.blocks if b.kind == "table"][-1]
    cells = {r[0]: [getattr(c, "text", c) for c in r] for r in block.rows}
    assert set(cells) == {"bert_firstp_mir → mir", "bert_maxp128 → mir"}  # no tkl: TK -> TKL is not measured
    # MIR Table 1: FirstP 0.652 -> MIR 0.697 (+0.045); measured 0.60 -> 0.70 (+0.10): ER 2.22
    assert cells["bert_firstp_mir → mir"][2:] == ["nDCG@10", "+0.0450", "+0.1000", "2.2222", "-0.0976", "no / yes"]
    assert cells["bert_maxp128 → mir"][7] == "yes / yes"  # 0.657 in [0.56, 0.68]; 0.697 in [0.65, 0.75]
