"""NDRM (models/ndrm.py): query term independence for all three variants, the impact index against reranking
scores (unpruned: the same; pruned: each term's top documents), Eq. 4 by hand, windowed kernel pooling
against plain kernel pooling, the paper's defaults, and a short training run with the paper's extra
negative pairs (train/losses.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import sparse

from longrank import artifacts
from longrank.data.corpus import Corpus
from longrank.data.data import prepare
from longrank.data.words import tokenize
from longrank.errors import InputError
from longrank.io.trec_files import read_run
from longrank.models.base import config_keys
from longrank.models.checkpoint import load_model
from longrank.models.modules.windowed_kernel_pooling import windowed_kernel_pooling
from longrank.models.ndrm import NDRM, kernel_pooling
from longrank.models.registry import build_model, constructor_defaults, model_class
from longrank.rerank import RerankJob, rerank
from longrank.train import train as train_stage, trainer
from longrank.train.losses import ranknet, with_negative_pairs
from longrank.train.optimiser import parameter_groups
from longrank.config.train_settings import TrainSettings
from longrank.config.model_types import artifacts_of

from conftest import synthetic_collection, write_local_collection

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

VARIANTS = ("ndrm1", "ndrm2", "ndrm3")
# CPU-quick sizes; windows of 16 every 8 terms so that the ~46-term documents have several
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


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("ndrm")
    docs, queries, qrels = synthetic_collection(n_queries=6, docs_per_query=5)
    docs["d_short"] = "wing lift"  # shorter than a window
    dataset = write_local_collection(root / "src", docs, queries, qrels)
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.25, "test": 0.25}, root / "data")
    return Corpus(root / "data")


def trained_a_little(corpus: Corpus, variant: str, **extra) -> NDRM:
    """A model whose BatchScale/BatchNorm statistics and weights have moved off their initial values."""
    torch.manual_seed(0)
    model = build_model({**SMALL, "variant": variant, **extra}, corpus)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
    doc_ids = sorted(corpus.docs)
    for step in range(3):
        chosen = doc_ids[step * 6 : step * 6 + 6]
        queries = [corpus.queries[f"q{step}"]] * len(chosen)
        scores = model(**model.encode(queries, chosen, [corpus.docs[d] for d in chosen]))
        loss = ranknet(scores.view(2, 3))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


QUERIES = [
    "the wing wing lift zzzunseenzzz",  # a stop word, a repeated term, an unknown word
    "heat transfer boundary shock wave supersonic plate buckling stress flutter",
]  # longer than max_query_len


# ---- QTI ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_score_is_the_sum_of_single_term_scores(corpus, variant):
    model = trained_a_little(corpus, variant)
    doc_ids = sorted(corpus.docs) + ["unseen"]
    docs = [corpus.docs[d] for d in doc_ids[:-1]] + [""]  # and an empty document
    for query in list(corpus.queries.values()) + QUERIES:
        terms = model.query_terms(query)
        pairs = model.score_pairs([query] * len(docs), doc_ids, docs).detach()
        singles = model.term_scores(terms, doc_ids, docs, batch_size=7)
        assert singles.shape == (len(terms), len(docs))
        torch.testing.assert_close(pairs, singles.sum(dim=0) if terms else torch.zeros(len(docs)), rtol=1e-4, atol=1e-4)
        assert torch.isfinite(pairs).all()
    assert model.query_terms(QUERIES[0]) == ["wing", "wing", "lift"]
    assert len(model.query_terms(QUERIES[1])) == 8
    assert model.training is False


# ---- the impact index -----------------------------------------------------------------------------------


def read_index(directory):
    meta = json.loads((directory / "impact.json").read_text())
    return meta, sparse.load_npz(directory / "impact.npz").tocsr()


@pytest.mark.parametrize("variant", VARIANTS)
def test_an_unpruned_impact_index_gives_the_rerank_scores(corpus, variant, tmp_path):
    model = trained_a_little(corpus, variant)
    some = sorted(corpus.docs)[:4]  # what the artifacts stage passes (candidates' documents): the index ignores it
    model.build_artifacts("fold", corpus, some, tmp_path, batch_size=5)
    meta, matrix = read_index(tmp_path)
    assert meta["format"] == "longrank-impact/1" and meta["impact_depth"] is None and meta["build_seconds"] >= 0
    assert meta["doc_ids"] == sorted(corpus.docs)
    assert meta["query_terms"] == {q: model.query_terms(t) for q, t in corpus.queries.items()}
    assert meta["terms"] == sorted({t for ts in meta["query_terms"].values() for t in ts})
    assert matrix.dtype == np.float32 and matrix.shape == (len(meta["terms"]), len(corpus.docs))
    assert matrix.data.min() > 0  # shifted by each term's floor, the floor itself left out
    row = {t: i for i, t in enumerate(meta["terms"])}
    floors = np.asarray(meta["term_floors"])
    dense = matrix.toarray()
    doc_ids = meta["doc_ids"]
    docs = [corpus.docs[d] for d in doc_ids]
    expected = {}
    for qid, terms in meta["query_terms"].items():
        rows = [row[t] for t in terms]
        from_index = (dense[rows] + floors[rows, None]).sum(axis=0)
        expected[qid] = model.score_pairs([corpus.queries[qid]] * len(docs), doc_ids, docs).detach()
        np.testing.assert_allclose(from_index, expected[qid].numpy(), rtol=1e-4, atol=1e-4)

    # attached for reranking, the same scores come from the index without encoding a document
    model.attach_artifacts(tmp_path)
    encode = model.encode
    model.encode = lambda *a: pytest.fail("an attached unpruned index should answer")
    for qid in meta["query_terms"]:
        torch.testing.assert_close(
            model.score_pairs([corpus.queries[qid]] * len(docs), doc_ids, docs), expected[qid], rtol=1e-4, atol=1e-4
        )
    model.encode = encode  # a query with a term the index lacks is scored by the model
    scores = model.score_pairs(["wing zzzunseenzzz airfoil"] * 3, doc_ids[:3], docs[:3])
    assert scores.shape == (3,)


def test_a_pruned_impact_index_keeps_each_terms_top_documents(corpus, tmp_path):
    model = trained_a_little(corpus, "ndrm3")
    (tmp_path / "full").mkdir()
    model.build_artifacts("fold", corpus, [], tmp_path / "full", batch_size=8)
    pruned = build_model({**SMALL, "variant": "ndrm3", "impact_depth": 3}, corpus)
    pruned.load_state_dict(model.state_dict())
    pruned.eval()
    (tmp_path / "top3").mkdir()
    pruned.build_artifacts("fold", corpus, [], tmp_path / "top3", batch_size=5)
    (meta_full, full), (meta, top) = read_index(tmp_path / "full"), read_index(tmp_path / "top3")
    assert meta["impact_depth"] == 3 and meta["terms"] == meta_full["terms"]
    np.testing.assert_allclose(meta["term_floors"], meta_full["term_floors"], rtol=1e-5, atol=1e-5)
    full, top = full.toarray(), top.toarray()
    for t in range(len(meta["terms"])):
        kept = np.flatnonzero(top[t])
        assert 0 < len(kept) <= 3
        np.testing.assert_allclose(top[t, kept], full[t, kept], rtol=1e-5, atol=1e-5)
        assert top[t, kept].min() >= np.sort(full[t])[-3] - 1e-5  # no document outside the kept ones scores higher
    pruned.attach_artifacts(tmp_path / "top3")  # a pruned index cannot give exact scores: the model answers
    docs = sorted(corpus.docs)[:5]
    torch.testing.assert_close(
        pruned.score_pairs(["wing lift"] * 5, docs, [corpus.docs[d] for d in docs]),
        model.score_pairs(["wing lift"] * 5, docs, [corpus.docs[d] for d in docs]),
    )


# ---- Eq. 4 ------------------------------------------------------------------------------------------------


def test_ndrm2_is_eq_4_by_hand(corpus):
    model = build_model({**SMALL, "variant": "ndrm2"}, corpus)
    # BatchScale: the first training batch's mean over real query terms (TF) and documents (|d|)
    query, doc_ids = corpus.queries["q2"], sorted(corpus.docs)[10:16]
    batch = model.encode([query] * 6, doc_ids, [corpus.docs[d] for d in doc_ids])
    model.train()(**batch)
    real = batch["query"] > 1
    assert model.explicit.scale_tf.mean.item() == pytest.approx(batch["tf"][real].mean().item(), rel=1e-6)
    assert model.explicit.scale_dlen.mean.item() == pytest.approx(batch["dlen"].mean().item(), rel=1e-6)

    with torch.no_grad():
        model.explicit.w_dlen.fill_(0.7)
        model.explicit.b_dlen.fill_(-0.2)
        model.explicit.scale_tf.mean.fill_(0.8)
        model.explicit.scale_dlen.mean.fill_(30.0)
    model.eval()
    texts = list(corpus.docs.values())
    n_docs, eps = len(texts), 1e-6
    for doc_id in sorted(corpus.docs)[8:20] + ["d_short"]:
        tokens = tokenize(corpus.docs[doc_id])
        expected = 0.0
        for term in tokenize(query):  # q2's words: none is a stop word, all in the vocabulary
            df = sum(term in set(tokenize(t)) for t in texts)
            idf = math.log((n_docs - df + 0.5) / (df + 0.5) + 1)
            tf = tokens.count(term) / (0.8 + eps)
            expected += idf * tf / (tf + max(0.0, 0.7 * len(tokens) / (30.0 + eps) - 0.2) + eps)
        got = model.score_pairs([query], [doc_id], [corpus.docs[doc_id]]).item()
        assert got == pytest.approx(expected, rel=1e-5, abs=1e-6), doc_id
    assert [n for n, p in model.named_parameters() if p.requires_grad] == ["explicit.w_dlen", "explicit.b_dlen"]


# ---- windowed kernel pooling ----------------------------------------------------------------------------


def test_windowed_kernel_pooling_on_a_short_document_is_plain_kernel_pooling():
    torch.manual_seed(0)
    kernels = torch.rand(3, 2, 10, 12)  # [docs, terms, kernels, length]
    lengths = torch.tensor([12, 7, 0])
    kernels = kernels * (torch.arange(12) < lengths[:, None])[:, None, None, :]
    features, valid = windowed_kernel_pooling(kernels, lengths[:, None], window=30, stride=10)
    assert features.shape == (3, 2, 1, 10) and valid.all()
    torch.testing.assert_close(features[:, :, 0], kernel_pooling(kernels))


def test_windows_cover_the_document_and_ignore_padding():
    torch.manual_seed(1)
    kernels = torch.rand(2, 1, 3, 40)
    kernels[1, ..., 21:] = 0  # the second document has 21 terms
    features, valid = windowed_kernel_pooling(kernels, torch.tensor([[40], [21]]), window=16, stride=8)
    # 40 terms: windows at 0, 8, 16, 24 (the last ends at 40); 21 terms: 0 and 8 (the second reaches its end)
    assert valid.tolist() == [[[True] * 4], [[True, True, False, False]]]
    for j, start in enumerate((0, 8, 16, 24)):
        torch.testing.assert_close(features[0, 0, j], torch.log(kernels[0, 0, :, start : start + 16].sum(-1) + 1e-6))
    alone, _ = windowed_kernel_pooling(kernels[1:, ..., :21], torch.tensor([[21]]), window=16, stride=8)
    torch.testing.assert_close(features[1:, :, :2], alone)  # padding the batch further changes nothing


def test_ndrm1_on_documents_shorter_than_a_window_scores_plain_kernel_pooling(corpus):
    model = trained_a_little(corpus, "ndrm1", pool_window=80, pool_stride=20)  # every document < 60 terms
    doc_ids = sorted(corpus.docs)[:6] + ["d_short"]
    batch = model.encode([corpus.queries["q0"]] * len(doc_ids), doc_ids, [corpus.docs[d] for d in doc_ids])
    with torch.no_grad():
        d, d_mask, _ = model._encode_documents(batch["doc"])
        q = model._query_vectors(batch["query"])
        cosine = q @ d.transpose(1, 2)
        kernels = (
            torch.exp(-((cosine[:, :, None, :] - model.mu[:, None]) ** 2) / (2 * model.sigma[:, None] ** 2))
            * d_mask[:, None, None, :]
        )
        plain = model.window_scorer(kernel_pooling(kernels)).squeeze(-1)  # [B, Lq]: one score per query term
        q_mask = (batch["query"] > 1).float()
        torch.testing.assert_close(model(**batch), (plain * q_mask).sum(dim=1))


# ---- configuration --------------------------------------------------------------------------------------


def test_the_papers_settings_are_the_defaults(corpus):
    defaults = constructor_defaults("ndrm")
    paper = {
        "variant": "ndrm1",
        "max_doc_len": 4000,
        "max_query_len": 20,
        "n_layers": 2,
        "hidden_dim": 256,
        "n_heads": 32,
        "conv_window": 31,
        "conv_groups": 32,
        "dropout": 0.2,
        "n_kernels": 10,
        "pool_window": 300,
        "pool_stride": 100,
        "attention": "separable",
        "impact_depth": None,
    }
    assert {k: defaults[k] for k in paper} == paper
    assert model_class("ndrm").default_loss == "ranknet"
    assert "conformer" not in defaults  # wiring, not a config key
    with pytest.raises(InputError, match="max_doc_length"):
        build_model({"type": "ndrm", "max_doc_length": 100}, corpus)
    with pytest.raises(InputError, match="variant"):
        build_model({**SMALL, "variant": "ndrm4"}, corpus)
    assert artifacts_of({"type": "ndrm"}) == {"impact_index": "fold"}
    assert "sigma" in config_keys(model_class("ndrm").config_parts[2])


def test_the_papers_word2vec_embeddings_of_the_hidden_width_are_used_as_they_are(corpus):
    rng = np.random.default_rng(0)
    words = corpus.word_vocabulary().words[2:]  # past <pad> and <oov>
    vectors = rng.normal(size=(len(words), 16))  # IN ‖ OUT of 2 × 8 = hidden_dim 16: no projection
    (corpus.dir / "word2vec.txt").write_text(
        f"{len(words)} 16\n"
        + "".join(w + " " + " ".join(f"{v:.6f}" for v in row) + "\n" for w, row in zip(words, vectors))
    )
    model = build_model({**SMALL, "variant": "ndrm1", "embeddings": "word2vec"}, corpus)
    assert isinstance(model.project, torch.nn.Identity) and model.embedder.coverage == 1.0
    (corpus.dir / "word2vec.txt").unlink()


def test_learning_rates_reach_the_scoring_layers_and_embeddings(corpus):
    settings = TrainSettings(scoring_lr=0.01, embedding_lr=1e-4)
    for variant, scoring in (("ndrm1", "window_scorer."), ("ndrm3", "combine.")):
        model = build_model({**SMALL, "variant": variant}, corpus)
        groups = {g["name"]: g["params"] for g in parameter_groups(model, settings)}
        named = {id(p): n for n, p in model.named_parameters()}
        assert any(named[id(p)].startswith(scoring) for p in groups["scoring"])
        assert [named[id(p)] for p in groups["embeddings"]] == ["embedder.embedding.weight"]
        assert not any(
            named[id(p)].startswith(("window_scorer.", "explicit.", "combine.", "embedder.")) for p in groups["rest"]
        )
    with pytest.raises(InputError, match="embedding_lr"):  # NDRM2 has no trainable embeddings
        parameter_groups(build_model({**SMALL, "variant": "ndrm2"}, corpus), settings, "ndrm2")


# ---- training ----------------------------------------------------------------------------------------------


def test_negative_pairs_add_candidate_over_collection_pairs():
    scores = torch.tensor(
        [[3.0, 1.0, 0.5, -1.0], [0.0, 2.0, -2.0, 1.0]]
    )  # [positive, candidate negative, 2 collection]
    expected = []
    for s in scores.tolist():
        pairs = [(s[0], s[1]), (s[0], s[2]), (s[0], s[3]), (s[1], s[2]), (s[1], s[3])]
        expected.append(sum(math.log1p(math.exp(low - high)) for high, low in pairs) / len(pairs))
    loss = with_negative_pairs(ranknet, from_candidates=1)
    assert loss(scores).item() == pytest.approx(sum(expected) / 2, rel=1e-6)
    assert ranknet(scores).item() != pytest.approx(loss(scores).item())
    # a hinge loss too: its mean over the five pairs
    hinge = with_negative_pairs(lambda s: F.relu(1 - s[:, :1] + s[:, 1:]).mean(), 1)
    assert hinge(scores[:1]).item() == pytest.approx((0 + 0 + 0 + 0.5 + 0) / 5)


def test_a_tiny_ndrm_trains_with_the_papers_sampling(tiny_data, monkeypatch):
    corpus, candidates = Corpus(tiny_data / "data"), read_run(tiny_data / "bm25.run")
    cfg = {
        **SMALL,
        "variant": "ndrm3",
        "train": {
            "steps": 4,
            "batch_size": 2,
            "negatives": 3,
            "negatives_from": "both",
            "negative_pairs": True,
            "eval_every": 2,
            "lr": 1e-3,
            "scoring_lr": 1e-2,
        },
    }
    seen = []
    original = trainer.with_negative_pairs

    def recording(loss, from_candidates):
        wrapped = original(loss, from_candidates)
        seen.append(from_candidates)
        return lambda scores: (seen.append(tuple(scores.shape)), wrapped(scores))[1]

    monkeypatch.setattr(trainer, "with_negative_pairs", recording)
    out = tiny_data / "ndrm" / "model.safetensors"
    train_stage.train("ndrm3", cfg, corpus, candidates, 0, 30, torch.device("cpu"), out)
    assert (
        out.exists() and seen[0] == 1 and seen[1:] == [(2, 4)] * 4
    )  # 1 candidate + 2 collection negatives per positive
    summary = json.loads((out.parent / "train_summary.json").read_text())
    assert summary["hyperparameters"]["negative_pairs"] is True and summary["steps_run"] == 4

    # the fold's index through the artifacts stage, then reranking with it attached: the model's own scores
    index = tiny_data / "artifacts" / "ndrm3" / "fold0"
    artifacts.build(cfg, corpus, "fold", index, checkpoint=out, candidates=tiny_data / "bm25.run")
    assert json.loads((index / "impact.json").read_text())["doc_ids"] == sorted(corpus.docs)
    rerank(
        RerankJob(
            "ndrm3",
            cfg,
            corpus,
            candidates,
            [str(out)],
            10,
            16,
            torch.device("cpu"),
            tiny_data / "runs",
            fold_artifacts=[index],
        )
    )
    from_index = read_run(tiny_data / "runs" / "ndrm3.run")
    model = load_model(out, cfg, corpus)
    for qid in corpus.folds[0]["test"]:
        top = sorted(candidates[qid], key=lambda d: (-candidates[qid][d], d))[:10]
        scores = model.score_pairs([corpus.queries[qid]] * len(top), top, [corpus.docs[d] for d in top]).tolist()
        assert [from_index[qid][d] for d in top] == pytest.approx(scores, rel=1e-4, abs=1e-4)

    bad = {**cfg, "train": {**cfg["train"], "negatives_from": "candidates"}}
    with pytest.raises(InputError, match="negative_pairs"):
        train_stage.train(
            "ndrm3", bad, corpus, candidates, 0, 30, torch.device("cpu"), tiny_data / "bad" / "model.safetensors"
        )
    bad = {**cfg, "train": {**cfg["train"], "loss": "pointwise_bce"}}
    with pytest.raises(InputError, match="pairwise loss"):
        train_stage.train(
            "ndrm3", bad, corpus, candidates, 0, 30, torch.device("cpu"), tiny_data / "bad" / "model.safetensors"
        )
