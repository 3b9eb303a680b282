"""Sanity references: the lexical reranker, the random-order expectation, score diagnostics, interpolation weights."""

import argparse
import itertools
import json
import os
from types import SimpleNamespace

from conftest import resolved_for_report

import ir_measures
import numpy as np
import pandas as pd
import pytest

from longrank import floors
from longrank.validation.validate import validate_config
from longrank.config.schema import SCHEMA_PATH
from longrank.errors import InputError
from longrank.io.atomic import write_text
from longrank.io.json_yaml import write_json
from longrank.io.trec_files import read_run, write_run
from longrank.results.run_metadata import read_run_metadata
from longrank.report.diagnostics import score_correlations
from longrank.report.sanity_references import (
    expected_random_ndcg,
    interpolation_weights,
    own_floor_cells,
    own_floor_label,
    random_order_expectations,
    sanity_table,
    weight_column,
    zero_weight_verdicts,
)
from longrank.report.verdicts import pair_row, verdict_rows
from longrank.retrieval import sanity as lexical
from longrank.retrieval.sanity_floor import Floor
from longrank.tables import fmt_p


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


@pytest.mark.stage  # runs the sanity stage
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


# The count over the first 4 words and over the whole document rank these differently (query terms: wing, lift,
# plate; the first-stage order d1, d2, d3 breaks ties).
READ_QUERY = "wing lift of a plate"
READ_DOCS = {
    "d1": "wing the body of a lift plate",  # first 4 words: wing (1); whole: 3
    "d2": "lift and wing tunnel",  # first 4: 2; whole: 2
    "d3": "plate at low speed then wing",  # first 4: plate (1); whole: 2
}
READ_BM25 = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}


def test_a_floor_counts_only_the_words_a_model_reads():
    counts = lexical.match_counts({"q1": READ_QUERY}, READ_DOCS, READ_BM25, ["q1"], 3, words=4)
    assert counts == {"q1": {"d1": 1, "d2": 2, "d3": 1}}
    assert lexical.match_counts({"q1": READ_QUERY}, READ_DOCS, READ_BM25, ["q1"], 3) == {
        "q1": {"d1": 3, "d2": 2, "d3": 2}
    }
    first_four = lexical.query_term_matches_run({"q1": READ_QUERY}, READ_DOCS, READ_BM25, ["q1"], 3, words=4)
    whole = lexical.query_term_matches_run({"q1": READ_QUERY}, READ_DOCS, READ_BM25, ["q1"], 3)
    assert ranking(first_four, "q1") == ["d2", "d1", "d3"]  # d1's and d3's one word each: BM25's order between them
    assert ranking(whole, "q1") == ["d1", "d2", "d3"]
    # stop words are read (they take up a model's budget) but never matched
    assert lexical.read_words("The WING, of a plate.", 3) == ["the", "wing", "of"]


def test_a_floor_is_named_by_what_it_reads_and_the_name_reads_back():
    floors = [
        Floor("bm25", 30, 200),
        Floor("bm25", 30, None),
        Floor("bm25-top30", 10, None),  # a first stage's name may itself look like a depth
        Floor("b_75-x", 5, 7),
    ]
    assert floors[0].name == "query_term_matches@bm25-top30-first200w"
    assert floors[1].name == "query_term_matches@bm25-top30"
    assert [Floor.parse(f.name) for f in floors] == floors
    assert Floor.parse("query_term_matches") is None and Floor.parse("tk+bm25") is None
    assert floors[0].read_arguments() == ["--read-words", "200"] and floors[1].read_arguments() == []


