"""MIR's graph construction (stages ``annotate`` and ``graphs``): passages with [SNT] markers, pivot nodes and
the t2t / s2s / p2p edges of hand-made documents against matrices drawn by hand, Eq. 1's PRF weights, the node
caps, the annotation stage on real spaCy, settings errors and the graph store."""

from __future__ import annotations

import argparse
import json
import pickle

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from longrank.data.docstore import write_docs
from longrank.mir_graphs import annotate, graphs
from longrank.mir_graphs.annotate import Annotations, cut_text
from longrank.mir_graphs.graphs import (
    build_record,
    fit_tfidf,
    graph_settings,
    p2p_edges,
    passage_windows,
    prf_weights,
    prf_words,
    words,
)
from longrank.data.records import GraphStore, RecordWriter
from longrank.errors import InputError
from longrank.io.atomic import write_text
from longrank.io.json_yaml import write_json
from longrank.io.trec_files import write_run
from longrank.models.modules.encoders import load_tokenizer


# One WordPiece per word or full stop (asserted below): sentence k spans the tokens noted beside it.
SENTENCES = [
    "Paris has many old bridges and museums.",  # tokens 0-7
    "Tourists love the river at night.",  # 8-14
    "Farmers sell bread every morning in town.",  # 15-22
    "Bread and cheese are cheap there.",  # 23-29
    "Many tourists return to Paris every year.",  # 30-37
    "Yes.",
]  # 38-39
TEXT = " ".join(SENTENCES)
SMALL = {"window": 16, "overlap": 0.25}  # stride 12: passages over tokens [0, 16), [12, 28), [24, 40)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("minilm")


def hand_annotation(text: str, sentences: list[str], entities: list[tuple[str, str, int]]) -> dict:
    """Sentence spans of ``sentences`` joined by single spaces; entities as (text, label, occurrence)."""
    spans, start = [], 0
    for s in sentences:
        spans.append([start, start + len(s)])
        start += len(s) + 1
    ents = []
    for mention, label, occurrence in entities:
        at = -1
        for _ in range(occurrence + 1):
            at = text.index(mention, at + 1)
        ents.append([at, at + len(mention), label, mention])
    return {"sentences": spans, "entities": sorted(ents)}


ANNOTATION = hand_annotation(TEXT, SENTENCES, [("Paris", "GPE", 0), ("Paris", "GPE", 1), ("every morning", "TIME", 0)])
PRF = ["bread", "tourists", "paris"]  # "paris" is also an entity: its tokens go to the entity's T nodes


def adjacency(n: int, edges: list[list[int]]) -> np.ndarray:
    a = np.zeros((n, n), dtype=int)
    for i, j in edges:
        assert i < j, "edges are stored as sorted pairs without self loops"
        a[i, j] = a[j, i] = 1
    return a


def record_of(tok, text=TEXT, annotation=ANNOTATION, prf=PRF, **cfg) -> dict:
    settings = graph_settings({**SMALL, **cfg})
    return build_record(text, annotation, prf, tok, settings, fit_tfidf([text]))


def test_passage_windows_follow_the_ranker_and_cover_the_tail():
    assert passage_windows(40, 16, 12, 2048) == [(0, 16), (12, 28), (24, 40)]
    assert passage_windows(41, 16, 12, 2048) == [(0, 16), (12, 28), (24, 40), (25, 41)]  # the tail the stride skips
    assert passage_windows(100, 16, 12, 40) == [(0, 16), (12, 28), (24, 40)]  # read up to max_tokens
    assert passage_windows(10, 16, 12, 2048) == [(0, 10)] and passage_windows(0, 16, 12, 2048) == [(0, 0)]


