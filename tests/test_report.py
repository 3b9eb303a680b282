"""report: a tiny fake results directory goes through evaluate + compare + report."""

import argparse
import json
import re

import numpy as np
import pytest

from longrank.evaluate import compare as compare_stage
from longrank.evaluate.metrics import per_query, read_folds, write_eval_tsv
from longrank.evaluate.metrics import test_queries as fold_test_queries
from longrank.io import write_json, write_qrels, write_run, write_text
from longrank.report import build, max_length
from longrank.report.effectiveness import is_fine_tuned_encoder
from longrank.report.verdicts import is_zero_shot

SYSTEMS = ["bm25", "query_term_matches", "knrm", "tkl", "tkl_short", "tkl+bm25"]


def parse(module, argv):
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return parser.parse_args(argv)


@pytest.fixture()
def results(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "results" / "toy"
    docs = [f"D{i}" for i in range(120)]
    lengths = {d: int(rng.integers(50, 5000)) for d in docs}
    write_text(root / "data" / "doc_lengths.tsv", "doc_id\twords\n" + "".join(f"{d}\t{n}\n" for d, n in lengths.items()))
    qids = [str(q) for q in range(1, 17)]
    qrels = {q: {d: int(rng.integers(0, 3)) for d in rng.choice(docs, 8, replace=False)} for q in qids}
    for q in qids:
        qrels[q][docs[int(q)]] = 2  # at least one relevant per query
    write_qrels(root / "data" / "qrels.txt", qrels)
    write_json(root / "data" / "folds.json", [{"train": [], "dev": qids[:2], "test": qids[2:9]},
                                              {"train": [], "dev": qids[:2], "test": qids[9:]}])
    write_json(root / "data" / "stats.json", {"num_docs": 120, "num_queries": 16,
                                              "doc_words": {"mean": 2500.0, "median": 2400, "p90": 4500, "max": 4999}})
    cands = {q: {d: float(rng.normal()) for d in rng.choice(docs, 50, replace=False)} for q in qids}
    for q in qids:
        cands[q].update({d: float(rng.normal()) for d in qrels[q]})
    write_run(root / "candidates" / "bm25.run", cands, "bm25")
    write_run(root / "runs" / "bm25.run", cands, "bm25")
    # Texts of the documents' lengths and queries over one small vocabulary, for the lexical sanity run and the
    # diagnostics (their own generator: the runs above and below stay as they were).
    words_rng = np.random.default_rng(1)
    vocab = [f"w{i}" for i in range(400)]
    write_text(root / "data" / "docs.jsonl", "".join(json.dumps({"doc_id": d, "text": " ".join(words_rng.choice(vocab, n))}) + "\n"
                                                     for d, n in lengths.items()))
    queries = {q: "the " + " ".join(words_rng.choice(vocab, 4, replace=False)) for q in qids}
    write_text(root / "data" / "queries.tsv", "query_id\ttext\n" + "".join(f"{q}\t{t}\n" for q, t in queries.items()))
    from longrank.data.corpus import Corpus
    from longrank.retrieval.sanity import query_term_matches_run
    corpus = Corpus(root / "data")
    write_run(root / "runs" / "query_term_matches.run",
              query_term_matches_run(corpus.queries, corpus.docs, cands, corpus.test_queries(), 40), "query_term_matches")
    boost = {"knrm": 0.3, "tkl": 3.0, "tkl_short": 1.0, "tkl+bm25": 2.0}
    for name, b in boost.items():
        run = {q: {d: s * 0.2 + b * qrels[q].get(d, 0) + float(rng.normal()) for d, s in cands[q].items()} for q in qids}
        write_run(root / "runs" / f"{name}.run", run, name)
    with open(root / "runs" / "tkl.details.jsonl", "w") as f:
        for q in qids:
            for d in cands[q]:
                starts = sorted(rng.integers(0, lengths[d], 3).tolist())
                f.write(json.dumps({"query_id": q, "doc_id": d, "region_starts": starts,
                                    "region_scores": rng.normal(size=3).tolist()}) + "\n")
    write_json(root / "runs" / "tkl+bm25.interpolation.json",
               {"system": "tkl+bm25", "weight": 0.7, "dev_ndcg10_by_weight": {"0.5": 0.4, "0.7": 0.5}})
    write_json(root / "bench" / "speed.json", {"title": "Re-ranking speed", "columns": ["Model", "Docs/ms", "Peak MB"],
                                               "rows": [["knrm", 12.5, 300], ["tkl", 1.25, 2100]],
                                               "notes": "CPU, batch 32", "docs_per_ms": {"knrm": 12.5, "tkl": 1.25}})
    for fold in (0, 1):  # training summaries (and fold 0's dev curves) for the training section
        for i, name in enumerate(["knrm", "tkl", "tkl_short"]):
            model_dir = root / "models" / name / f"fold{fold}"
            write_json(model_dir / "train_summary.json", {"steps_run": 300, "best_step": 100 * (i + 1),
                                                          "best_dev_ndcg10": 0.3 + 0.1 * i + 0.01 * fold, "seconds": 12.0})
            if fold == 0:
                write_text(model_dir / "training_log.tsv", "step\ttrain_loss\tdev_ndcg10\n" +
                           "".join(f"{st}\t{1 / st:.4f}\t{0.2 + 0.05 * i + st / 3000:.4f}\n" for st in (100, 200, 300)))
    write_json(root / "config.json", {"dataset": "toy", "first_stages": {"bm25": {"method": "bm25", "top_k": 60}}, "rerank_depth": 40,
                                      "models": {"knrm": {"type": "knrm", "max_doc_len": 200, "rerank_depth": 20, "first_stage": "bm25"},
                                                 "tkl": {"type": "tkl", "max_doc_len": 2000, "first_stage": "bm25"},
                                                 "tkl_short": {"type": "tkl", "max_doc_len": 500, "first_stage": "bm25"}}})
    folds = read_folds(root / "data" / "folds.json")
    from longrank.io import read_qrels, read_run
    q = read_qrels(root / "data" / "qrels.txt")
    for s in SYSTEMS:
        write_eval_tsv(root / "eval" / f"{s}.tsv", per_query(read_run(root / "runs" / f"{s}.run"), q, fold_test_queries(folds)))
    compare_stage.run(parse(compare_stage, ["--eval-dir", str(root / "eval"), "--systems", *SYSTEMS,
                                            "--reference", "tkl", "--bootstrap", "300", "--out-dir", str(root / "compare")]))
    return root


def test_full_report(results):
    out = results / "report"
    build.run(parse(build, ["--results", str(results), "--out-dir", str(out)]))
    page = (out / "index.html").read_text()
    for s in SYSTEMS:
        assert s in page
    assert page.count("data:image/png;base64,") >= 7  # CI, length buckets, length bias, maxlen, regions, efficiency, training
    assert re.search(r"<sup>[a-e]+</sup>", page)  # significance letters (tkl clearly beats bm25 and knrm)
    assert "<sup>ab" in page
    assert "How to read this" in page and "Holm" in page
    assert "better than BM25" in page and "NOT" in page or "not better than BM25" in page
    assert "Skipped" not in page
    assert "Re-ranking speed" in page and "12.50" in page  # bench table and Docs/ms column
    assert "non-inferior" in page.lower() and "0.700" in page  # interpolation weight
    assert "R@60" in page and "scipy" in page and '"top_k": 60' in page
    md = (out / "report.md").read_text()
    assert "figures/fig_ci_ndcg10.png" in md and "<sup>" in md
    for name in ["table.csv", "pairs.csv", "noninferiority.csv", "table.tex", "figures/fig_regions.png", "figures/fig_length_bias.png",
                 "figures/fig_training.png"]:
        assert (out / name).exists(), name


def md_rows(md: str, after: str, key: int = 0) -> dict[str, list[str]]:
    """Column ``key`` -> cells of the first table after the text ``after`` in report.md."""
    lines = md.split(after, 1)[1].split("\n\n|", 1)[1].split("\n\n")[0].splitlines()
    rows = [[c.strip() for c in ("|" + line if i == 0 else line).strip().strip("|").split(" | ")] for i, line in enumerate(lines)]
    return {r[key]: r for r in rows[2:]}


def md_header(md: str, after: str) -> list[str]:
    """The header cells of the first table after the text ``after`` in report.md."""
    line = md.split(after, 1)[1].split("\n\n|", 1)[1].split("\n", 1)[0]
    return [c.strip() for c in ("|" + line).strip().strip("|").split(" | ")]


def test_sanity_rows_weights_and_diagnostics(results):
    import pandas as pd

    from longrank.report.sanity import random_order_expectations

    out = results / "report"
    build.build(results, out)
    md = (out / "report.md").read_text()
    eff = md_rows(md, "## 1. Effectiveness", key=1)
    header = md.split("## 1. Effectiveness")[1].split("\n| ")[1].split(" | ")
    assert "w (dev)" in header and eff["tkl+bm25"][header.index("w (dev)")] == "0.70"
    # Reference rows at the config's rerank depths (global 40, knrm's 20): nDCG@10 alone, the exact expectation.
    from longrank.io import read_qrels, read_run
    from longrank.evaluate.metrics import evaluable_queries, read_folds, test_queries
    qrels = read_qrels(results / "data" / "qrels.txt")
    qids = evaluable_queries(qrels, test_queries(read_folds(results / "data" / "folds.json")))[0]
    expected = random_order_expectations(read_run(results / "candidates" / "bm25.run"), qrels, qids, [20, 40])
    for k in (20, 40):
        row = eff[f"expected, random order of bm25's top {k}"]
        assert row[header.index("nDCG@10")] == f"{expected[k]:.4f}"
        assert row[header.index("RR@10")] == "–"
    # Trained rerankers against query_term_matches and against the random order at their own depth.
    sanity_rows = md_rows(md, "Trained rerankers against the sanity references")
    assert set(sanity_rows) == {"knrm", "tkl", "tkl_short"}
    means = pd.read_csv(results / "compare" / "table.csv").query("measure == 'nDCG@10'").set_index("system")["mean"]
    for s, row in sanity_rows.items():
        assert "query_term_matches" in row[1]
        k = 20 if s == "knrm" else 40
        assert row[4].startswith(("above" if means[s] > expected[k] else "NOT above") + f" random order of its top {k}")
    # Diagnostics: every reranker and the references, over all 14 test queries.
    diag = md_rows(md, "## 3. Diagnostics")
    assert list(diag) == ["bm25", "query_term_matches", "knrm", "tkl", "tkl_short"]
    assert diag["bm25"][6] == "1.0000" and diag["knrm"][1] == "20" and diag["tkl"][1] == "40"
    assert all(r[3] == r[5] == r[7] == "14" for r in diag.values())
    assert float(diag["query_term_matches"][4]) > 0.5  # its scores are the match counts, ties broken by BM25


def test_interpolation_with_weight_zero_in_every_fold_is_bm25(results):
    write_json(results / "runs" / "tkl+bm25.interpolation.json",
               {"system": "tkl+bm25", "weight": 0.0, "folds": [{"fold": 0, "weight": 0.0}, {"fold": 1, "weight": 0.0}]})
    build.build(results, results / "report5")
    md = (results / "report5" / "report.md").read_text()
    assert md_rows(md, "Each system against BM25")["tkl+bm25"][1] == "identical to BM25: weight 0 chosen on dev"
    assert md_rows(md, "## 1. Effectiveness", key=1)["tkl+bm25"][4] == "0.00"  # the w (dev) column


def test_partial_results_skip_gracefully(results):
    for p in list((results / "runs").glob("*.details.jsonl")) + list((results / "bench").glob("*.json")):
        p.unlink()
    for p in (results / "compare").iterdir():
        p.unlink()
    out = results / "report2"
    build.build(results, out)
    page = (out / "index.html").read_text()
    assert "Skipped: no runs/*.details.jsonl" in page and "Skipped: no bench/*.json" in page
    assert "computed by the report" in page and "<sup>" in page
    assert "Docs/ms" not in page.split("Positions of the top-3")[0]


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
    from longrank.config import model_order

    models = {
        "mores_1ib": {"type": "mores", "max_doc_len": 128, "enabled": True},
        "tkl_4k": {"type": "tkl", "max_doc_len": 4000, "enabled": True},
        "bert_maxp": {"type": "bert_ranker", "mode": "maxp", "passage_len": 64, "passage_stride": 32, "max_passages": 8, "enabled": True},
        "knrm": {"type": "knrm", "max_doc_len": 200, "enabled": True},
        "bert_firstp": {"type": "bert_ranker", "mode": "firstp", "passage_len": 128, "enabled": True},
        "tkl": {"type": "tkl", "max_doc_len": 400, "enabled": True},
        "off": {"type": "tk", "max_doc_len": 200, "enabled": False},
    }
    assert model_order(models) == ["knrm", "tkl", "tkl_4k", "bert_firstp", "bert_maxp", "mores_1ib"]


def test_a_length_sweep_joins_entries_that_differ_in_max_doc_len_only():
    key = max_length.sweep_key
    train = {"steps": 150}
    assert key({"type": "tkl", "max_doc_len": 2000, "saturation": "embedding", "train": train}) == \
        key({"type": "tkl", "max_doc_len": 200, "train": train})  # the default saturation, spelled out or not
    assert key({"type": "tkl", "max_doc_len": 2000, "saturation": "linear", "train": train}) != key({"type": "tkl", "max_doc_len": 200, "train": train})
    assert key({"type": "tkl", "max_doc_len": 2000, "train": {"steps": 100}}) != key({"type": "tkl", "max_doc_len": 200, "train": train})


def test_fine_tuned_encoders_are_read_against_the_zero_shot_floor(results):
    config = json.loads((results / "config.json").read_text())
    config["models"]["tkl_short"] = {"type": "bi_encoder", "max_doc_len": 500, "train": {"steps": 0}}  # the floor
    config["models"]["tkl"] = {"type": "mores", "max_doc_len": 2000, "train": {"steps": 60}}
    write_json(results / "config.json", config)
    build.build(results, results / "report3")
    md = (results / "report3" / "report.md").read_text()
    floor_table = md.split("against the zero-shot floor tkl_short")[1].split("**")[1]  # caption end .. next caption
    rows = [line for line in floor_table.splitlines() if line.startswith("| ") and not line.startswith("| System")]
    # Only the fine-tuned encoder row; knrm (no encoder), bm25 and tkl+bm25 (no tkl_short+bm25 to pair with) stay out.
    assert [r.split(" | ")[0] for r in rows] == ["| tkl"]
    assert set(md_rows(md, "Trained rerankers against the sanity references")) == {"knrm", "tkl"}  # not the floor
    assert "better than the tkl_short floor" in rows[0] and "| +" in rows[0]  # tkl was built 3x as strong as tkl_short
    assert is_zero_shot(config["models"]["tkl_short"]) and not is_zero_shot(config["models"]["tkl"])
    assert not is_fine_tuned_encoder({"type": "knrm", "train": {"steps": 300}})
    assert is_fine_tuned_encoder({"type": "bert_ranker", "checkpoint_of": "x", "train": {"steps": 0}})


def test_training_section_sets_dev_and_test_gains_against_the_floor(results):
    import pandas as pd

    config = json.loads((results / "config.json").read_text())
    config["models"]["tkl_short"] = {"type": "bi_encoder", "max_doc_len": 500, "train": {"steps": 0}}  # the floor
    write_json(results / "config.json", config)
    build.build(results, results / "report4")
    md = (results / "report4" / "report.md").read_text()
    section = md.split("Training: dev curves and early stopping")[1].split("\n## ")[0]
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): [c.strip() for c in line.strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| ") and not line.startswith("| Model")}
    assert set(rows) == {("knrm", "0"), ("knrm", "1"), ("tkl", "0"), ("tkl", "1")}  # the floor is the reference, not a row
    folds = json.loads((results / "data" / "folds.json").read_text())
    for model, i in (("knrm", 0), ("tkl", 1)):
        for fold in (0, 1):
            row = rows[(model, str(fold))]
            # best step, and best dev against the floor's (0.5 + 0.01 * fold; the model's is 0.3 + 0.1 * i + 0.01 * fold)
            assert row[3] == str(100 * (i + 1)) and float(row[5]) == pytest.approx(0.1 * i - 0.2, abs=1e-4)
            test = folds[fold]["test"]
            mine = pd.read_csv(results / "eval" / f"{model}.tsv", sep="\t", dtype={"query_id": str}).set_index("query_id")
            floor = pd.read_csv(results / "eval" / "tkl_short.tsv", sep="\t", dtype={"query_id": str}).set_index("query_id")
            assert float(row[6]) == pytest.approx(mine.loc[test, "nDCG@10"].mean(), abs=1e-4)
            assert float(row[7]) == pytest.approx(mine.loc[test, "nDCG@10"].mean() - floor.loc[test, "nDCG@10"].mean(), abs=1e-4)
    assert "fig_training.png" in section


def test_a_config_json_of_the_single_first_stage_block_reads_the_same(results):
    """Results written before ``first_stages`` (one ``first_stage: {method: ...}`` block, the weights in
    runs/{model}.interpolation.json) give the same report as the resolved config of today."""
    build.build(results, results / "new")
    config = json.loads((results / "config.json").read_text())
    config["first_stage"] = config.pop("first_stages")["bm25"]
    for spec in config["models"].values():
        del spec["first_stage"]
    write_json(results / "config.json", config)
    info = json.loads((results / "runs" / "tkl+bm25.interpolation.json").read_text())
    (results / "runs" / "tkl+bm25.interpolation.json").unlink()
    write_json(results / "runs" / "tkl.interpolation.json", {k: v for k, v in info.items() if k != "system"})
    build.build(results, results / "old")
    before_provenance = [(results / d / "report.md").read_text().split("## 13. Provenance")[0] for d in ("new", "old")]
    assert before_provenance[0] == before_provenance[1]
    assert "Interpolation with BM25" in before_provenance[0] and "Each system against BM25" in before_provenance[0]


def test_first_stage_names_come_from_the_config():
    from types import SimpleNamespace

    from longrank.report.inputs import base_model, first_stages, interpolated, is_reranker, stage_of

    config = {"first_stages": {"lex": {"method": "bm25"}, "official": {"method": "scoreddocs"}},
              "models": {"a": {"type": "knrm", "first_stage": "lex"}, "b": {"type": "knrm", "first_stage": "official"},
                         "c": {"type": "knrm"}}}
    inp = SimpleNamespace(config=config, models=config["models"])
    assert list(first_stages(config)) == ["lex", "official"]
    assert list(first_stages({"first_stages": [{"name": "x", "method": "bm25"}]})) == ["x"]  # the YAML list form
    assert first_stages({"first_stage": {"method": "lex", "top_k": 5}}) == {"lex": {"method": "lex", "top_k": 5}}
    assert first_stages({}) == {}
    assert [interpolated(inp, m) for m in "abc"] == ["a+lex", "b+official", "c+lex"]  # c: the default, the first
    assert base_model(inp, "b+official") == "b" and base_model(inp, "b+lex") == "b+lex"
    assert [stage_of(inp, s) for s in ("lex", "official", "b", "b+official", "query_term_matches")] == \
        ["lex", "official", "official", "official", "lex"]
    assert [is_reranker(inp, s) for s in ("a", "query_term_matches", "official", "a+lex")] == [True, True, False, False]


@pytest.fixture()
def two_stages(results):
    """The toy results with a second first stage, ``alt`` (a run file of better candidates, 50 per query), and a
    model ``tkl_alt`` that reranks it with its interpolation ``tkl_alt+alt``."""
    from longrank.io import read_qrels, read_run

    rng = np.random.default_rng(2)
    qrels = read_qrels(results / "data" / "qrels.txt")
    bm25 = read_run(results / "candidates" / "bm25.run")
    alt = {}
    for q, docs in bm25.items():
        scores = {d: s + 1.5 * qrels[q].get(d, 0) + float(rng.normal()) for d, s in docs.items()}
        alt[q] = dict(sorted(scores.items(), key=lambda kv: -kv[1])[:50])
    write_run(results / "candidates" / "alt.run", alt, "alt")
    for name, b in (("tkl_alt", 2.5), ("tkl_alt+alt", 2.0)):
        run = {q: {d: s * 0.2 + b * qrels[q].get(d, 0) + float(rng.normal()) for d, s in alt[q].items()} for q in alt}
        write_run(results / "runs" / f"{name}.run", run, name)
    write_json(results / "runs" / "tkl_alt+alt.interpolation.json",
               {"system": "tkl_alt+alt", "weight": 0.4, "folds": [{"fold": 0, "weight": 0.3}, {"fold": 1, "weight": 0.5}],
                "dev_ndcg10_by_weight": {"0.4": 0.6}})
    config = json.loads((results / "config.json").read_text())
    config["first_stages"]["alt"] = {"method": "run_file", "path": "runs/alt.trec", "top_k": 50}
    config["models"]["tkl_alt"] = {"type": "tkl", "max_doc_len": 1000, "first_stage": "alt"}
    write_json(results / "config.json", config)
    folds = read_folds(results / "data" / "folds.json")
    for name, path in (("alt", "candidates/alt.run"), ("tkl_alt", "runs/tkl_alt.run"), ("tkl_alt+alt", "runs/tkl_alt+alt.run")):
        write_eval_tsv(results / "eval" / f"{name}.tsv", per_query(read_run(results / path), qrels, fold_test_queries(folds)))
    systems = ["bm25", "alt", *SYSTEMS[1:], "tkl_alt", "tkl_alt+alt"]
    for p in (results / "compare").iterdir():
        p.unlink()
    compare_stage.run(parse(compare_stage, ["--eval-dir", str(results / "eval"), "--systems", *systems,
                                            "--bootstrap", "300", "--out-dir", str(results / "compare")]))
    return results


def test_two_first_stages_get_their_rows_and_a_comparison(two_stages):
    import pandas as pd

    from longrank.evaluate.metrics import read_folds
    from longrank.io import read_qrels, read_run
    from longrank.tables import fmt_p

    build.build(two_stages, two_stages / "report")
    md = (two_stages / "report" / "report.md").read_text()
    table = pd.read_csv(two_stages / "compare" / "table.csv").query("measure == 'nDCG@10'").set_index("system")["mean"]
    pairs = pd.read_csv(two_stages / "compare" / "pairs.csv").query("measure == 'nDCG@10'")

    # Effectiveness: both first stages, the model on the second and its interpolation with the second.
    eff = md_rows(md, "## 1. Effectiveness", key=1)
    header = md.split("## 1. Effectiveness")[1].split("\n| ")[1].split(" | ")
    for s in ("bm25", "alt", "tkl_alt", "tkl_alt+alt", "tkl+bm25"):
        assert eff[s][header.index("nDCG@10")].startswith(f"{table[s]:.4f}")
    assert eff["tkl_alt+alt"][header.index("w (dev)")] == "0.40 (0.30, 0.50)"
    assert eff["tkl_alt"][header.index("Max doc len")] == "1000"
    assert "expected, random order of alt's top 40" in eff and "expected, random order of bm25's top 20" in eff
    # Each system against the first stage it reranks.
    assert set(md_rows(md, "Each system against ALT")) == {"tkl_alt", "tkl_alt+alt"}
    assert set(md_rows(md, "Each system against BM25")) == {"query_term_matches", "knrm", "tkl", "tkl_short", "tkl+bm25"}
    assert md_rows(md, "Trained rerankers against the sanity references")["tkl_alt"][4].endswith(
        ("> " if table["tkl_alt"] > float(eff["expected, random order of alt's top 40"][header.index("nDCG@10")]) else "≤ ")
        + eff["expected, random order of alt's top 40"][header.index("nDCG@10")] + ")")

    # The first stages compared: recall at both depths, nDCG@10, and what each beats (Holm-corrected Wilcoxon).
    section = md.split("## 2. First stages compared")[1].split("\n## ")[0]
    assert "Holm" in section
    rows = md_rows(md, "## 2. First stages compared")
    assert md_header(md, "## 2. First stages compared") == ["First stage", "Candidates", "R@10", "R@50", "R@60", "nDCG@10",
                                                           "Better than (nDCG@10)"]
    assert list(rows) == ["bm25", "alt"] and rows["bm25"][1] == "60" and rows["alt"][1] == "50"
    qrels = read_qrels(two_stages / "data" / "qrels.txt")
    qids = fold_test_queries(read_folds(two_stages / "data" / "folds.json"))
    for stage in ("bm25", "alt"):
        recall = per_query(read_run(two_stages / "candidates" / f"{stage}.run"), qrels, qids, ["R@10", "R@50", "R@60"])
        assert rows[stage][2:5] == [f"{recall[c].mean():.4f}" for c in ("R@10", "R@50", "R@60")]
        assert rows[stage][5] == f"{table[stage]:.4f}"
    pair = pairs[((pairs.system_a == "bm25") & (pairs.system_b == "alt")) | ((pairs.system_a == "alt") & (pairs.system_b == "bm25"))].iloc[0]
    alt_minus_bm25 = pair.mean_diff if pair.system_a == "alt" else -pair.mean_diff
    significant = pair.wilcoxon_p_holm < 0.05
    assert rows["alt"][6] == ("bm25" if significant and alt_minus_bm25 > 0 else "none")
    assert rows["bm25"][6] == ("alt" if significant and alt_minus_bm25 < 0 else "none")
    against = md_rows(md, "First stages against each other")["alt"]
    assert against[1] == "bm25" and against[3] == f"{alt_minus_bm25:+.4f}" and against[4] == fmt_p(pair.wilcoxon_p_holm)
    assert ("better than BM25" if significant else "BM25") in against[2]

    # Interpolation: each model with the first stage it reranked.
    interp = md_rows(md, "## 11. Interpolation with the first stage")
    assert interp["tkl"][1] == "bm25" and interp["tkl_alt"][1] == "alt" and interp["tkl_alt"][2] == "0.400"
    assert "(1 − w) · first stage, where the first stage is the one the model reranked" in md
    # Diagnostics: every first stage, each model over its own first stage's candidates.
    diag = md_rows(md, "## 3. Diagnostics")
    assert list(diag) == ["bm25", "alt", "query_term_matches", "knrm", "tkl", "tkl_short", "tkl_alt"]
    assert diag["alt"][6] == diag["bm25"][6] == "1.0000" and "ρ first-stage score" in md
    assert "Skipped" not in md.split("## 9. Efficiency")[0]


def test_the_training_plot_draws_any_number_of_untrained_references(tmp_path):
    import pandas as pd

    from longrank.report import plots

    curves = {"knrm": pd.DataFrame({"step": [10, 20], "dev_ndcg10": [0.3, 0.4]})}
    path = plots.training_plot(curves, tmp_path / "fig.png", {f"stage{i}": 0.1 * i for i in range(6)})
    assert path.exists() and path.stat().st_size > 0


def test_mir_against_maxp_by_length_and_throughput_from_the_side_by_side_measurement(results):
    """Fig. 5's claim in numbers: the timed entries' throughput beside their effectiveness, and each MIR entry
    against each MaxP entry with the test and the throughput ratio."""
    config = json.loads((results / "config.json").read_text())
    config["models"]["tkl"] = {"type": "mir", "graph_set": "g", "max_doc_tokens": 1024, "first_stage": "bm25"}
    config["models"]["tkl_short"] = {"type": "bert_ranker", "mode": "maxp", "passage_len": 128, "passage_stride": 96,
                                     "max_passages": 21, "first_stage": "bm25"}
    write_json(results / "config.json", config)
    write_json(results / "bench" / "mir.speed.json", {
        "title": "MIR against BERT-MaxP", "side_by_side": True, "device": "cpu",
        "timed_entries": {"tkl": {"model": "MIR", "tokens": 1024}, "tkl_short": {"model": "MaxP", "tokens": 2048}},
        "docs_per_ms": {"tkl": 0.003, "tkl_short": 0.002}})
    out = results / "report"
    build.run(parse(build, ["--results", str(results), "--out-dir", str(out)]))
    md = (out / "report.md").read_text()
    timed = md_rows(md, "Effectiveness and throughput measured side by side")
    assert timed["tkl"][1:4] == ["MIR", "1024", "3.000"] and timed["tkl_short"][1:4] == ["MaxP", "2048", "2.000"]
    claim = md_rows(md, "The paper's claim")["tkl (1024) vs tkl_short (2048)"]
    assert claim[-1] == "1.50" and claim[1].startswith("+")  # the fixture's tkl ranks better than tkl_short
