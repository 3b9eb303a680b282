"""Interpolation with the first stage a model reranked: the weight comes from dev queries only, the mix covers
the reranked documents, and the first stage's tail stays underneath."""

from __future__ import annotations

import argparse
import pytest

from longrank.data.corpus import Corpus
from longrank.interpolate import WEIGHTS, add_arguments, interpolate, interpolate_folds, run
from longrank.io.trec_files import read_run, write_run
from longrank.results.stage_outputs import Interpolation
from longrank.runs import mean_measure, top_candidates, with_tail


def test_minmax_mix_of_model_and_first_stage():
    mixed = interpolate({"q": {"a": 2.0, "b": 0.0}}, {"q": {"a": 1.0, "b": 3.0, "c": 0.5}}, 0.25)
    assert mixed == {"q": {"a": pytest.approx(0.25), "b": pytest.approx(0.75)}}


def test_weight_is_chosen_on_dev_and_applied_to_the_reranked_head(tiny_data):
    corpus = Corpus(tiny_data / "data")
    bm25 = read_run(tiny_data / "bm25.run")
    fold = corpus.folds[0]
    relevant = {q: {d for d, g in corpus.qrels.get(q, {}).items() if g > 0} for q in corpus.queries}
    # dev: the model puts the relevant documents last (any weight > 0 hurts); test: an oracle model
    dev = {
        q: {d: (-1.0 if d in relevant[q] else 1.0) for d in top_candidates(bm25, q, 5)}
        for q in fold["dev"]
        if q in bm25
    }
    oracle = {
        q: {d: (1.0 if d in relevant[q] else 0.0) + i * 1e-3 for i, d in enumerate(top_candidates(bm25, q, 5))}
        for q in fold["test"]
        if q in bm25
    }
    model_run = with_tail(oracle, bm25, corpus.test_queries())
    mixed, (choice,) = interpolate_folds(model_run, [dev], bm25, 5, corpus)
    curve = choice.dev_ndcg10_by_weight
    assert set(curve) == {str(w) for w in WEIGHTS}
    assert choice.weight == max(WEIGHTS, key=lambda w: (curve[str(w)], w))
    assert choice.dev_ndcg10 == pytest.approx(
        mean_measure(interpolate(dev, bm25, choice.weight), corpus.qrels, fold["dev"])
    )
    assert choice.weight < 1.0  # dev said the model alone is worse
    expected = with_tail(interpolate(oracle, bm25, choice.weight), bm25, corpus.test_queries())
    assert mixed == expected  # the head (top 5) is mixed, the tail keeps BM25's order below it
    for q in oracle:
        assert top_candidates(mixed, q, 5) == top_candidates(expected, q, 5)
        assert top_candidates(mixed, q, len(bm25[q]))[5:] == top_candidates(bm25, q, len(bm25[q]))[5:]


def test_stage_writes_the_run_and_the_weights_named_by_the_system(tiny_data):
    corpus = Corpus(tiny_data / "data")
    bm25 = read_run(tiny_data / "bm25.run")
    fold = corpus.folds[0]
    write_run(tiny_data / "dev.run", {q: {d: -s for d, s in bm25[q].items()} for q in fold["dev"] if q in bm25}, "m")
    write_run(
        tiny_data / "m.run",
        with_tail({q: dict(list(bm25[q].items())[:3]) for q in fold["test"] if q in bm25}, bm25, corpus.test_queries()),
        "m",
    )
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    run(
        parser.parse_args(
            [
                "--model-run",
                str(tiny_data / "m.run"),
                "--dev-runs",
                str(tiny_data / "dev.run"),
                "--candidates",
                str(tiny_data / "bm25.run"),
                "--rerank-depth",
                "3",
                "--data",
                str(tiny_data / "data"),
                "--out",
                str(tiny_data / "m+bm25.run"),
            ]
        )
    )
    assert set(read_run(tiny_data / "m+bm25.run")) == set(read_run(tiny_data / "m.run"))
    assert (tiny_data / "m+bm25.run").read_text().split("\n")[0].endswith(" m+bm25")
    info = Interpolation.read(tiny_data / "m+bm25.interpolation.json")  # the shape the report reads
    assert info.system == "m+bm25" and info.folds[0].weight == info.weight
    assert set(info.folds[0].dev_ndcg10_by_weight) == {str(w) for w in WEIGHTS}


def test_reranked_ties_keep_the_first_stages_order_not_the_doc_ids(tmp_path):
    """A reranker that scores documents alike (a query with no word it knows) must hand them back as the
    first stage ranked them: BM25's z9, m5, a1 came back a1, m5, z9 (doc-id order). Every writer of a reranked or
    interpolated run breaks ties by the first stage's rank (``io.ranked``)."""
    from longrank.io.trec_files import ranked

    first = {"q": {"z9": 3.0, "m5": 2.0, "a1": 1.0, "b2": 0.5}}
    tied = {"q": {"a1": 0.5, "m5": 0.5, "z9": 0.5}}
    assert [d for d, _ in ranked(tied["q"], first["q"])] == ["z9", "m5", "a1"]
    assert [d for d, _ in ranked(tied["q"])] == ["a1", "m5", "z9"]  # no first stage: doc id, as before
    write_run(tmp_path / "r.run", with_tail(tied, first, ["q"]), "m", first_stage=first)
    lines = [line.split() for line in (tmp_path / "r.run").read_text().splitlines()]
    assert [(d, r) for _, _, d, r, _, _ in lines] == [("z9", "1"), ("m5", "2"), ("a1", "3"), ("b2", "4")]
    # interpolated: a model that cannot tell them apart leaves the first stage's order at any weight
    mixed = interpolate(tied, first, 1.0)
    write_run(tmp_path / "mixed.run", mixed, "m+first", first_stage=first)
    assert [line.split()[2] for line in (tmp_path / "mixed.run").read_text().splitlines()] == ["z9", "m5", "a1"]