def test_a_three_passage_document_has_the_hand_drawn_graphs(tok):
    ids = tok(TEXT, add_special_tokens=False)["input_ids"]
    assert len(ids) == 40 and tok.convert_ids_to_tokens(ids[15:18]) == ["farmers", "sell", "bread"]
    r = record_of(tok)
    S = tok.sep_token_id
    assert r["n_tokens"] == 40
    assert r["passages"] == [
        [S, *ids[0:8], S, *ids[8:15], S, *ids[15:16]],
        [S, *ids[12:15], S, *ids[15:23], S, *ids[23:28]],
        [S, *ids[24:30], S, *ids[30:38], S, *ids[38:40]],
    ]
    # S nodes: s0-s2 in passage 0, s3-s5 in passage 1, s6-s8 in passage 2
    assert r["sentences"] == [[0, 0], [0, 9], [0, 17], [1, 0], [1, 4], [1, 13], [2, 0], [2, 7], [2, 16]]
    # T nodes: paris (entity; its PRF word loses the token), tourists, bread, bread, tourists, paris; the TIME
    # entity "every morning" is no pivot under the default labels
    assert r["tokens"] == [[0, [1]], [0, [10]], [1, [7]], [1, [14]], [2, [9]], [2, [12]]]
    assert r["token_keys"] == ["e:paris", "w:tourists", "w:bread", "w:bread", "w:tourists", "e:paris"]
    t2t = np.array(
        [
            [0, 0, 0, 0, 0, 1],
            [0, 0, 0, 0, 1, 0],
            [0, 0, 0, 1, 0, 0],
            [0, 0, 1, 0, 0, 0],
            [0, 1, 0, 0, 0, 0],
            [1, 0, 0, 0, 0, 0],
        ]
    )
    # s0 (Paris ...) and s7 (... tourists ... Paris ...); s1 (Tourists ...) and s7; s4 and s5 (bread, bread)
    s2s = np.zeros((9, 9), dtype=int)
    for i, j in [(0, 7), (1, 7), (4, 5)]:
        s2s[i, j] = s2s[j, i] = 1
    p2p = np.array([[0, 1, 1], [1, 0, 1], [1, 1, 0]])  # top 5 of 2 others: every pair sharing a word
    assert (adjacency(6, r["edges"]["t2t"]) == t2t).all()
    assert (adjacency(9, r["edges"]["s2s"]) == s2s).all()
    assert (adjacency(3, r["edges"]["p2p"]) == p2p).all()
    # without PRF words the token pivots are the entities alone, linked across passages 0 and 2
    r = record_of(tok, prf=[])
    assert r["tokens"] == [[0, [1]], [2, [12]]] and r["edges"]["t2t"] == [[0, 1]] and r["edges"]["s2s"] == [[0, 7]]


def test_p2p_links_each_passage_to_its_top_k_or_the_reverse():
    texts = ["apple banana", "apple banana cherry", "cherry durian", "elderberry"]
    vectorizer = fit_tfidf(texts)
    # 0's nearest is 1, 1's is 0, 2's is 1 (the link 1-2 is only 2's choice), 3 shares no word with any
    assert (
        adjacency(4, p2p_edges(texts, vectorizer, 1))
        == np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]])
    ).all()
    assert p2p_edges(texts, vectorizer, 3) == [[0, 1], [1, 2]] and p2p_edges(texts, vectorizer, 0) == []


def test_streamed_tfidf_equals_scikit_learns_fit():
    texts = ["apple banana apple", "banana cherry", "The cherry, the durian 42", ""]
    ours, theirs = fit_tfidf(texts), TfidfVectorizer(analyzer=words).fit(texts)
    assert ours.vocabulary_ == theirs.vocabulary_ and np.allclose(ours.idf_, theirs.idf_)
    assert np.allclose(ours.transform(texts).toarray(), theirs.transform(texts).toarray())
    assert fit_tfidf(["", "a"]) is None


def test_prf_weights_are_eq_1():
    queries = {"q1": "obesity breathing", "q2": "obesity diet plan", "q3": "the healthy diet a"}
    run = {
        "q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0},
        "q2": {"d2": 5.0, "d1": 4.0},
        "q3": {"d3": 0.5, "d2": 0.5, "d1": 0.1},
    }
    # depth 2: Q_d1 = {q1, q2}; Q_d2 = {q1, q2, q3}; Q_d3 = {q3} (the 0.5 tie goes to d2 then d3 by id)
    assert prf_weights(queries, run, depth=2) == {
        "d1": {"obesity": 1.0, "breathing": 0.5, "diet": 0.5, "plan": 0.5},
        "d2": {"obesity": 2 / 3, "breathing": 1 / 3, "diet": 2 / 3, "plan": 1 / 3, "healthy": 1 / 3},
        "d3": {"healthy": 1.0, "diet": 1.0},
    }  # "the" (a stop word) and "a" (one character) are no words
    texts = {"d1": "Obesity reduces breathing; a diet helps.", "d2": "A plan.", "d3": "Nothing of it."}
    # d1: obesity (1), then breathing and diet tie at 1/2: alphabetical; d3 has none of its words
    assert prf_words(queries, run, texts, depth=2, n_terms=2) == {"d1": ["obesity", "breathing"], "d2": ["plan"]}
    with pytest.raises(InputError, match="'q9'"):
        prf_weights(queries, {"q9": {"d1": 1.0}}, depth=2)
    # a left-out query leaves d1's Q_d after ranking: d3 does not move up into q1's top 2 in its place
    assert prf_weights(queries, run, depth=2, leave_out={"q1": {"d1"}}) == {
        "d1": {"obesity": 1.0, "diet": 1.0, "plan": 1.0},
        "d2": {"obesity": 2 / 3, "breathing": 1 / 3, "diet": 2 / 3, "plan": 1 / 3, "healthy": 1 / 3},
        "d3": {"healthy": 1.0, "diet": 1.0},
    }