def floors_config():
    """A validated config's shape: first_stages a mapping (the first the default), each model its first stage."""
    return {
        "rerank_depth": 100,
        "first_stages": {"bm25": {"method": "bm25"}, "bm25_b75": {"method": "bm25"}},
        "mir_graphs": {"cut": {"max_doc_tokens": 96}, "whole": {}},
        "models": {
            "tk": {"type": "tk", "rerank_depth": 30, "first_stage": "bm25"},  # TK's default max_doc_len: 200
            "tk_same": {"type": "tk", "rerank_depth": 30, "max_doc_len": 200, "first_stage": "bm25"},
            "knrm_b75": {"type": "knrm", "max_doc_len": 50, "first_stage": "bm25_b75"},
            "maxp": {
                "type": "bert_ranker",
                "mode": "maxp",
                "passage_len": 128,
                "passage_stride": 96,
                "max_passages": 2,
                "rerank_depth": 10,
                "first_stage": "bm25",
            },
            "mir": {"type": "mir", "graph_set": "cut", "rerank_depth": 10, "first_stage": "bm25"},
            "mir_whole": {"type": "mir", "graph_set": "whole", "first_stage": "bm25"},  # no budget: whole documents
            "mir_whole_deep": {"type": "mir", "graph_set": "whole", "rerank_depth": 10, "first_stage": "bm25"},
            "zero_shot": {"type": "bi_encoder", "train": {"steps": 0}, "first_stage": "bm25"},
            "off": {"type": "tk", "enabled": False, "first_stage": "bm25"},
        },
    }


def test_each_trained_model_gets_the_floor_of_the_words_it_reads_at_its_depth_once():
    config = floors_config()
    assert floors.model_floors(config) == {
        "tk": "query_term_matches@bm25-top30-first200w",
        "tk_same": "query_term_matches@bm25-top30-first200w",
        "knrm_b75": "query_term_matches@bm25_b75-top100-first50w",
        "maxp": "query_term_matches@bm25-top10-first224w",  # 96 * (2 - 1) + 128 tokens: its two windows
        "mir": "query_term_matches@bm25-top10-first96w",  # its graph set's cut
        "mir_whole": "query_term_matches",  # whole documents at the global depth: the global floor itself
        "mir_whole_deep": "query_term_matches@bm25-top10",
    }
    systems = floors.floor_systems(config)
    assert list(systems) == [
        "query_term_matches",
        "query_term_matches@bm25-top30-first200w",
        "query_term_matches@bm25_b75-top100-first50w",
        "query_term_matches@bm25-top10-first224w",
        "query_term_matches@bm25-top10-first96w",
        "query_term_matches@bm25-top10",
    ]
    assert systems["query_term_matches"] == Floor("bm25", 100, None)
    assert systems["query_term_matches@bm25_b75-top100-first50w"] == Floor("bm25_b75", 100, 50)


def run_stage(module, args: list[str]) -> None:
    """A stage as its rule calls it: ``python -m longrank <stage> <args>``, in this process."""
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    module.run(parser.parse_args(args))


