"""Reranking represents each distinct document once per job (models/modules/kept_documents.py): the bi-encoder's
vectors, MORES's document module without a store, TK's and TKL's contextualised words, NDRM's Conformer. The scores (and TKL's
explanations) are the pairwise forward's, and nothing kept is read after the weights or the autocast changed."""

from __future__ import annotations

import pytest
import torch

from longrank.models.bi_encoder import BiEncoder
from longrank.models.modules.encoders import load_tokenizer
from longrank.models.modules.kept_documents import KeptDocuments
from longrank.models.registry import build_model
from test_bert_ranker import small_encoder
from test_mores import small_mores
from test_ndrm import SMALL as NDRM_SMALL
from test_tk_tkl import small, write_tiny_corpus

pytestmark = pytest.mark.stage  # models run: not in the unit tier (pytest -m 'not stage and not e2e')


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("minilm")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_tiny_corpus(tmp_path_factory.mktemp("tiny") / "data")


# each model, the method that computes its document side (rows counted), whether that method embeds the queries too
MODELS = {
    "bi_encoder": (lambda tok, corpus: BiEncoder(small_encoder(tok), tok, max_doc_len=24), "embed", True),
    "mores": (lambda tok, corpus: small_mores(tok), "represent_docs", False),
    "tk": (lambda tok, corpus: build_model(small("tk"), corpus), "_contextualise_document", False),
    "tkl": (lambda tok, corpus: build_model(small("tkl"), corpus), "_contextualise_document", False),
    "ndrm3": (lambda tok, corpus: build_model({**NDRM_SMALL, "variant": "ndrm3"}, corpus), "_encode_documents", False),
}


@pytest.mark.parametrize("name", MODELS)
def test_reranking_represents_each_document_once_and_never_reads_a_stale_one(tokenizer, corpus, name):
    make, document_side, embeds_queries = MODELS[name]
    torch.manual_seed(0)
    model = make(tokenizer, corpus).eval()
    rows_seen = []
    computes = getattr(model, document_side)

    def counted(*args, **kwargs):
        rows_seen.append(len(args[0] if args else next(iter(kwargs.values()))))
        return computes(*args, **kwargs)

    setattr(model, document_side, counted)
    qids, doc_ids = list(corpus.queries)[:3], sorted(corpus.docs)[:5]  # documents of mixed lengths
    q = [corpus.queries[i] for i in qids]
    batches = [  # documents shared within and across batches, queries repeated, lengths (so padding) varied
        [(q[0], doc_ids[0]), (q[0], doc_ids[1]), (q[1], doc_ids[1]), (q[1], doc_ids[4])],
        [(q[1], doc_ids[0]), (q[2], doc_ids[2]), (q[0], doc_ids[3]), (q[0], doc_ids[4])],
    ]

    def both(pairs):
        queries, ids = [q for q, _ in pairs], [d for _, d in pairs]
        texts = [corpus.docs[d] for d in ids]
        with torch.no_grad():
            rows_seen.clear()
            kept = model.score_pairs(queries, ids, texts)
            rows = sum(rows_seen)
            plain = model(**model.encode(queries, ids, texts))
        return kept, plain, rows

    def expected(distinct_queries, new_docs):
        return new_docs + (distinct_queries if embeds_queries else 0)

    kept, plain, rows = both(batches[0])
    torch.testing.assert_close(kept, plain, rtol=0, atol=1e-5)
    assert rows == expected(2, 3)  # two distinct queries, three distinct documents
    kept, plain, rows = both(batches[1])
    torch.testing.assert_close(kept, plain, rtol=0, atol=1e-5)
    assert rows == expected(3, 2)  # three distinct queries; the first and the fifth document kept, two new

    before = kept
    with torch.no_grad():  # an optimiser step changes weights in place: nothing of the old weights is read again
        next(model.parameters()).mul_(1.5)
    kept, plain, rows = both(batches[1])
    torch.testing.assert_close(kept, plain, rtol=0, atol=1e-5)
    assert rows == expected(3, 4) and (kept - before).abs().max() > 1e-5
    with torch.autocast("cpu", dtype=torch.bfloat16):  # nor across precisions
        half_kept, half_plain, rows = both(batches[1])
    assert rows == expected(3, 4) and (half_kept - kept).abs().max() > 1e-6
    torch.testing.assert_close(half_kept, half_plain, rtol=0, atol=1e-5)
    kept_again, _, rows = both(batches[1])  # one precision kept at a time: back to fp32, computed again
    torch.testing.assert_close(kept_again, kept, rtol=0, atol=0)
    assert rows == expected(3, 4)
    _, _, rows = both(batches[1])
    assert rows == expected(3, 0)

    if name == "tkl":  # reranking's explanations read the documents its scores kept
        queries, ids = [q for q, _ in batches[1]], [d for _, d in batches[1]]
        texts = [corpus.docs[d] for d in ids]
        with torch.no_grad():
            rows_seen.clear()
            explained = model.explain_pairs(queries, ids, texts)
            assert sum(rows_seen) == 0
            plain = model.explain(**model.encode(queries, ids, texts))
        assert explained.keys() == plain.keys()
        for key in plain:
            torch.testing.assert_close(explained[key], plain[key], rtol=0, atol=1e-5)

    assert len(model._kept_documents) == 4
    model.train()  # in training (dropout) the model's own forward: nothing is kept, a document is computed again
    assert len(model._kept_documents) == 0
    rows_seen.clear()
    with torch.no_grad():
        model.score_pairs([q[1]], [doc_ids[0]], [corpus.docs[doc_ids[0]]])
    assert sum(rows_seen) == expected(1, 1)


