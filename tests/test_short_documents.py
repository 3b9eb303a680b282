"""Short documents (abstracts of ~40 words) through every stage that derives text from documents, with the
settings a user copies from config/irled.yaml (written for court judgments of ~4,800 words): pseudo-queries
(formulated from 300-word passages, ICT spans), query formulation of short passages, HDCT's passages and MIR's
windows and graphs. Each stage either adapts (a passage is at most its document) or stops with an InputError that
names the setting and what the collection has."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch

from longrank.data.corpus import Corpus, PseudoQueryCorpus
from longrank.data.data import prepare
from longrank.data.queries import formulate
from longrank.data.records import GraphStore
from longrank.data.words import tokenize
from longrank.mir_graphs import annotate
from longrank.mir_graphs import graphs
from longrank.mir_graphs.annotate import Annotations
from longrank.errors import InputError
from longrank.io.json_yaml import read_json
from longrank.models.mir import MIR
from longrank.models.modules.encoders import bert_base_config, load_tokenizer, random_encoder
from longrank.retrieval import hdct_index
from longrank.retrieval.candidates import retrieve
from longrank.train import hdct_build as hdct
from longrank.train import pseudo_queries
from longrank.train.pseudo_queries import _span

from conftest import synthetic_collection, write_local_collection

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

# config/irled.yaml's settings, as a user copies them for another local collection
IRLED_FORMULATION = {"method": "tfidf_terms", "n": 25}
IRLED_PSEUDO = {"source": "formulated", "count": 2000, "passage_words": 300, "seed": 0}
IRLED_GRAPHS = {"max_doc_tokens": 416}  # the 416 tokens models.mir reads of a document there


def prepared(root, docs, queries, qrels):
    prepare(
        write_local_collection(root / "src", docs, queries, qrels),
        IRLED_FORMULATION,
        {"method": "holdout", "dev": 0.25, "test": 0.25},
        root / "data",
    )
    return Corpus(root / "data")


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    """A prepared collection of 120 abstracts of 41-46 words, and config/irled.yaml's formulated pseudo-query set of it."""
    root = tmp_path_factory.mktemp("short")
    corpus = prepared(root, *synthetic_collection())
    lengths = [len(text.split()) for text in corpus.docs.values()]
    assert max(lengths) <= 46 and np.median(lengths) < 50
    stats = pseudo_queries.build(
        corpus, "formulated", IRLED_PSEUDO, root / "pseudo", query_formulation=IRLED_FORMULATION
    )
    return root, corpus, stats


# pseudo-queries ------------------------------------------------------------------------------------------------
def test_formulated_300_word_passages_of_40_word_documents_are_half_of_each_document(short):
    root, corpus, stats = short
    pseudo = PseudoQueryCorpus(root / "data", root / "pseudo")
    assert (
        stats["made"] == len(corpus.docs) and stats["shortened"] == stats["made"]
    )  # every document, every span halved
    assert stats["pseudo_queries"] >= 100 and len(pseudo.queries) == stats["pseudo_queries"]
    for qid, query in pseudo.queries.items():
        (doc_id,) = pseudo.qrels[qid]
        words, positive = corpus.docs[doc_id].split(), pseudo.docs[doc_id].split()
        half = len(words) // 2
        assert len(positive) == len(words) - half
        start = next(
            i for i in range(len(words) - half + 1) if words[:i] + words[i + half :] == positive
        )  # a span taken out
        passage = {w.lower() for w in words[start : start + half]}
        assert 1 <= len(query.split()) <= 25 and set(query.split()) <= passage  # tf-idf terms of the passage