def test_node_caps_keep_the_first_nodes_in_document_order(tok):
    full, capped = record_of(tok), record_of(tok, max_sentence_nodes=4, max_token_nodes=3)
    assert capped["passages"] == full["passages"]  # the [SNT] markers past the cap stay in the ids
    assert capped["sentences"] == full["sentences"][:4] and capped["tokens"] == full["tokens"][:3]
    assert capped["token_keys"] == ["e:paris", "w:tourists", "w:bread"]
    # every linked pair had one end past a cap
    assert (
        capped["edges"]["t2t"] == [] and capped["edges"]["s2s"] == [] and capped["edges"]["p2p"] == full["edges"]["p2p"]
    )


@pytest.mark.parametrize("window", [64, 8])
def test_snt_positions_hold_sep_and_t_nodes_decode_to_their_mentions(tok, window):
    sentences = [
        "Sebastian Hofstätter met Jimmy Lin in Montréal.",
        "Lin and Hofstätter wrote papers on [SEP] tokens.",
        "Their papers rank documents.",
    ]
    text = " ".join(sentences)
    annotation = hand_annotation(
        text,
        sentences,
        [
            ("Sebastian Hofstätter", "PERSON", 0),
            ("Jimmy Lin", "PERSON", 0),
            ("Montréal", "GPE", 0),
            ("Lin", "PERSON", 1),
            ("Hofstätter", "PERSON", 1),
        ],
    )
    r = record_of(tok, text, annotation, ["papers", "documents"], window=window)
    assert len(r["passages"]) == 1 if window == 64 else len(r["passages"]) > 2
    for p, position in r["sentences"]:
        assert r["passages"][p][position] == tok.sep_token_id
    # the document's literal "[SEP]" is text, not a marker
    assert sum(i == tok.sep_token_id for p in r["passages"] for i in p) == len(r["sentences"])
    normalised = lambda s: tok.decode(tok(s, add_special_tokens=False)["input_ids"])  # noqa: E731
    for (p, positions), key in zip(r["tokens"], r["token_keys"]):
        decoded = tok.decode([r["passages"][p][i] for i in positions])
        mention = normalised(key[2:])
        assert decoded == mention if window == 64 else decoded in mention  # a small window may cut a mention
    if window == 64:
        assert r["token_keys"] == [
            "e:sebastian hofstätter",
            "e:jimmy lin",
            "e:montréal",
            "e:lin",
            "e:hofstätter",
            "w:papers",
            "w:papers",
            "w:documents",
        ]
        assert r["edges"]["t2t"] == [[5, 6]] and r["edges"]["s2s"] == [[1, 2]]


