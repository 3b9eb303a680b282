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
from longrank.report import build

SYSTEMS = ["bm25", "knrm", "tkl", "tkl_short", "tkl+bm25"]


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
    write_json(root / "runs" / "tkl.interpolation.json", {"weight": 0.7, "dev_ndcg10_by_weight": {"0.5": 0.4, "0.7": 0.5}})
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
    write_json(root / "config.json", {"dataset": "toy", "first_stage": {"top_k": 60},
                                      "models": {"knrm": {"type": "knrm", "max_doc_len": 200},
                                                 "tkl": {"type": "tkl", "max_doc_len": 2000},
                                                 "tkl_short": {"type": "tkl", "max_doc_len": 500}}})
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
    key = build._sweep_key
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
    assert "better than the tkl_short floor" in rows[0] and "| +" in rows[0]  # tkl was built 3x as strong as tkl_short
    assert build.is_zero_shot(config["models"]["tkl_short"]) and not build.is_zero_shot(config["models"]["tkl"])
    assert not build.is_fine_tuned_encoder({"type": "knrm", "train": {"steps": 300}})
    assert build.is_fine_tuned_encoder({"type": "bert_ranker", "checkpoint_of": "x", "train": {"steps": 0}})


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
