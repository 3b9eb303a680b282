"""Sanity references: the lexical reranker, the random-order expectation, score diagnostics, interpolation weights."""

import argparse
import itertools
import json
from types import SimpleNamespace

import ir_measures
import numpy as np
import pandas as pd
import pytest

from longrank.config import SCHEMA_PATH, validate_config
from longrank.io import InputError, read_run, write_json, write_run, write_text
from longrank.report.diagnostics import score_correlations
from longrank.report.sanity import (
    expected_random_ndcg,
    interpolation_weights,
    random_order_expectations,
    sanity_table,
    weight_column,
    zero_weight_verdicts,
)
from longrank.report.verdicts import verdict_rows
from longrank.retrieval import sanity as lexical

QUERY = "the wing lift of a plate"  # terms: wing, lift, plate ("the", "of", "a" are stop words)
DOCS = {
    "d1": "the the of a the of a wing Wing WING wing",  # one distinct term however often; 4 matches if stop words counted
    "d2": "lift and plate",  # 2
    "d3": "plate, wing.",  # 2: ties with d2, which BM25 ranks higher
    "d4": "wing lift plate",  # 3, but below the rerank depth
}
BM25 = {"q1": {"d1": 4.0, "d2": 3.0, "d3": 2.0, "d4": 1.0}}


def ranking(run, qid):
    return [d for d, _ in sorted(run[qid].items(), key=lambda kv: (-kv[1], kv[0]))]


def test_lexical_reranker_counts_distinct_terms_keeps_bm25_ties_and_the_tail():
    assert lexical.match_counts({"q1": QUERY}, DOCS, BM25, ["q1"], 3) == {"q1": {"d1": 1, "d2": 2, "d3": 2}}
    run = lexical.query_term_matches_run({"q1": QUERY}, DOCS, BM25, ["q1"], 3)
    assert ranking(run, "q1") == ["d2", "d3", "d1", "d4"]
    # The whole list reranked: d4 matches most.
    assert ranking(lexical.query_term_matches_run({"q1": QUERY}, DOCS, BM25, ["q1"], 4), "q1") == [
        "d4",
        "d2",
        "d3",
        "d1",
    ]


def test_sanity_stage_writes_the_run_of_the_test_queries(tmp_path):
    data = tmp_path / "data"
    write_text(data / "docs.jsonl", "".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in DOCS.items()))
    write_text(data / "queries.tsv", f"query_id\ttext\nq1\t{QUERY}\nq2\tplate\n")
    write_json(data / "folds.json", [{"train": ["q2"], "dev": [], "test": ["q1"]}])
    cands = {**BM25, "q2": {"d1": 1.0}}
    write_run(tmp_path / "bm25.run", cands, "bm25")
    parser = argparse.ArgumentParser()
    lexical.add_arguments(parser)
    lexical.run(
        parser.parse_args(
            [
                "--data",
                str(data),
                "--candidates",
                str(tmp_path / "bm25.run"),
                "--rerank-depth",
                "3",
                "--out",
                str(tmp_path / "out.run"),
            ]
        )
    )
    run = read_run(tmp_path / "out.run")
    assert list(run) == ["q1"] and ranking(run, "q1") == ["d2", "d3", "d1", "d4"]


def test_schema_forbids_a_model_named_like_a_sanity_system():
    for name in ("bm25", "query_term_matches"):
        with pytest.raises(InputError, match="models"):
            validate_config(
                {"dataset": {"name": "x", "id": "cranfield"}, "models": {name: {"type": "knrm"}}},
                str(SCHEMA_PATH),
            )


def ir_measures_ndcg(order, qrels, cutoff):
    measure = ir_measures.parse_measure(f"nDCG@{cutoff}")
    run = {"q": {d: float(len(order) - i) for i, d in enumerate(order)}}  # distinct scores: no tie handling involved
    return ir_measures.calc_aggregate([measure], {"q": qrels}, run)[measure]


@pytest.mark.parametrize("cutoff,k", [(10, 5), (10, 3), (10, 1), (3, 5), (3, 4), (3, 2)])
def test_random_order_expectation_is_the_mean_over_all_permutations(cutoff, k):
    ranked = ["a", "b", "c", "d", "e"]
    # graded, a negative grade (counts 0), an unjudged candidate (c) and a relevant document BM25 missed (z)
    qrels = {"a": 0, "b": 2, "d": 1, "e": -1, "z": 3}
    values = [ir_measures_ndcg(list(p) + ranked[k:], qrels, cutoff) for p in itertools.permutations(ranked[:k])]
    assert expected_random_ndcg(ranked, qrels, k, cutoff) == pytest.approx(np.mean(values), abs=1e-12)


def test_random_order_expectation_averages_the_queries():
    cands = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"x": 2.0, "y": 1.0}}
    qrels = {"q1": {"c": 1}, "q2": {"x": 1, "w": 1}}
    got = random_order_expectations(cands, qrels, ["q1", "q2"], [1, 3])

    def mean_over(k):
        return np.mean(
            [
                np.mean(
                    [ir_measures_ndcg(list(p) + order[k:], qrels[q], 10) for p in itertools.permutations(order[:k])]
                )
                for q, order in (("q1", ["a", "b", "c"]), ("q2", ["x", "y"]))
            ]
        )

    assert got[1] == pytest.approx(mean_over(1)) and got[3] == pytest.approx(mean_over(3))
    # k = 1 keeps BM25's order: q1's only relevant document at rank 3; q2's x at rank 1, but w was never retrieved
    assert got[1] == pytest.approx((1 / 2 + 1 / (1 + 1 / np.log2(3))) / 2)