def _parse(module, argv):
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.stage  # runs the annotate stage (spaCy)
def test_the_annotate_stage_writes_what_the_reader_returns(tmp_path):
    docs = {
        "d1": "Alice moved to Paris. Bob stayed in London.",
        "d2": "Hello.\n\nWorld is big.",
        "d3": "Mary visited Berlin last week and then flew home to Rome yesterday.",
    }
    write_docs(tmp_path / "data" / "docs.jsonl", iter(docs.items()))
    out = tmp_path / "annotations"
    annotate.run(
        _parse(
            annotate,
            ["--data", str(tmp_path / "data"), "--config", '{"max_words": 8, "batch_size": 2}', "--out", str(out)],
        )
    )
    ann = Annotations(out)
    assert ann.max_words == 8 and len(ann) == 3 and sorted(ann) == ["d1", "d2", "d3"]
    stats = json.loads((out / "stats.json").read_text())
    assert (
        stats["documents"] == 3
        and "tagger" not in stats["components"]
        and {"parser", "ner"} <= set(stats["components"])
    )
    for doc_id, text in docs.items():
        cut, rec = cut_text(text, 8), ann[doc_id]
        assert " ".join(cut[s:e] for s, e in rec["sentences"]).split() == cut.split()  # in order, covering the cut
        for s, e, _label, mention in rec["entities"]:
            assert cut[s:e] == mention
    assert cut_text(docs["d3"], 8) == "Mary visited Berlin last week and then flew"
    assert [docs["d1"][s:e] for s, e in ann["d1"]["sentences"]] == ["Alice moved to Paris.", "Bob stayed in London."]
    assert [docs["d2"][s:e].strip() for s, e in ann["d2"]["sentences"]] == ["Hello.", "World is big."]
    assert {(m, label) for _, _, label, m in ann["d1"]["entities"]} >= {("Paris", "GPE"), ("London", "GPE")}
    assert all(m != "Rome" for _, _, _, m in ann["d3"]["entities"])  # past max_words
    with pytest.raises(InputError, match="'d9'") as err:
        ann["d9"]
    assert str(out) in str(err.value)
    assert pickle.loads(pickle.dumps(ann))["d2"] == ann["d2"]


def test_bad_settings_are_errors_naming_the_key(tmp_path):
    for cfg, key in [
        ({"windw": 3}, "windw"),
        ({"window": -1}, "window"),
        ({"window": "128"}, "window"),
        ({"overlap": 1.0}, "overlap"),
        ({"overlap": -0.1}, "overlap"),
        ({"max_token_nodes": -1}, "max_token_nodes"),
        ({"window": 1, "overlap": 0.6}, "overlap"),
        ({"entity_labels": "GPE"}, "entity_labels"),
    ]:
        with pytest.raises(InputError, match=key):
            graph_settings(cfg)
    with pytest.raises(InputError, match="max_word"):
        annotate.settings({"max_word": 5})
    with pytest.raises(InputError, match="batch_size"):
        annotate.settings({"batch_size": 0})
    # the graphs stage refuses a bad setting before it reads anything
    with pytest.raises(InputError, match="p2p_top_k"):
        graphs.run(
            _parse(
                graphs,
                [
                    "--data",
                    str(tmp_path / "none"),
                    "--annotations",
                    str(tmp_path / "none"),
                    "--config",
                    '{"p2p_top_k": -5}',
                    "--out",
                    str(tmp_path / "out"),
                ],
            )
        )


