"""BM25 first stage against a hand computation of Lucene's BM25."""

from __future__ import annotations

import math

import pytest

from longrank.retrieval.bm25 import bm25_run


def lucene_bm25(query: list[str], doc: list[str], docs: list[list[str]], k1: float, b: float) -> float:
    avgdl = sum(len(d) for d in docs) / len(docs)
    score = 0.0
    for term in set(query):
        df = sum(term in d for d in docs)
        if df == 0:
            continue
        idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
        tf = doc.count(term)
        # Lucene (since 8.0, and bm25s' "lucene" method) drops the constant (k1 + 1) factor of the numerator.
        score += idf * tf / (tf + k1 * (1 - b + b * len(doc) / avgdl))
    return score


def test_bm25_scores_equal_hand_computation():
    docs = {
        "d1": "wing lift wing slipstream",
        "d2": "heat transfer in slab",
        "d3": "lift of wing at high speed flight",
        "d4": "supersonic flow over cone",
        "d5": "slab heat conduction heat flux",
    }
    queries = {"q1": "wing lift", "q2": "heat slab", "q3": "cone flight"}
    k1, b = 1.2, 0.75
    run = bm25_run(docs, queries, k1=k1, b=b, stemmer=None, stopwords=None, top_k=5)
    tokenised = {d: t.split() for d, t in docs.items()}
    for qid, q in queries.items():
        expected = {d: lucene_bm25(q.split(), toks, list(tokenised.values()), k1, b) for d, toks in tokenised.items()}
        expected = {d: s for d, s in expected.items() if s > 0}
        assert set(run[qid]) == set(expected)
        for d, s in expected.items():
            assert run[qid][d] == pytest.approx(s, rel=1e-4)


def test_query_without_any_known_term_has_no_candidates():
    run = bm25_run({"d1": "alpha beta", "d2": "beta gamma"}, {"q1": "beta", "q2": "zzz"}, stemmer=None, stopwords=None)
    assert set(run) == {"q1"} and set(run["q1"]) == {"d1", "d2"}