def test_kept_documents_start_again_past_their_memory_limit(tokenizer):
    model = BiEncoder(small_encoder(tokenizer), tokenizer, max_doc_len=24).eval()
    kept = KeptDocuments(limit_bytes=3 * 32 * 4)  # three vectors of 32 floats
    computed = []

    def compute(texts):
        computed.extend(texts)
        return [torch.zeros(32) for _ in texts]

    with torch.no_grad():
        kept.get(model, ["a", "b", "c", "d"], compute)
        assert len(kept) == 4 and computed == ["a", "b", "c", "d"]
        kept.get(model, ["a"], compute)  # past the limit: start again
        assert len(kept) == 1 and computed[-1] == "a"


@pytest.mark.parametrize("padded_to_max", [False, True])
def test_ndrm_keeps_no_document_whose_encoding_reads_its_batchs_padding(corpus, padded_to_max):
    """With ``convolve_padding`` the convolution reads the padding: a document's encoding then depends on how far its
    batch is padded, unless every row is padded to ``max_doc_len`` (``score_padding_windows``, the authors')."""
    settings = {**NDRM_SMALL, "variant": "ndrm3", "convolve_padding": True, "score_padding_windows": padded_to_max}
    torch.manual_seed(0)
    model = build_model(settings, corpus).eval()
    rows_seen = []
    encode = model._encode_documents
    model._encode_documents = lambda doc: (rows_seen.append(len(doc)), encode(doc))[1]
    queries, doc_ids = [next(iter(corpus.queries.values()))] * 3, sorted(corpus.docs)[:3]
    texts = [corpus.docs[d] for d in doc_ids]
    with torch.no_grad():
        first = model.score_pairs(queries, doc_ids, texts)
        rows_first = sum(rows_seen)
        second = model.score_pairs(queries, doc_ids, texts)
        rows_second = sum(rows_seen) - rows_first
        plain = model(**model.encode(queries, doc_ids, texts))
    assert (rows_first, rows_second) == (3, 0 if padded_to_max else 3)
    torch.testing.assert_close(first, plain, rtol=0, atol=1e-5)
    torch.testing.assert_close(second, plain, rtol=0, atol=1e-5)