@pytest.mark.stage  # runs the stages behind the section
def test_the_sanity_section_reads_each_models_own_floor_from_the_stages_runs(tmp_path):
    """The sanity stage's runs, evaluated and compared by the real stages, reach the sanity table's own-floor cells."""
    from longrank.evaluate import compare, evaluate

    data, runs, evals = tmp_path / "data", tmp_path / "runs", tmp_path / "eval"
    qids = [f"q{i}" for i in range(6)]
    docs = {f"{q}{d}": text for q in qids for d, text in READ_DOCS.items()}
    write_text(data / "docs.jsonl", "".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in docs.items()))
    write_text(data / "queries.tsv", "query_id\ttext\n" + "".join(f"{q}\t{READ_QUERY}\n" for q in qids))
    write_json(data / "folds.json", [{"train": [], "dev": [], "test": qids}])
    write_text(data / "qrels.txt", "".join(f"{q} 0 {q}d2 1\n" for q in qids))  # d2: first for the count over 4 words
    bm25 = {q: {f"{q}{d}": score for d, score in READ_BM25["q1"].items()} for q in qids}
    write_run(tmp_path / "bm25.run", bm25, "bm25")
    write_run(runs / "tk.run", bm25, "tk")  # a "trained" model that kept BM25's order
    floor = Floor("bm25", 3, 4)
    for system, args in (("query_term_matches", []), (floor.name, floor.read_arguments())):
        cli = ["--data", str(data), "--candidates", str(tmp_path / "bm25.run"), "--rerank-depth", "3", *args]
        run_stage(lexical, [*cli, "--out", str(runs / f"{system}.run")])
    assert read_run_metadata(runs / f"{floor.name}.run")["method"]["retrieval"][-1]["params"]["read_words"] == 4
    paths = {"bm25": tmp_path / "bm25.run", **{p.stem: p for p in runs.glob("*.run")}}
    for system, path in paths.items():
        cli = ["--run", str(path), "--qrels", str(data / "qrels.txt"), "--folds", str(data / "folds.json")]
        run_stage(evaluate, [*cli, "--out", str(evals / f"{system}.tsv")])
    systems = ["bm25", "query_term_matches", "tk"]  # the main table: the models' own floors are not in it
    cli = ["--eval-dir", str(evals), "--bootstrap", "50"]
    run_stage(compare, [*cli, "--systems", *systems, "--out-dir", str(tmp_path / "compare")])
    table, pairs = (pd.read_csv(tmp_path / "compare" / f"{name}.csv") for name in ("table", "pairs"))
    # rule compare_floors: each model against its own floor only, one Holm family of their own
    floor_cli = ["--systems", "tk", floor.name, "--pairs", f"tk:{floor.name}"]
    run_stage(compare, [*cli, *floor_cli, "--out-dir", str(tmp_path / "floors")])
    own_pairs = pd.read_csv(tmp_path / "floors" / "pairs.csv")
    assert sorted(os.listdir(tmp_path / "floors")) == ["pairs.csv", "settings.json"]
    assert set(zip(own_pairs.system_a, own_pairs.system_b)) == {("tk", floor.name)}
    assert floor.name not in set(pairs.system_a) | set(pairs.system_b)

    models = {"tk": {"type": "tk", "rerank_depth": 3, "train": {"steps": 5}}}
    config = {"rerank_depth": 3, "first_stages": {"bm25": {"method": "bm25"}}, "models": models}
    inp = SimpleNamespace(
        config=config,
        models=models,
        resolved=resolved_for_report(config),
        run=lambda system: read_run(paths[system]),
        manifest=SimpleNamespace(
            runs={s: str(p) for s, p in paths.items() if s != floor.name},
            read_floors={"tk": str(runs / f"{floor.name}.run")},
            floor_pairs=str(tmp_path / "floors" / "pairs.csv"),
        ),
    )
    headers, rows = sanity_table(inp, table, pairs, systems, "nDCG@10", 0.05, {3: 0.5})
    cells = dict(zip(headers, [rows[0][0], *(c.text for c in rows[0][1:])]))
    diff, p_holm, _ = pair_row(own_pairs, "nDCG@10", "tk", floor.name)
    # one pair, so Holm leaves its p as it is: the floor's p does not depend on how many systems the table has
    assert p_holm == pytest.approx(own_pairs.wilcoxon_p.iloc[0])
    assert diff == pytest.approx(1 / np.log2(3) - 1, abs=1e-4)  # relevant d2 at rank 2 against rank 1, every query
    assert cells["Own floor (the words it reads, its depth)"] == "query_term_matches@bm25-top3-first4w"
    # six queries, each lower: Wilcoxon p 1/32, significant in a family of one pair (in the table's family of six
    # pairs Holm would have raised it above 0.05)
    assert cells["vs own floor"] == "significantly WORSE than the count over the 4 words it reads, at depth 3"
    assert cells["Mean difference vs own floor"] == f"{diff:+.4f}"
    assert cells["p vs own floor (Wilcoxon, Holm over these)"] == fmt_p(p_holm)
    # against the whole-document count, which ranks as BM25 here: no difference
    assert float(cells["Mean difference"]) == 0


