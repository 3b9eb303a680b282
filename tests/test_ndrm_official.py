"""NDRM's settings for the Conformer-Kernel authors' behaviour: their text processing on
queries and documents alike, with the impact index keyed on the model's terms; padding windows scored (the
padding floor) and padding convolved; their clipped IDF; the <S> </S> document markers; and the word2vec stage's
skip-gram over processed text."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from longrank.data import word2vec as stage
from longrank.data.corpus import Corpus
from longrank.data.data import prepare
from longrank.data.words import CK_STOP_WORDS, OOV, Vocabulary, analyzer, tokenize
from longrank.errors import InputError
from longrank.models.modules.conformer import ConformerLayer
from longrank.models.ndrm import LOG_EPS, ndrm_idf
from longrank.models.registry import build_model
from longrank.retrieval.impact import impact_run

from conftest import synthetic_collection, write_local_collection

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

SMALL = {
    "type": "ndrm",
    "hidden_dim": 16,
    "n_heads": 4,
    "conv_groups": 4,
    "conv_window": 5,
    "n_layers": 1,
    "max_doc_len": 60,
    "pool_window": 16,
    "pool_stride": 8,
    "max_query_len": 8,
}
CK = {"text_processing": "ck"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("ndrm_official")
    docs, queries, qrels = synthetic_collection(n_queries=4, docs_per_query=4)
    docs["d_plural"] = "The airplanes and their wings: studies by the engineers"
    docs["d_short"] = "airplane"
    queries = {**queries, "q_plural": "Airplanes study?", "q_stop": "the of and"}
    dataset = write_local_collection(root / "src", docs, queries, qrels)
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.25, "test": 0.25}, root / "data")
    return Corpus(root / "data")


# ---- item 5: one processing for queries, documents, vocabulary and the impact index -------------------------


def test_ck_processing_is_the_authors_lowercase_alphanumerics_stop_words_and_krovetz():
    analyze = analyzer("ck")
    # lower-cased, "'", ",", ";", "." and "_" become spaces, "the" and "were" are stop words, Krovetz stems
    assert analyze("The Airplanes' wings, were STUDIED; run_fast 3.5") == [
        "airplane",
        "wings",
        "studied",
        "run",
        "fast",
        "3",
        "5",
    ]
    assert analyze("airplanes studies") == ["airplane", "study"]
    assert analyze("the of and would") == []  # the authors' stop words, queries and documents alike
    assert len(CK_STOP_WORDS) == 542 and {"a", "the", "zero", "youve", "uucp"} <= CK_STOP_WORDS
    assert "s" in CK_STOP_WORDS and analyze("U.S.A.") == []  # single letters are in their list
    assert tokenize("The Airplanes") == ["the", "airplanes"]  # the default processing is untouched


def test_query_and_document_go_through_the_same_processing(corpus):
    model = build_model({**SMALL, **CK, "variant": "ndrm2"}, corpus)
    vocab = model.embedder.vocab
    assert vocab.analyze is not None and "airplane" in vocab.index and "airplanes" not in vocab.index
    assert not set(vocab.words[2:]) & CK_STOP_WORDS  # no stop word is a term of the documents' vocabulary
    assert model.query_terms(corpus.queries["q_plural"]) == ["airplane", "study"]
    assert model.query_terms(corpus.queries["q_stop"]) == []  # the authors' code keeps no term either
    doc = corpus.docs["d_plural"]
    assert model._doc_ids([doc])[0].tolist() == [vocab.index.get(t, OOV) for t in analyzer("ck")(doc)]
    batch = model.encode([corpus.queries["q_plural"]], ["d_plural"], [doc])
    assert batch["tf"].tolist() == [[1.0, 1.0]]  # "Airplanes" matches "airplanes", "study" matches "studies"
    assert batch["dlen"].tolist() == [float(len(analyzer("ck")(doc)))]  # stop words are not terms of |d|
    plain = build_model({**SMALL, "variant": "ndrm2"}, corpus)  # the default: tokens, no stemming
    assert plain.encode([corpus.queries["q_plural"]], ["d_plural"], [doc])["tf"].tolist() == [[1.0, 0.0]]


def test_the_impact_index_and_the_model_agree_on_terms(corpus, tmp_path):
    model = build_model(
        {**SMALL, **CK, "variant": "ndrm3", "doc_markers": True, "idf_formula": "clipped"}, corpus
    ).eval()
    model.build_artifacts("fold", corpus, [], tmp_path, batch_size=7)
    meta = json.loads((tmp_path / "impact.json").read_text())
    assert meta["query_terms"] == {q: model.query_terms(t) for q, t in corpus.queries.items()}
    assert meta["query_terms"]["q_plural"] == ["airplane", "study"]
    assert all(t in model.embedder.vocab.index for t in meta["terms"])
    # the first stage reads the index's terms: its scores are the model's on every document
    folds = [{"test": sorted(corpus.queries)}]
    run, _ = impact_run([tmp_path], folds, corpus.queries, top_k=len(corpus.docs))
    doc_ids = sorted(corpus.docs)
    docs = [corpus.docs[d] for d in doc_ids]
    expected = model.score_pairs([corpus.queries["q_plural"]] * len(docs), doc_ids, docs).detach().numpy()
    got = np.array([run["q_plural"][d] for d in doc_ids])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert "q_stop" not in run  # no term, no candidates


def test_a_word2vec_file_of_other_terms_is_refused(corpus):
    stage.build(corpus.dir / "docs.jsonl", corpus.dir / stage.FILE_NAME, dim=8, window=3, epochs=1, min_count=1)
    try:
        with pytest.raises(InputError, match="processing: ck"):
            build_model({**SMALL, **CK, "embeddings": "word2vec"}, corpus)
        stage.build(
            corpus.dir / "docs.jsonl",
            corpus.dir / stage.FILE_NAME,
            dim=8,
            window=3,
            epochs=1,
            min_count=1,
            processing="ck",
            architecture="skipgram",
            sample=1e-4,
            alpha=0.05,
        )
        model = build_model({**SMALL, **CK, "variant": "ndrm1", "embeddings": "word2vec"}, corpus)
        vocab = model.embedder.vocab
        keys = {line.split(" ")[0] for line in (corpus.dir / stage.FILE_NAME).read_text().splitlines()[1:]}
        assert {w for w, df in zip(vocab.words, vocab.doc_freq) if df > 0} == keys  # every document term has its vector
        assert "airplane" in keys and "airplanes" not in keys and not keys & CK_STOP_WORDS
        meta = json.loads((corpus.dir / stage.META_FILE).read_text())
        assert (
            meta["processing"] == "ck" and meta["architecture"] == "skipgram" and meta["num_docs"] == len(corpus.docs)
        )
        # the stage's document frequencies are the processed terms' (what NDRM2's IDF reads)
        counted = Vocabulary.build(corpus.docs.values(), analyze=analyzer("ck"))
        assert (
            model.embedder.vocab.doc_freq[model.embedder.vocab.index["airplane"]]
            == counted.doc_freq[counted.index["airplane"]]
            == 2
        )
    finally:
        for name in (stage.FILE_NAME, stage.META_FILE, stage.DOC_FREQ_FILE):
            (corpus.dir / name).unlink(missing_ok=True)


def test_the_word2vec_stage_trains_skipgram(tmp_path):
    lines = [json.dumps({"doc_id": f"d{i}", "text": "wing lift drag airfoil flow " * 4}) + "\n" for i in range(10)]
    (tmp_path / "docs.jsonl").write_text("".join(lines))
    cbow = stage.train_word2vec(tmp_path / "docs.jsonl", dim=4, epochs=1, min_count=1)
    skip = stage.train_word2vec(
        tmp_path / "docs.jsonl",
        dim=4,
        epochs=1,
        min_count=1,
        architecture="skipgram",
        sample=1e-4,
        alpha=0.05,
        window=10,
    )
    assert (cbow.sg, skip.sg, skip.window, skip.sample, skip.alpha) == (0, 1, 10, 1e-4, 0.05)
    with pytest.raises(InputError, match="architecture"):
        stage.train_word2vec(tmp_path / "docs.jsonl", architecture="glove")


# ---- item 7: padding, IDF, markers ----------------------------------------------------------------------------


def test_scoring_padding_windows_puts_the_padding_floor_under_a_terms_score(corpus):
    torch.manual_seed(0)
    off = build_model({**SMALL, "variant": "ndrm1"}, corpus).eval()
    on = build_model({**SMALL, "variant": "ndrm1", "score_padding_windows": True}, corpus).eval()
    on.load_state_dict(off.state_dict())
    with torch.no_grad():  # a scorer that prefers empty windows: -Σ features, so log(1e-6) features score highest
        for model in (off, on):
            model.window_scorer[0].weight.copy_(torch.eye(16, 10))
            model.window_scorer[0].bias.fill_(20.0)
            model.window_scorer[3].weight.fill_(-1.0)
            model.window_scorer[3].bias.zero_()
    floor = on.window_scorer(torch.full((10,), math.log(LOG_EPS))).item()
    doc = "wing lift"  # 2 terms: one real window of 16, the rest of the 60 (64 aligned) is padding
    s_off = off.term_scores(["wing"], ["d"], [doc])[0, 0].item()
    s_on = on.term_scores(["wing"], ["d"], [doc])[0, 0].item()
    assert on._doc_ids([doc]).shape == (1, 60) and off._doc_ids([doc]).shape == (1, 2)
    assert s_on == pytest.approx(max(s_off, floor), abs=1e-5)
    assert floor > s_off + 1.0  # here the floor is the score: every short document gets it
    # the sum over terms is still the score (QTI) with padding windows scored
    pairs = on.score_pairs(["wing lift"], ["d"], [doc]).item()
    assert pairs == pytest.approx(on.term_scores(on.query_terms("wing lift"), ["d"], [doc]).sum().item(), abs=1e-4)


def test_convolve_padding_lets_padding_reach_the_terms(corpus):
    torch.manual_seed(0)
    x = torch.randn(1, 12, 8)
    mask = torch.tensor([[1.0] * 4 + [0.0] * 8])
    for flag in (False, True):
        layer = ConformerLayer(8, 2, conv_window=5, conv_groups=2, dropout=0.0, convolve_padding=flag).eval()
        padded = x.clone()
        padded[:, 4:] += 5.0  # other vectors at the padding
        a, b = layer(x, mask), layer(padded, mask)
        if flag:  # the authors' code: the convolution reads the padding's vectors
            assert not torch.allclose(a[:, :4], b[:, :4])
        else:  # this project's default: zeroed, so a document never depends on its padding
            torch.testing.assert_close(a[:, :4], b[:, :4])
            assert (a[:, 4:] == 0).all()
    model = build_model({**SMALL, "variant": "ndrm1", "convolve_padding": True}, corpus)
    assert all(layer.convolve_padding for layer in model.encoder)


def test_ndrm2_idf_formulas():
    vocab = Vocabulary(["a", "b", "c", "d"], [1, 5, 8, 0], num_docs=10)
    smoothed = ndrm_idf(vocab, "smoothed").tolist()
    clipped = ndrm_idf(vocab, "clipped").tolist()
    expected_smoothed = [0.0, math.log(10.5 / 0.5 + 1)] + [
        math.log((10 - df + 0.5) / (df + 0.5) + 1) for df in (1, 5, 8, 0)
    ]
    assert smoothed == pytest.approx(expected_smoothed, rel=1e-6)
    # the authors': max(log((N − df + 0.5) / (df + 0.5)), 0): 0 at df = N/2 and above
    assert clipped == pytest.approx(
        [0.0, math.log(10.5 / 0.5), math.log(9.5 / 1.5), 0.0, 0.0, math.log(10.5 / 0.5)], rel=1e-6
    )
    with pytest.raises(InputError, match="idf_formula"):
        ndrm_idf(vocab, "bm25")


def test_clipped_idf_reaches_ndrm2(corpus):
    model = build_model({**SMALL, "variant": "ndrm2", "idf_formula": "clipped"}, corpus)
    torch.testing.assert_close(model.idf, ndrm_idf(model.embedder.vocab, "clipped"))
    assert (model.idf >= 0).all() and not torch.allclose(model.idf, model.embedder.vocab.idf())


def test_document_markers(corpus):
    on = build_model({**SMALL, "variant": "ndrm3", "doc_markers": True}, corpus)
    off = build_model({**SMALL, "variant": "ndrm3"}, corpus)
    n = len(on.embedder.vocab)
    short, long = "wing lift", " ".join(["wing"] * 100)
    ids = on._doc_ids([short, long])
    assert ids[0, :4].tolist() == [n, on.embedder.vocab.index["wing"], on.embedder.vocab.index["lift"], n + 1]
    assert ids[1, 0].item() == n and (ids[1, 1:] < n).all() and ids.shape[1] == 60  # truncated: </S> is cut off
    assert (off._doc_ids([short]) < n).all()  # off: no marker
    assert on.markers.weight.shape == (2, on.embedder.dim) and (on.markers.weight == 0).all()  # the authors' zero rows
    assert on.encode(["wing"], ["d"], [short])["dlen"].tolist() == [4.0]  # |d| counts them, as the authors' len(d)
    assert off.encode(["wing"], ["d"], [short])["dlen"].tolist() == [2.0]
    vectors, mask, lengths = on._encode_documents(ids)
    assert mask[0, :4].tolist() == [1.0] * 4 and lengths.tolist() == [4, 60]
