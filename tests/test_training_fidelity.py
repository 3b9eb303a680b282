"""What the training pairs teach and which parameters a learning rate reaches: the fixes of the training
audit (positives from the candidates, negatives from the collection, learning rates that reach every model's
scoring layers, query stop words and IDF weights, OOV masking, official-code defaults)."""

from __future__ import annotations

import pytest
import torch

from longrank.data.corpus import Corpus
from longrank.data.words import OOV, Vocabulary, query_terms
from longrank.errors import InputError
from longrank.io.trec_files import read_run
from longrank.models.knrm import KNRM
from longrank.models.modules.word_embedder import WordEmbedder
from longrank.models.registry import build_model, constructor_defaults
from longrank.train.optimiser import parameter_groups
from longrank.train.sampling import PairSampler
from longrank.config.train_settings import TrainSettings

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

WORD_MODELS = {
    "knrm": {"type": "knrm", "max_doc_len": 40},
    "tk": {"type": "tk", "max_doc_len": 40, "n_layers": 1},
    "tkl": {"type": "tkl", "max_doc_len": 80, "n_layers": 1},
}


@pytest.fixture
def corpus(tiny_data):
    return Corpus(tiny_data / "data")


# ---- sampling ---------------------------------------------------------------------------------------------


def test_positives_come_from_the_candidates_and_queries_without_one_are_skipped(tiny_data, corpus):
    candidates = read_run(tiny_data / "bm25.run")
    train = corpus.folds[0]["train"]
    depth = 2
    sampler = PairSampler(train, corpus.qrels, candidates, depth, 1, seed=0)
    top = {q: sorted(candidates[q], key=lambda d: (-candidates[q][d], d))[:depth] for q in train}
    for qid in sampler.qids:
        assert set(sampler.positives[qid]) <= set(top[qid])
    without = [
        q
        for q in train
        if not any(corpus.qrels[q].get(d, 0) > 0 for d in top[q]) or all(corpus.qrels[q].get(d, 0) > 0 for d in top[q])
    ]  # no relevant, or no non-relevant candidate
    assert sorted(sampler.skipped) == sorted(without) and not set(without) & set(sampler.qids)
    judged = PairSampler(train, corpus.qrels, candidates, depth, 1, seed=0, positives="judged")
    assert any(set(judged.positives[q]) - set(top[q]) for q in judged.qids)  # judged reaches beyond the candidates


def test_collection_negatives_are_never_relevant_and_both_splits_a_third(tiny_data, corpus):
    candidates = read_run(tiny_data / "bm25.run")
    train = corpus.folds[0]["train"]
    docs = sorted(corpus.docs)
    sampler = PairSampler(train, corpus.qrels, candidates, 3, 3, seed=0, negatives_from="both", doc_ids=docs)
    for step in range(5):
        qids, groups = sampler.batch(step, 4)
        for qid, group in zip(qids, groups):
            assert len(group) == 4 and corpus.qrels[qid][group[0]] > 0
            assert all(corpus.qrels[qid].get(d, 0) <= 0 for d in group[1:])
            top3 = sorted(candidates[qid], key=lambda d: (-candidates[qid][d], d))[:3]
            assert group[1] in top3  # one of three from the candidates
    with pytest.raises(InputError, match="negatives_from"):
        PairSampler(train, corpus.qrels, candidates, 3, 1, seed=0, negatives_from="everywhere", doc_ids=docs)


# ---- learning rates ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(WORD_MODELS))
def test_scoring_and_embedding_rates_reach_every_word_model(corpus, name):
    model = build_model(WORD_MODELS[name], corpus)
    groups = {g["name"]: g for g in parameter_groups(model, TrainSettings(scoring_lr=0.05, embedding_lr=1e-4))}
    assert groups["scoring"]["lr"] == 0.05 and groups["embeddings"]["lr"] == 1e-4 and "lr" not in groups.get("rest", {})
    by_id = {id(p): n for n, p in model.named_parameters()}
    scoring = {by_id[id(p)] for p in groups["scoring"]["params"]}
    expected = {
        "knrm": {"dense.weight", "dense.bias"},
        "tk": {"dense.weight", "dense.bias"},
        "tkl": {
            "kernel_weights.weight",
            "region_weights.weight",
            "salience.weight",
            "saturation_a.weight",
            "saturation_a.bias",
            "saturation_b.weight",
            "saturation_b.bias",
            "saturation_c.weight",
            "saturation_c.bias",
        },
    }[name]
    assert scoring == expected
    assert {by_id[id(p)] for p in groups["embeddings"]["params"]} == {"embedder.embedding.weight"}
    # every trainable parameter is in exactly one group
    ids = [id(p) for g in groups.values() for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters() if p.requires_grad)


def test_a_rate_that_reaches_no_parameter_is_an_error(corpus):
    frozen = build_model({**WORD_MODELS["knrm"], "train_embeddings": False}, corpus)
    with pytest.raises(InputError, match="embedding_lr"):
        parameter_groups(frozen, TrainSettings(embedding_lr=1e-4), "knrm")


# ---- query terms and OOV ----------------------------------------------------------------------------------