def test_a_floor_that_ranks_as_the_whole_document_count_says_so():
    """Where no candidate holds a query word past the words a model reads, its floor's run is query_term_matches's:
    the table says so beside the floor's name (at parse time the workflow cannot know the documents' lengths)."""
    floor = Floor("bm25", 3, 200)
    runs = {
        name: lexical.query_term_matches_run({"q1": READ_QUERY}, READ_DOCS, READ_BM25, ["q1"], 3, words)
        for name, words in (("query_term_matches", None), (floor.name, 200))
    }
    inp = SimpleNamespace(resolved={}, run=runs.get)
    pairs = pd.DataFrame(
        [
            {
                "measure": "nDCG@10",
                "system_a": "tk",
                "system_b": floor.name,
                "mean_diff": -0.1,
                "wilcoxon_p": 0.2,
                "wilcoxon_p_holm": 0.5,
            }
        ]
    )
    cells = [c.text for c in own_floor_cells(inp, pairs, "tk", floor.name, "nDCG@10", 0.05)]
    assert cells == [
        f"{floor.name} (ranks as query_term_matches: each candidate's first 200 words hold all the query words it has)",
        "not better than the count over the 200 words it reads, at depth 3 (lower on average)",
        "-0.1000",
        "0.500",
    ]


def test_the_verdict_names_the_words_a_floor_counts_in():
    inp = SimpleNamespace(resolved={"maxp": {"on_pretrained_encoder": True}, "tk": {"on_pretrained_encoder": False}})
    assert own_floor_label(inp, "tk", Floor("bm25", 30, 200)) == ("the count over the 200 words it reads, at depth 30")
    assert own_floor_label(inp, "maxp", Floor("bm25", 10, 224)) == (
        "the count over the first 224 words (it reads 224 WordPiece tokens), at depth 10"
    )
    assert own_floor_label(inp, "mir", Floor("bm25", 10, None)) == (
        "the whole-document count at its depth 10 (it reads whole documents)"
    )


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
    from longrank.results.stage_outputs import FoldWeight, Interpolation

    config = {"first_stages": {"bm25": {"method": "bm25"}}, "models": {"knrm": {"type": "knrm"}, "tk": {"type": "tk"}}}
    config["rerank_depth"] = 100
    paths = {}
    for system, weights in (("knrm+bm25", [0.0, 0.0]), ("tk+bm25", [0.0, 1.0])):
        folds = [FoldWeight(i, w, {"0.0": 0.1, "1.0": 0.2}) for i, w in enumerate(weights)]
        paths[system] = tmp_path / f"{system}.interpolation.json"
        Interpolation(system, sum(weights) / 2, folds).write(paths[system])
    inp = SimpleNamespace(
        config=config,
        models=config["models"],
        resolved=resolved_for_report(config),
        manifest=SimpleNamespace(interpolations=paths),
    )
    weights = interpolation_weights(inp)
    assert weights == {"knrm+bm25": [0.0, 0.0], "tk+bm25": [0.0, 1.0]}
    extra = {"knrm": {"Max doc len": 200}}  # a system that interpolates nothing: "–", never an empty cell
    assert weight_column(weights, extra) == ["w (dev)"]
    assert extra == {
        "knrm": {"Max doc len": 200, "w (dev)": "–"},
        "knrm+bm25": {"w (dev)": "0.00"},
        "tk+bm25": {"w (dev)": "0.50 (0.00, 1.00)"},
    }
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
    models = {
        "good": {"type": "knrm", "train": {"steps": 10}},
        "bad": {"type": "tk", "rerank_depth": 20},
        "floor": {"type": "bi_encoder", "train": {"steps": 0}},
    }
    config = {"rerank_depth": 100, "first_stages": {"bm25": {"method": "bm25"}}, "models": models}
    inp = SimpleNamespace(
        config=config,
        models=models,
        resolved=resolved_for_report(config),
        # good reads whole documents at the global depth: its own floor is query_term_matches; bad's run was not made
        manifest=SimpleNamespace(
            runs={"query_term_matches": "runs/query_term_matches.run"},
            read_floors={"good": "runs/query_term_matches.run"},
            floor_pairs=None,
        ),
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
    assert texts["good"][3:7] == [
        "query_term_matches",
        "the same as query_term_matches: it reads whole documents at the global depth",
        "–",
        "–",
    ]
    assert texts["bad"][3:7] == ["–"] * 4