@pytest.mark.stage  # runs the graphs stage
def test_the_graphs_stage_and_the_store_round_trip(tmp_path, tok):
    docs = {"d1": TEXT, "d2": "Bread in Paris.", "d3": ""}
    write_docs(tmp_path / "data" / "docs.jsonl", iter(docs.items()))
    annotations = {
        "d1": ANNOTATION,
        "d2": hand_annotation(docs["d2"], [docs["d2"]], [("Paris", "GPE", 0)]),
        "d3": {"sentences": [], "entities": []},
    }
    (tmp_path / "ann").mkdir()
    with RecordWriter(tmp_path / "ann" / "annotations.sqlite", "annotations") as writer:
        for doc_id, rec in annotations.items():
            writer.add(doc_id, rec)
    write_json(tmp_path / "ann" / "stats.json", {"settings": {"max_words": 100}})
    write_text(tmp_path / "prf" / "queries.tsv", "query_id\ttext\nq1\tbread cheese\nq2\ttourists\n")
    write_run(tmp_path / "prf" / "candidates.run", {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d1": 1.0}}, tag="bm25")
    out = tmp_path / "graphs"
    graphs.run(
        _parse(
            graphs,
            [
                "--data",
                str(tmp_path / "data"),
                "--annotations",
                str(tmp_path / "ann"),
                "--prf-queries",
                str(tmp_path / "prf"),
                "--config",
                json.dumps(SMALL),
                "--out",
                str(out),
            ],
        )
    )
    store = GraphStore(out)
    assert len(store) == 3 and "d2" in store and "d9" not in store and sorted(store) == ["d1", "d2", "d3"]
    assert store.settings == {
        **graph_settings(SMALL).to_json(),
        "cls_id": tok.cls_token_id,
        "sep_id": tok.sep_token_id,
        "pad_id": tok.pad_token_id,
        "vocab_size": tok.vocab_size,
    }
    vectorizer = fit_tfidf(docs.values())
    # d1's PRF words by Eq. 1: bread 1/2, cheese 1/2, tourists 1/2 (all in it)
    assert store["d1"] == build_record(
        TEXT, ANNOTATION, ["bread", "cheese", "tourists"], tok, graph_settings(SMALL), vectorizer
    )
    assert store["d2"]["token_keys"] == ["w:bread", "e:paris"]
    assert store["d3"] == {
        "passages": [[tok.sep_token_id]],
        "sentences": [[0, 0]],
        "tokens": [],
        "token_keys": [],
        "edges": {"p2p": [], "s2s": [], "t2t": []},
        "n_tokens": 0,
    }
    stats = json.loads((out / "stats.json").read_text())
    assert (
        stats["documents"] == 3
        and stats["prf_documents"] == 2
        and stats["nodes"]["passages"]["mean"] == pytest.approx(5 / 3)
    )
    assert pickle.loads(pickle.dumps(store))["d2"] == store["d2"]  # as a DataLoader worker receives it
    with pytest.raises(InputError, match="'d9'") as err:
        store["d9"]
    assert str(out) in str(err.value)
    with pytest.raises(InputError, match="graphs.sqlite not found"):
        GraphStore(tmp_path / "nowhere")


@pytest.mark.stage  # builds pretraining graphs with spaCy
def test_pretraining_graphs_read_the_positives_without_their_query_text(tmp_path, tok):
    """Pre-training reads a pseudo-query's positive without the text the query came from; MIR reads records, so the
    graph set built for pre-training must be cut from those texts, and the positive's own query must not pick its
    PRF pivots."""
    docs = {
        "d1": "Cheese making in Paris.\nBread is baked daily in London.",
        "d2": "Cheese and bread are sold in Rome.",
    }
    write_docs(tmp_path / "data" / "docs.jsonl", iter(docs.items()))
    annotate.run(_parse(annotate, ["--data", str(tmp_path / "data"), "--out", str(tmp_path / "ann")]))
    pseudo = tmp_path / "titles"
    write_text(pseudo / "queries.tsv", "query_id\ttext\npd1\tcheese making in paris\n")
    write_text(pseudo / "qrels.txt", "pd1 0 d1 1\n")
    write_text(
        pseudo / "overrides.jsonl", json.dumps({"doc_id": "d1", "text": "Bread is baked daily in London."}) + "\n"
    )
    write_json(pseudo / "folds.json", [{"train": ["pd1"], "dev": [], "test": []}])
    write_run(pseudo / "candidates.run", {"pd1": {"d1": 2.0, "d2": 1.0}}, tag="bm25")
    for name, extra in (("graphs", []), ("pretrain", ["--pretrain-queries", str(pseudo)])):
        graphs.run(
            _parse(
                graphs,
                [
                    "--data",
                    str(tmp_path / "data"),
                    "--annotations",
                    str(tmp_path / "ann"),
                    "--prf-queries",
                    str(pseudo),
                    "--config",
                    json.dumps(SMALL),
                    "--out",
                    str(tmp_path / name),
                    *extra,
                ],
            )
        )
    full, pretrain = GraphStore(tmp_path / "graphs"), GraphStore(tmp_path / "pretrain")
    read = lambda record: tok.decode([i for p in record["passages"] for i in p])  # noqa: E731
    assert "cheese" in read(full["d1"]) and "cheese" not in read(pretrain["d1"]) and "london" in read(pretrain["d1"])
    # entities from the fresh annotation: London is a pivot of the read text, Paris (taken out with the query) is not
    assert "e:london" in pretrain["d1"]["token_keys"] and "e:paris" not in pretrain["d1"]["token_keys"]
    # the collection's set gives d1 the query's words as PRF pivots; the pre-training set leaves its own query out
    assert {"w:cheese", "w:making", "w:paris"} & set(full["d1"]["token_keys"])
    assert not any(k.startswith("w:") for k in pretrain["d1"]["token_keys"])
    # another document is read as the collection has it, and the query still weights its terms
    assert pretrain["d2"] == full["d2"] and "w:cheese" in pretrain["d2"]["token_keys"]
