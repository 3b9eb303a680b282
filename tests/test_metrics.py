"""evaluate: our per-query values equal pytrec_eval's computed directly; edge cases are explicit."""

import json
import subprocess
import sys

import pandas as pd
import pytest
import pytrec_eval

from longrank.evaluate.metrics import per_query, read_eval_tsv, write_eval_tsv
from longrank.evaluate.metrics import test_queries as fold_test_queries
from longrank.errors import InputError
from longrank.io.trec_files import write_qrels, write_run

QRELS = {
    "1": {"d1": 2, "d2": 0, "d3": 1, "d4": 3},
    "2": {"d5": 1, "d6": 1, "d9": 2},
    "3": {"d7": 3, "d8": 0},
    "10": {"d1": 1},  # test query absent from the run
    "4": {"d2": 0},  # no relevant document: omitted
}
RUN = {
    "1": {"d2": 9.0, "d1": 8.0, "d5": 7.0, "d3": 6.5, "d4": 1.0},
    "2": {"d7": 3.0, "d8": 2.5, "d6": 2.0, "d1": 1.5, "d5": 1.2},
    "3": {"d7": 0.9, "d9": 0.5},
    "4": {"d2": 1.0},
    "99": {"d1": 1.0},  # not a test query: ignored
}
for i in range(30):  # a relevant document below rank 10 for query 2: RR@10 must ignore it
    RUN["2"][f"x{i}"] = 1.1 - i / 100
RUN["2"]["d9"] = 0.1
MEASURES = ["nDCG@10", "RR@10", "AP@100", "nDCG@100", "R@100"]
FOLDS = [{"train": ["5"], "dev": ["6"], "test": ["1", "2"]}, {"train": [], "dev": [], "test": ["3", "10", "4"]}]


def rr_at_10(run, qrels):
    ranked = sorted(run.items(), key=lambda kv: -kv[1])[:10]
    for rank, (doc, _) in enumerate(ranked, start=1):
        if qrels.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def test_matches_pytrec_eval():
    qids = fold_test_queries(FOLDS)
    frame = per_query(RUN, QRELS, qids, MEASURES)
    assert list(frame.columns) == MEASURES
    assert list(frame.index) == ["1", "2", "3", "10"]  # numeric order; "4" omitted (no relevant doc)
    evaluator = pytrec_eval.RelevanceEvaluator(
        {q: QRELS[q] for q in ["1", "2", "3"]}, {"ndcg_cut_10", "ndcg_cut_100", "map_cut_100", "recall_100"}
    )
    expected = evaluator.evaluate({q: RUN[q] for q in ["1", "2", "3"]})
    for q in ["1", "2", "3"]:
        assert frame.loc[q, "nDCG@10"] == pytest.approx(expected[q]["ndcg_cut_10"], abs=1e-9)
        assert frame.loc[q, "nDCG@100"] == pytest.approx(expected[q]["ndcg_cut_100"], abs=1e-9)
        assert frame.loc[q, "AP@100"] == pytest.approx(expected[q]["map_cut_100"], abs=1e-9)
        assert frame.loc[q, "R@100"] == pytest.approx(expected[q]["recall_100"], abs=1e-9)
        assert frame.loc[q, "RR@10"] == pytest.approx(rr_at_10(RUN[q], QRELS[q]), abs=1e-9)
    assert frame.loc["1", "RR@10"] == pytest.approx(0.5)
    assert frame.loc["2", "RR@10"] == pytest.approx(1 / 3)
    assert frame.loc["2", "R@100"] == pytest.approx(1.0)  # d9 found below rank 10 still counts for recall
    assert frame.loc["2", "nDCG@10"] < frame.loc["2", "nDCG@100"]
    assert frame.loc["3", "nDCG@10"] == pytest.approx(1.0)


def test_missing_query_scores_zero_and_is_kept(caplog):
    frame = per_query(RUN, QRELS, ["1", "10"], MEASURES)
    assert "10" in frame.index
    assert (frame.loc["10"] == 0.0).all()
    assert "absent from the run" in caplog.text and "10" in caplog.text


def test_empty_run_gives_zeros():
    frame = per_query({}, QRELS, ["1", "2"], MEASURES)
    assert frame.shape == (2, len(MEASURES)) and (frame.values == 0).all()


@pytest.mark.stage  # runs the evaluate stage's command line
def test_cli_roundtrip(tmp_path):
    write_run(tmp_path / "x.run", RUN, "t")
    write_qrels(tmp_path / "qrels.txt", QRELS)
    (tmp_path / "folds.json").write_text(json.dumps(FOLDS))
    out = tmp_path / "eval" / "x.tsv"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "longrank",
            "evaluate",
            "--run",
            str(tmp_path / "x.run"),
            "--qrels",
            str(tmp_path / "qrels.txt"),
            "--folds",
            str(tmp_path / "folds.json"),
            "--out",
            str(out),
        ],
        check=True,
    )
    assert out.read_text().splitlines()[0].split("\t") == ["query_id"] + MEASURES
    back = read_eval_tsv(out)
    direct = per_query(RUN, QRELS, fold_test_queries(FOLDS), MEASURES)
    assert list(back.index) == list(direct.index)
    pd.testing.assert_frame_equal(back, direct, atol=1e-6, check_names=False)
    write_eval_tsv(tmp_path / "y.tsv", direct)
    assert (tmp_path / "y.tsv").read_text() == out.read_text()


def test_ncg_at_k_by_hand():
    """NCG@k (ir-measures has none): the gains of the top k over the best k gains the judgments allow. Query q1,
    judged d1:3, d2:2, d3:1, d4:0; ranked d4 > d3 > d1 > d5 (unjudged) > d2. NCG@2 = (0 + 1) / (3 + 2) = 0.2,
    NCG@3 = (0 + 1 + 3) / (3 + 2 + 1) = 4 / 6, NCG@100 = (1 + 3 + 2) / 6 = 1. A tie at the cut-off goes to the
    larger document id, as trec_eval breaks ties."""
    qrels = {"q1": {"d1": 3, "d2": 2, "d3": 1, "d4": 0}, "q2": {"a": 1}}
    run = {"q1": {"d4": 5.0, "d3": 4.0, "d1": 3.0, "d5": 2.0, "d2": 1.0}, "q2": {"a": 1.0, "b": 1.0}}
    frame = per_query(run, qrels, ["q1", "q2"], ["NCG@2", "nDCG@10", "NCG@3", "NCG@100", "NCG@1"])
    assert list(frame.columns) == ["NCG@2", "nDCG@10", "NCG@3", "NCG@100", "NCG@1"]
    assert frame.loc["q1", "NCG@2"] == pytest.approx(0.2)
    assert frame.loc["q1", "NCG@3"] == pytest.approx(4 / 6)
    assert frame.loc["q1", "NCG@100"] == pytest.approx(1.0)
    assert frame.loc["q2", "NCG@1"] == 0.0  # "b" > "a": the tie puts b first
    assert frame.loc["q2", "NCG@2"] == 1.0


def test_ncg_is_a_measure_the_config_accepts():
    from longrank.validation.checks import check_measures

    check_measures(["NCG@100", "nDCG@10"])
    with pytest.raises(InputError, match="evaluation.measures.0"):
        check_measures(["NCG@0"])