def test_ict_spans_longer_than_half_a_document_are_halved_and_shorter_ones_kept(short):
    root, corpus, _ = short
    halved = pseudo_queries.build(corpus, "ict30", {"source": "ict", "count": 50, "query_words": 30}, root / "ict30")
    kept = pseudo_queries.build(corpus, "ict6", {"source": "ict", "count": 50, "query_words": 6}, root / "ict6")
    assert halved["shortened"] == halved["made"] == 50 and kept["shortened"] == 0 and kept["made"] == 50
    lengths = {q: len(t.split()) for q, t in PseudoQueryCorpus(root / "data", root / "ict30").queries.items()}
    assert all(n == len(corpus.docs[q[1:]].split()) // 2 for q, n in lengths.items())
    assert read_json(root / "ict6" / "stats.json")["query_length_mean"] == 6


def test_a_short_documents_span_leaves_the_long_documents_draws_alone():
    rng, short_rng = np.random.default_rng(0), np.random.default_rng(1)
    untouched = np.random.default_rng(1).bit_generator.state
    start, end = _span(["w"] * 700, 300, rng, short_rng)
    assert end - start == 300 and short_rng.bit_generator.state == untouched
    drawn = rng.bit_generator.state
    start, end = _span(["w"] * 40, 300, rng, short_rng)
    assert end - start == 20 and 0 <= start <= 20 and rng.bit_generator.state == drawn
    assert [_span(["w"] * n, 300, rng, short_rng)[1] > 0 for n in (0, 1, 2, 3)] == [False, False, True, True]


def test_one_word_documents_stop_with_the_setting_and_the_collections_median(tmp_path):
    words = ["wing", "lift", "airfoil", "drag", "flutter", "nozzle", "shock", "plate"]
    docs = {f"d{i}": words[i % len(words)] for i in range(24)}
    queries = {f"q{i}": words[i] for i in range(8)}
    corpus = prepared(tmp_path, docs, queries, [(f"q{i}", f"d{i}", 1) for i in range(8)])
    with pytest.raises(
        InputError,
        match=r"pseudo_queries\.formulated: 0 pseudo-queries left of 0 made from 24 documents "
        r"of median 1 words.*pseudo_queries\.formulated\.passage_words",
    ):
        pseudo_queries.build(
            corpus, "formulated", IRLED_PSEUDO, tmp_path / "pseudo", query_formulation=IRLED_FORMULATION
        )
    assert not (tmp_path / "pseudo").exists()


# query formulation of passages ---------------------------------------------------------------------------------
def test_formulating_short_or_no_passages_keeps_what_they_have():
    docs = {"d1": "wing lift on a slender airfoil", "d2": "heat transfer in a slab", "d3": "the drag of cones"}
    assert formulate({}, docs, "tfidf_terms", 25) == {}  # scikit-learn refuses to transform no texts
    (terms,) = formulate({"p": "lift of a slender wing"}, docs, "tfidf_terms", 25).values()
    assert sorted(terms.split()) == ["lift", "slender", "wing"]  # fewer than 25: every term it has
    assert formulate({"p": "slender wing"}, docs, "first_words", 25) == {"p": "slender wing"}
    with pytest.raises(InputError, match="query_formulation.method: tfidf_terms finds no term in the 2 documents"):
        formulate({"p": "the of"}, {"d1": "the of and", "d2": "a 1990"}, "tfidf_terms", 25)


# HDCT ----------------------------------------------------------------------------------------------------------
def test_hdct_reads_a_short_document_as_one_passage():
    text = " ".join(f"word{i}" for i in range(40))
    assert hdct_index.passages_of(text, 100, 20) == [tokenize(text)]
    assert hdct_index.passages_of(text, 30, 20) == [tokenize(text)[:30], tokenize(text)[30:]]
    assert hdct_index.passages_of("", 100, 20) == [] and hdct_index.passages_of("lift", 100, 20) == [["lift"]]


def test_hdct_trains_on_the_short_set_and_indexes_every_abstract_whole(short):
    root, corpus, stats = short
    spec = {"name": "hdct", "method": "hdct", "targets": "formulated", "steps": 2, "batch_size": 4}  # passage_words 100
    built = hdct.build(spec, corpus, root / "hdct", pseudo_dir=root / "pseudo", device="cpu")
    # one passage per document with a pseudo-query, the document without its passage
    assert built["training_passages"] == stats["pseudo_queries"]
    assert built["documents"] == len(corpus.docs) and built["empty_documents"] == 0
    run, _ = retrieve(spec, corpus, {}, depth=10, artifacts=[root / "hdct"])
    assert len(run) == len(corpus.queries)


def test_hdct_refuses_to_index_a_collection_without_a_term(tmp_path):
    with pytest.raises(InputError, match="first stage hdct: none of the 2 documents keeps an indexable term"):
        hdct_index.build_index(["d1", "d2"], [Counter(), Counter()], 0.9, 0.4, tmp_path / "index")


# MIR -----------------------------------------------------------------------------------------------------------
def test_a_short_document_is_one_window_holding_all_of_it():
    assert graphs.passage_windows(55, 128, 96, 416) == [(0, 55)]
    assert graphs.passage_windows(1, 128, 96, 416) == [(0, 1)] and graphs.passage_windows(0, 128, 96, 416) == [(0, 0)]


def test_mir_graphs_of_short_abstracts_are_one_passage_each_and_score(short):
    root, corpus, _ = short
    annotate.annotate(corpus.docs.items(), len(corpus.docs), annotate.settings({}), root / "annotations")
    stats = graphs.build(corpus, Annotations(root / "annotations"), root / "pseudo", IRLED_GRAPHS, root / "graphs")
    store = GraphStore(root / "graphs")
    records = {doc_id: store[doc_id] for doc_id in corpus.docs}
    tok = load_tokenizer("minilm")
    for doc_id, record in records.items():
        (passage,) = record["passages"]  # one window: the whole abstract
        assert record["n_tokens"] == len(tok(corpus.docs[doc_id], add_special_tokens=False)["input_ids"]) < 128
        assert len(passage) == record["n_tokens"] + len(record["sentences"]) and record["edges"]["p2p"] == []
    assert stats["prf_documents"] > 0 and stats["nodes"]["tokens"]["mean"] > 0  # PRF words of the short set as pivots
    assert any(record["edges"]["t2t"] for record in records.values())

    encoder = random_encoder(
        bert_base_config(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128)
    )
    model = MIR(encoder, tok, max_query_len=8)
    model.use_graphs(records, store.settings)
    doc_ids = sorted(records)[:6]
    with torch.no_grad():
        scores = model(**model.encode(["wing lift airfoil"] * len(doc_ids), doc_ids, [""] * len(doc_ids)))
    assert scores.shape == (len(doc_ids),) and torch.isfinite(scores).all()
    assert json.loads((root / "graphs" / "stats.json").read_text())["nodes"]["passages"]["mean"] == 1


# the workflow ------------------------------------------------------------------------------------------------------
def short_abstracts_config(root) -> dict:
    """config/irled.yaml's settings over the shipped collection of short abstracts (tests/collections/short): only MIR (with its pseudo-query set and
    graphs) and an HDCT first stage trained on that set run, in a few steps."""
    import yaml

    from conftest import REPO

    names = set()
    for path in ("config.yaml", "irled.yaml"):
        names |= set(yaml.safe_load((REPO / "config" / path).read_text())["models"])
    short = REPO / "tests" / "collections" / "short"  # 150 abstracts of 30-50 words (tests/collections/make.py)
    dataset = {
        "source": "local",
        **{
            key: str(short / f"{key}{ext}") for key, ext in (("docs", ".jsonl"), ("queries", ".tsv"), ("qrels", ".txt"))
        },
    }
    return {
        "dataset": {**dataset, "name": "abstracts"},
        "first_stages": [
            {"name": "bm25", "method": "bm25", "top_k": 20},
            {"name": "hdct", "method": "hdct", "targets": "formulated", "steps": 2, "batch_size": 4, "top_k": 20},
        ],
        "rerank_depth": 10,
        "models": {
            **{name: {"enabled": False} for name in names - {"mir"}},
            "mir": {
                "rerank_depth": 5,
                "train": {
                    "steps": 2,
                    "batch_size": 1,
                    "negatives": 1,
                    "warmup_steps": 1,
                    "eval_every": 2,
                    "patience": 1,
                },
            },
        },
    }


@pytest.mark.e2e
def test_the_workflow_runs_irleds_settings_on_short_abstracts(tmp_path, ir_datasets_home):

    import yaml

    from conftest import REPO, snakemake

    (tmp_path / "config").symlink_to(REPO / "config")  # `configfile:` resolves against the working directory
    (tmp_path / "abstracts.yaml").write_text(yaml.safe_dump(short_abstracts_config(tmp_path)))
    results = tmp_path / "results" / "abstracts"
    targets = ["results/abstracts/eval/mir.tsv", "results/abstracts/candidates/hdct.run"]  # as the rules name them
    snakemake(tmp_path, *targets, "--configfile", str(REPO / "config" / "irled.yaml"), str(tmp_path / "abstracts.yaml"))
    stats = read_json(results / "pseudo_queries" / "formulated" / "stats.json")
    assert stats["settings"]["passage_words"] == 300 and stats["shortened"] == stats["made"] > 100
    assert read_json(results / "graphs" / "mir" / "stats.json")["nodes"]["passages"]["mean"] == 1
    assert all((tmp_path / target).stat().st_size > 0 for target in targets)