def test_two_different_unknown_words_never_match():
    vocab = Vocabulary.build(["wing lift drag"], min_doc_freq=2)  # every word is rare: all unknown
    model = KNRM(WordEmbedder(vocab, remove_query_stopwords=False), max_query_len=4, max_doc_len=4)
    batch = model.encode(["flutter"], ["d1"], ["buckling"])
    assert batch["query"].tolist() == [[OOV]] and batch["doc"].tolist() == [[OOV]]
    with torch.no_grad():
        model.dense.weight.zero_()
        model.dense.weight[0, 0] = 1.0  # the exact-match kernel's feature alone
        unknown = model(**batch)
        model.dense.bias.zero_()
    assert unknown.item() == pytest.approx(model.dense.bias.item())  # no kernel mass at all


def test_query_stop_words_are_removed_unless_nothing_is_left():
    assert query_terms("What is the lift of a wing?") == ["lift", "wing"]
    assert query_terms("what is the") == ["what", "is", "the"]
    assert query_terms("What is the lift", remove_stopwords=False) == ["what", "is", "the", "lift"]


def test_idf_weights_scale_each_query_term():
    vocab = Vocabulary.build(["wing lift", "wing drag", "wing heat"])
    plain = KNRM(WordEmbedder(vocab), max_query_len=4, max_doc_len=4)
    weighted = KNRM(WordEmbedder(vocab, query_term_weights="idf"), max_query_len=4, max_doc_len=4)
    weighted.load_state_dict(plain.state_dict())
    ids = plain.encode(["wing lift"], ["d1"], ["wing"])["query"]
    idf = vocab.idf()
    assert torch.equal(weighted.embedder.query_weights(ids, torch.ones_like(ids, dtype=torch.float32)), idf[ids])
    assert idf[vocab.index["lift"]] > idf[vocab.index["wing"]]  # the rarer word counts more


# ---- official-code defaults -------------------------------------------------------------------------------


def test_defaults_follow_the_official_code(corpus):
    tkl = constructor_defaults("tkl")
    assert (
        tkl["overlap"],
        tkl["region_stride"],
        tkl["tail_regions"],
        tkl["region_init"],
        tkl["positions"],
        tkl["doc_position_offset"],
    ) == (5, 2, True, "ones", "learned", 500)
    assert constructor_defaults("tk")["positions"] == "fixed" and constructor_defaults("tk")["length_norm"] is False
    model = build_model(WORD_MODELS["tkl"], corpus)
    assert model.region_weights.bias is None and torch.all(model.region_weights.weight == 1)
    assert isinstance(model.contextualizer.position_table, torch.nn.Parameter)


def test_documents_take_positions_from_the_offset(corpus):
    model = build_model({**WORD_MODELS["tk"], "dropout": 0.0}, corpus).eval()
    ctx = model.contextualizer
    x, mask = torch.randn(1, 5, model.embedder.dim), torch.ones(1, 5)
    assert not torch.allclose(ctx(x, mask), ctx(x, mask, is_document=True))
    ctx.doc_position_offset = 0
    assert torch.allclose(ctx(x, mask), ctx(x, mask, is_document=True))


@pytest.mark.parametrize("name", sorted(WORD_MODELS))
def test_unknown_model_keys_are_named(corpus, name):
    with pytest.raises(InputError, match="regoin_size"):
        build_model({**WORD_MODELS[name], "regoin_size": 3}, corpus)


def test_tail_regions_cover_the_end_of_a_document(corpus):
    full = build_model({**WORD_MODELS["tkl"], "tail_regions": False}, corpus).eval()
    tail = build_model(WORD_MODELS["tkl"], corpus).eval()
    batch = tail.encode(["wing lift"], ["d1"], [" ".join(["flow"] * 45)])
    with torch.no_grad():
        _, valid_full = full._topography(**batch)
        _, valid_tail = tail._topography(**batch)
    assert int(valid_full.sum()) == 8  # starts 0, 2, ..., 14 <= 45 - 30
    assert int(valid_tail.sum()) == 23  # starts 0, 2, ..., 44 < 45


def test_scoring_rate_reaches_an_encoder_models_head_and_nothing_else():
    from transformers import BertConfig

    from longrank.models.bert_ranker import BertRanker
    from longrank.models.bi_encoder import BiEncoder
    from longrank.models.modules.encoders import load_tokenizer, random_encoder
    from longrank.models.mores import MORES

    tokenizer = load_tokenizer("minilm")

    def small():
        return random_encoder(
            BertConfig(
                vocab_size=tokenizer.vocab_size,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=64,
            ),
            seed=0,
        )

    settings = TrainSettings(scoring_lr=1e-3)
    for model in (BertRanker(small(), tokenizer, pooling="mean"), MORES(small(), tokenizer, interaction_blocks=1)):
        groups = {g["name"]: g for g in parameter_groups(model, settings)}
        assert {id(p) for p in groups["scoring"]["params"]} == {id(model.head.weight), id(model.head.bias)}
        assert groups["scoring"]["lr"] == 1e-3 and len(groups["rest"]["params"]) > 10
    # no head to reach: the segment-cosine cross-encoder and the bi-encoder refuse the key
    for model in (BertRanker(small(), tokenizer, pooling="segment_cosine"), BiEncoder(small(), tokenizer)):
        with pytest.raises(InputError, match="scoring_lr"):
            parameter_groups(model, settings)
        with pytest.raises(InputError, match="embedding_lr"):
            parameter_groups(model, TrainSettings(embedding_lr=1e-4))