def test_score_correlations_read_only_the_scored_candidates():
    lengths = pd.Series({"a": 10.0, "b": 50.0, "c": 30.0, "d": 70.0, "t": 5.0})
    cands = {"q1": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0, "t": 0.5}, "q2": {"a": 1.0, "b": 2.0, "c": 3.0, "t": 0.0}}
    # scores = -length on the top 3 (rerank depth); the tail document t would break the -1 if it counted
    run = {
        q: {d: -lengths[d] for d in list(docs)[:3]} for q, docs in (("q1", ["a", "b", "c"]), ("q2", ["c", "b", "a"]))
    }
    run["q1"]["t"], run["q2"]["t"] = 100.0, 100.0
    matches = {"q1": {"a": 1, "b": 1, "c": 1}, "q2": {"a": 0, "b": 2, "c": 1}}  # q1's is constant: undefined
    corr = score_correlations(run, cands, ["q1", "q2"], 3, lengths, matches)
    assert corr["length"] == (pytest.approx(-1.0), 2)
    assert corr["matches"] == (pytest.approx(-1.0), 1)  # q2: scores -30, -50, -10 (c, b, a) vs matches 1, 2, 0
    assert corr["first_stage"] == (pytest.approx((0.5 + -0.5) / 2), 2)  # q1 bm25 4,3,2 vs -10,-50,-30; q2 reversed


def test_weight_zero_in_every_fold_reads_identical_to_bm25(tmp_path):
    from longrank.outputs import FoldWeight, Interpolation

    config = {"first_stages": {"bm25": {"method": "bm25"}}, "models": {"knrm": {}, "tk": {}}}
    paths = {}
    for system, weights in (("knrm+bm25", [0.0, 0.0]), ("tk+bm25", [0.0, 1.0])):
        folds = [FoldWeight(i, w, {"0.0": 0.1, "1.0": 0.2}) for i, w in enumerate(weights)]
        paths[system] = tmp_path / f"{system}.interpolation.json"
        Interpolation(system, sum(weights) / 2, folds).write(paths[system])
    inp = SimpleNamespace(config=config, models=config["models"], manifest=SimpleNamespace(interpolations=paths))
    weights = interpolation_weights(inp)
    assert weights == {"knrm+bm25": [0.0, 0.0], "tk+bm25": [0.0, 1.0]}
    extra = {}
    assert weight_column(weights, extra) == ["w (dev)"]
    assert extra == {"knrm+bm25": {"w (dev)": "0.00"}, "tk+bm25": {"w (dev)": "0.50 (0.00, 1.00)"}}
    pairs = pd.DataFrame(
        [
            {
                "measure": "nDCG@10",
                "system_a": "bm25",
                "system_b": "knrm+bm25",
                "mean_diff": 0.0,
                "wilcoxon_p": 1.0,
                "wilcoxon_p_holm": 1.0,
            },
            {
                "measure": "nDCG@10",
                "system_a": "bm25",
                "system_b": "tk+bm25",
                "mean_diff": -0.1,
                "wilcoxon_p": 0.001,
                "wilcoxon_p_holm": 0.002,
            },
        ]
    )
    rows = verdict_rows(
        pairs,
        "nDCG@10",
        [("knrm+bm25", "bm25"), ("tk+bm25", "bm25")],
        "BM25",
        0.05,
        zero_weight_verdicts(weights, "BM25"),
    )
    assert [(r[0], r[1].text) for r in rows] == [
        ("knrm+bm25", "identical to BM25: weight 0 chosen on dev"),
        ("tk+bm25", "better than BM25"),
    ]


def test_sanity_table_flags_trained_models_only():
    inp = SimpleNamespace(
        config={"rerank_depth": 100},
        models={
            "good": {"type": "knrm", "train": {"steps": 10}},
            "bad": {"type": "tk", "rerank_depth": 20},
            "floor": {"type": "bi_encoder", "train": {"steps": 0}},
        },
    )
    systems = ["bm25", "query_term_matches", "good", "good+bm25", "bad", "floor"]
    table = pd.DataFrame({"system": systems, "measure": "nDCG@10", "mean": [0.3, 0.35, 0.5, 0.5, 0.2, 0.1]})
    pairs = pd.DataFrame(
        [
            {
                "measure": "nDCG@10",
                "system_a": "query_term_matches",
                "system_b": s,
                "mean_diff": 0.35 - m,
                "wilcoxon_p": p,
                "wilcoxon_p_holm": p,
            }
            for s, m, p in (("good", 0.5, 0.01), ("bad", 0.2, 0.2))
        ]
    )
    headers, rows = sanity_table(inp, table, pairs, systems, "nDCG@10", 0.05, {20: 0.25, 100: 0.2})
    texts = {r[0]: [c.text for c in r[1:]] for r in rows}
    assert list(texts) == ["good", "bad"]  # no +interpolation row, no zero-shot floor
    assert texts["good"][0] == "better than query_term_matches" and texts["good"][-1].startswith(
        "above random order of its top 100"
    )
    assert texts["bad"][0] == "not better than query_term_matches (lower on average)"
    assert texts["bad"][-1] == "NOT above random order of its top 20 (0.2000 ≤ 0.2500)"
