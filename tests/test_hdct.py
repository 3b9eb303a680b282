"""HDCT: term weights to pseudo term frequencies, its training targets, its BM25 index (equal weights are plain
BM25 up to k1's scale; saving and loading keep the scores) and the stage end to end on a tiny collection."""

from __future__ import annotations


import bm25s
import numpy as np
import pytest

from longrank.data.corpus import Corpus
from longrank.data.words import stop_words, tokenize
from longrank.errors import InputError
from longrank.io.json_yaml import read_json
from longrank.models import hdct_encoder
from longrank.retrieval import hdct_index
from longrank.retrieval.candidates import retrieve
from longrank.retrieval.hdct_index import build_index, pseudo_frequencies
from longrank.train import hdct_build as hdct

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

DOCS = {
    "d1": "wing lift wing drag of the wing",
    "d2": "heat transfer in a heated slab",
    "d3": "lift of a slender wing body",
    "d4": "drag of cones at supersonic speed",
}


def test_weights_map_to_integer_pseudo_frequencies():
    passages = [[("wing", 0.25), ("wing", 0.09), ("lift", 0.0), ("drag", -1.0)], [("wing", 0.16), ("body", 1.0)]]
    # a term once per passage, round(m*sqrt(w)) of its largest w: wing 50 (not 50 + 30) in passage 1, 40 in passage 2;
    # lift 0 and drag (clipped) 0: not indexed
    assert pseudo_frequencies(passages, m=100, combine="sum") == {"wing": 90, "body": 100}
    assert pseudo_frequencies(passages, m=100, combine="max") == {"wing": 50, "body": 100}
    assert pseudo_frequencies(passages, m=100, combine="decay") == {"wing": 70, "body": 50}  # 50 + 40/2; 100/2
    assert pseudo_frequencies([[("wing", 0.3)]], m=10) == {"wing": 5}  # round(10 * 0.5477)
    assert pseudo_frequencies([[("wing", 0.3)], [("wing", 0.3)], [("wing", 0.3)]], m=10, combine="decay") == {
        "wing": 9
    }  # int(5 + 2.5 + 1.67)
    with pytest.raises(InputError, match="combine 'mean'"):
        pseudo_frequencies(passages, combine="mean")


def test_a_word_repeated_in_a_passage_counts_once_so_equal_weights_index_every_term_alike(tmp_path):
    """DeepCT and HDCT replace a term's frequency by its predicted importance: with every weight equal, a word said
    five times and a word said once get the same pseudo frequency, and BM25 over them ranks by the terms' idf alone."""
    doc_ids = list(DOCS)
    tfs = [
        pseudo_frequencies([[(w, 0.25) for w in tokenize(DOCS[d]) if w not in stop_words()]], m=100, combine="sum")
        for d in doc_ids
    ]
    assert all(set(tf.values()) == {50} for tf in tfs)
    build_index(doc_ids, tfs, 0.9 * 50, 0.4, tmp_path / "index")  # tf, dl and k1 scaled alike
    binary = bm25s.BM25(k1=0.9, b=0.4, method="lucene")  # each distinct term once
    binary.index(
        [sorted({w for w in tokenize(DOCS[d]) if w not in stop_words()}) for d in doc_ids], show_progress=False
    )
    weighted = bm25s.BM25.load(str(tmp_path / "index"))
    for query in (["wing"], ["lift", "wing"], ["drag", "supersonic"]):
        a, c = binary.get_scores(query), weighted.get_scores(query)
        assert np.allclose(c, a, rtol=1e-5) and (a > 0).sum() >= 1


def test_title_and_pseudo_query_targets_match_a_hand_computation(tmp_path):
    assert hdct.term_recall(["wing", "lift", "the", "drag"], ["Wing body", "wing lift"]) == [1.0, 0.5, 0.0, 0.0]
    (tmp_path / "docs.jsonl").write_text("")
    corpus = Corpus(tmp_path)
    corpus.__dict__["docs"] = {
        "d1": "Wing Lift. wing lift of a slender wing body at low speed"
    }  # the title repeated in the body
    spec = hdct.settings({"passage_words": 4, "targets": "titles"})
    examples = hdct.training_examples(spec, corpus, {"d1": ["wing lift"]})
    # both copies of the title are taken out; the rest in passages of 4 words, targets by the title's terms
    assert examples == [
        (["of", "a", "slender", "wing"], [0.0, 0.0, 0.0, 1.0]),
        (["body", "at", "low", "speed"], [0.0] * 4),
    ]


def test_index_save_and_load_give_identical_scores(tmp_path):
    doc_ids = list(DOCS)
    tfs = [
        pseudo_frequencies([[(w, 0.1 + 0.05 * i) for i, w in enumerate(tokenize(DOCS[d])) if w not in stop_words()]])
        for d in doc_ids
    ]
    build_index(doc_ids, tfs, 0.9, 0.4, tmp_path / "index")
    (tmp_path / "stats.json").write_text('{"weight_seconds": 1.0, "index_seconds": 0.5, "index_mb": 0.1}')
    in_memory = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    in_memory.index([[t for t, f in sorted(tf.items()) for _ in range(f)] for tf in tfs], show_progress=False)
    run, stats = hdct_index.retrieve(
        tmp_path, {"q1": "the wing lift", "q2": "supersonic drag", "q3": "the of"}, top_k=3
    )
    assert set(run) == {"q1", "q2"}  # q3 has only stop words: no candidates
    expected = in_memory.get_scores(["wing", "lift"])
    for doc_id, score in run["q1"].items():
        assert score == pytest.approx(float(expected[doc_ids.index(doc_id)]), rel=1e-6)
    assert (
        stats["build_seconds"] == 1.5 and stats["index_bytes"] == pytest.approx(1e5) and "query_ms_per_query" in stats
    )


def test_the_stage_trains_indexes_and_retrieves(tiny_data):
    corpus = Corpus(tiny_data / "data")
    titles = {d: " ".join(corpus.docs[d].split()[:2]) for d in list(corpus.docs)[:40]}
    spec = {"name": "hdct", "method": "hdct", "steps": 3, "batch_size": 4, "passage_words": 30, "max_passages": 2}
    stats = hdct.build(spec, corpus, tiny_data / "hdct" / "hdct", titles=titles, device="cpu")
    assert stats["documents"] == len(corpus.docs) and stats["docs_per_second"] > 0 and len(stats["loss_curve"]) == 1
    run, cost = retrieve(spec, corpus, {}, depth=10, artifacts=[tiny_data / "hdct" / "hdct"])
    assert len(run) == len(corpus.queries) and all(len(r) <= 10 for r in run.values())
    assert (
        cost["documents"] == len(corpus.docs)
        and read_json(tiny_data / "hdct" / "hdct" / "stats.json")["settings"]["m"] == 100
    )
    model = hdct_encoder.load_model(tiny_data / "hdct" / "hdct", hdct.settings(spec).encoder)
    assert len(model([["wing", "lift", "airfoil"]])[0]) == 3
