"""NDRM1 and NDRM3 at the full-scale settings compute the Conformer-Kernel authors' forward.

``official_scores`` below re-states, from reading bmitra-msft/TREC-Deep-Learning-Quick-Start (``model.py``:
NDRM1/NDRM2/NDRM3, RBFKernel, BatchScale; ``conformer.py``: PositionalEncoding, ConformerEncoderLayer and the
separable branch of ``multi_head_sep_attention_forward``; ``model_utils.py``: ``featurize``), their forward in
eval mode, in plain tensor operations and without any of this project's model code. Their features are built from
the processed words here: a vocabulary of UNK (0, also the padding id), <S> (1), </S> (2) and the words that have a
vector; the document ``<S> words </S>`` cut to ``max_terms_doc`` and padded with 0; every query word (UNK or
not) has mask 1; TF is the word's count in the whole document (markers included in its length) and IDF comes from
a table of the collection's query words. The text processing is the project's ``ck`` analyzer on both sides (it is
checked against the authors' elsewhere: tests/test_ndrm_official.py); what is compared is the model's function.

Weights are random and shared: their embedding matrix is the project's unknown-word row, marker rows and word rows;
their shared Q/K projection is the project's K projection with the project's Q projection set to it times
head_dim^-0.5 (their ``q = k * scaling``); their BatchNorm's affine part is the identity (the project's BN has none,
its ``combine`` is their Linear). Small widths, documents longer and shorter than ``max_doc_len``, a query word
without a vector and one outside the vocabulary.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from longrank.data.corpus import Corpus
from longrank.data.data import prepare
from longrank.data.words import OOV, analyzer
from longrank.models.registry import build_model

from conftest import synthetic_collection, write_local_collection

pytestmark = pytest.mark.stage

H, HEADS, WINDOW, LAYERS, MAX_DOC, POOL, STRIDE, MAX_Q = 16, 4, 5, 2, 64, 16, 8, 8
#: the full-scale NDRM entries' settings of the authors' code (config/trec-dl.yaml), at small widths
OFFICIAL = {
    "type": "ndrm",
    "hidden_dim": H,
    "n_heads": HEADS,
    "conv_groups": HEADS,  # their grouped convolution has groups = heads (the paper's 32 and 32)
    "conv_window": WINDOW,
    "n_layers": LAYERS,
    "max_doc_len": MAX_DOC,
    "pool_window": POOL,
    "pool_stride": STRIDE,
    "max_query_len": MAX_Q,
    "dropout": 0.2,
    "text_processing": "ck",
    "convolve_padding": True,
    "score_padding_windows": True,
    "doc_markers": True,
    "idf_formula": "clipped",
    "mask_unknown_words": False,
    "position_layout": "interleaved",
    "pad_row": "unknown",
    "words_without_vectors": "unknown",
    "unknown_query_words": "scored",
}
#: this project's defaults for the four forward settings (the default config's NDRM)
PROJECT = {
    "position_layout": "concat",
    "pad_row": "zero",
    "words_without_vectors": "own_row",
    "unknown_query_words": "masked",
}
NO_VECTOR = "case"  # a query word of every query, left out of the vector file: their UNK, a row of its own here
UNKNOWN = "zyzzogeton"  # in no query or document: outside both vocabularies


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("ndrm_forward")
    docs, queries, qrels = synthetic_collection(n_queries=4, docs_per_query=3)
    docs["d_long"] = " ".join(["wing lift drag airfoil case turbulence boundary layer"] * 12)  # past max_doc_len
    dataset = write_local_collection(root / "src", docs, queries, qrels)
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.25, "test": 0.25}, root / "data")
    corpus = Corpus(root / "data")
    analyze = analyzer("ck")
    words = sorted({w for text in corpus.docs.values() for w in analyze(text)} - {NO_VECTOR})
    g = torch.Generator().manual_seed(1)
    lines = [f"{w} " + " ".join(f"{v:.6f}" for v in torch.randn(H, generator=g).tolist()) for w in words]
    (root / "vectors.txt").write_text("\n".join(lines) + "\n")
    corpus.vectors = str(root / "vectors.txt")  # the test's own attribute: the vector file's path
    return corpus


def _randomise(model, seed: int = 0) -> None:
    """Every weight random (embeddings, markers, mix, scorers, BN statistics, BatchScale means), Q = K·hd^-½."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (0.5 if p.dim() > 1 else 0.3))
        for layer in model.encoder:
            layer.qkv.weight[:H] = layer.qkv.weight[H : 2 * H] * (H // HEADS) ** -0.5
            layer.qkv.bias[:H] = layer.qkv.bias[H : 2 * H] * (H // HEADS) ** -0.5
        if model.variant == "ndrm3":
            model.normalise.running_mean.copy_(torch.randn(2, generator=g))
            model.normalise.running_var.copy_(torch.rand(2, generator=g) + 0.5)
            model.explicit.scale_tf.mean.fill_(1.7)
            model.explicit.scale_dlen.mean.fill_(35.0)
            model.explicit.w_dlen.fill_(0.8)
            model.explicit.b_dlen.fill_(0.1)


# ---- the authors' forward, re-stated ----------------------------------------------------------------------------


def _positional(length: int, d: int) -> torch.Tensor:
    """Their PositionalEncoding: pe[:, 0::2] = sin(p · div), pe[:, 1::2] = cos(p · div), div = 10000^(-2i/d)."""
    pe = torch.zeros(length, d)
    position = torch.arange(length, dtype=torch.float)[:, None]
    div = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
    pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
    return pe


def _conformer_layer(x: torch.Tensor, pad: torch.Tensor, w: dict) -> torch.Tensor:
    """ConformerEncoderLayer (conv, separable attention with shared Q/K, post-norm) on x [B, L, H], pad [B, L]."""
    b, length, _ = x.shape
    hd = H // HEADS
    src2 = F.conv1d(x.transpose(1, 2), w["conv_w"], w["conv_b"], padding=WINDOW // 2, groups=HEADS).transpose(1, 2)
    k, v = F.linear(src2, w["in_w"], w["in_b"]).chunk(2, dim=-1)
    q = k * hd**-0.5

    def heads(t):  # [B, L, H] -> [B·heads, L, hd], as their view(L, B·heads, hd).transpose(0, 1)
        return t.transpose(0, 1).reshape(length, b * HEADS, hd).transpose(0, 1)

    q, k, v = heads(q), heads(k), heads(v)
    weights = k.transpose(1, 2).reshape(b, HEADS, hd, length).masked_fill(pad[:, None, None, :], float("-inf"))
    weights = torch.softmax(weights.reshape(b * HEADS, hd, length), dim=-1)
    a = torch.bmm(weights, v)  # [B·heads, hd, hd]
    out = torch.bmm(torch.softmax(q, dim=-1), a).transpose(0, 1).reshape(length, b, H).transpose(0, 1)
    out = F.linear(out, w["out_w"], w["out_b"])
    x = F.layer_norm(x + out, (H,), w["n1_w"], w["n1_b"])
    ff = F.linear(torch.relu(F.linear(x, w["l1_w"], w["l1_b"])), w["l2_w"], w["l2_b"])
    return F.layer_norm(x + ff, (H,), w["n2_w"], w["n2_b"])


def _their_weights(model) -> dict:
    """The project model's weights in the authors' layout."""
    vocab = model.embedder.vocab
    table = model.embedder.embedding.weight.detach()
    words = [w for w, has in zip(vocab.words, model._has_vector) if has]
    index = {"UNK": 0, "<S>": 1, "</S>": 2, **{w: i + 3 for i, w in enumerate(words)}}
    embed = torch.cat([table[OOV][None], model.markers.weight.detach(), table[[vocab.index[w] for w in words]]])
    layers = []
    for layer in model.encoder:
        layers.append(
            {
                "conv_w": layer.conv.weight, "conv_b": layer.conv.bias,
                "in_w": layer.qkv.weight[H:], "in_b": layer.qkv.bias[H:],  # their in_proj: [K; V]
                "out_w": layer.out.weight, "out_b": layer.out.bias,
                "n1_w": layer.norm1.weight, "n1_b": layer.norm1.bias,
                "l1_w": layer.ff[0].weight, "l1_b": layer.ff[0].bias,
                "l2_w": layer.ff[3].weight, "l2_b": layer.ff[3].bias,
                "n2_w": layer.norm2.weight, "n2_b": layer.norm2.bias,
            }
        )  # fmt: skip
    return {"index": index, "embed": embed, "layers": layers}


def _their_idf(corpus, analyze) -> dict[str, float]:
    """Their IDF table: the words of every query they score, max(log((n − df + 0.5) / (df + 0.5)), 0), zeros
    dropped (an unknown word has IDF there but TF 0 in every document, so it adds nothing on either side)."""
    docs = [set(analyze(t)) for t in corpus.docs.values()]
    terms = {w for q in _queries(corpus) for w in analyze(q)[:MAX_Q]}
    idf = {
        t: max(math.log((len(docs) - sum(t in d for d in docs) + 0.5) / (sum(t in d for d in docs) + 0.5)), 0)
        for t in terms
    }
    return {t: v for t, v in idf.items() if v > 0}


def official_scores(model, corpus, query: str, docs: list[str]) -> torch.Tensor:
    """Their NDRM1 or NDRM3 (eval mode) of one query against ``docs`` -> [D]."""
    analyze = analyzer("ck")
    w = _their_weights(model)
    index, embed = w["index"], w["embed"]
    q_terms = analyze(query)[:MAX_Q]
    q_ids = torch.tensor([index.get(t, 0) for t in q_terms])
    mask_q = torch.ones(len(q_terms))
    full = [["<S>"] + analyze(text) + ["</S>"] for text in docs]
    d_ids = torch.zeros(len(docs), MAX_DOC, dtype=torch.long)
    mask_d = torch.zeros(len(docs), MAX_DOC)
    for i, terms in enumerate(full):
        ids = [index.get(t, 0) for t in terms[:MAX_DOC]]
        d_ids[i, : len(ids)], mask_d[i, : len(ids)] = torch.tensor(ids), 1.0
    with torch.no_grad():
        # NDRM1
        q = F.linear(embed[q_ids], model.query_proj.weight, model.query_proj.bias)  # fc_qt
        d = embed[d_ids]
        ctx = d + _positional(MAX_DOC, H)
        for layer in w["layers"]:
            ctx = _conformer_layer(ctx, mask_d == 0, layer)
        mixed = torch.stack([d, ctx], dim=-1) @ model.mix.weight[0] + model.mix.bias  # fc_ctx
        cos = F.cosine_similarity(q[None, :, None, :], mixed[:, None, :, :], dim=-1, eps=1e-8)  # [D, Tq, Td]
        mus = torch.tensor([1 - 2 * i / 10 for i in range(10)])
        k = torch.exp(-((cos[..., None] - mus) ** 2) / (2 * 0.1**2)) * mask_d[:, None, :, None]  # [D, Tq, Td, K]
        pooled = F.avg_pool1d(k.reshape(-1, MAX_DOC, 10).permute(0, 2, 1), POOL, stride=STRIDE) * POOL
        feats = torch.log(pooled + 1e-6).permute(0, 2, 1)  # [D·Tq, windows, K]
        s = model.window_scorer
        scored = F.linear(torch.relu(F.linear(feats, s[0].weight, s[0].bias)), s[3].weight, s[3].bias)
        latent = scored.amax(dim=1).reshape(len(docs), len(q_terms)) * mask_q
        if model.variant == "ndrm1":
            return latent.sum(dim=-1)
        # NDRM2 (BatchScale in eval: x / (running mean + 1e-6))
        idfs = _their_idf(corpus, analyze)
        tf = torch.tensor([[float(terms.count(t)) for t in q_terms] for terms in full])
        dlen = torch.tensor([float(len(terms)) for terms in full])
        ex = model.explicit
        dlen = torch.relu(ex.w_dlen * dlen / (ex.scale_dlen.mean + 1e-6) + ex.b_dlen)[:, None]
        tf = tf / (ex.scale_tf.mean + 1e-6)
        explicit = tf / (tf + dlen + 1e-6) * torch.tensor([idfs.get(t, 0.0) for t in q_terms]) * mask_q
        # NDRM3: BatchNorm1d(2) (eval; identity affine) then Linear(2, 1), times the query mask
        bn = model.normalise
        y = (torch.stack([latent, explicit], dim=-1) - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps)
        y = (y @ model.combine.weight[0] + model.combine.bias) * mask_q
        return y.sum(dim=-1)


# ---- the comparison ---------------------------------------------------------------------------------------------


def _queries(corpus) -> list[str]:
    return [*corpus.queries.values(), f"wing {UNKNOWN} lift case", "the airfoil turbulence of boundary"]


def _max_difference(model, corpus) -> float:
    doc_ids = sorted(corpus.docs)
    docs = [corpus.docs[d] for d in doc_ids]
    worst = 0.0
    for query in _queries(corpus):
        ours = model.score_pairs([query] * len(docs), doc_ids, docs)
        theirs = official_scores(model, corpus, query, docs)
        assert ours.dtype == theirs.dtype == torch.float64
        worst = max(worst, (ours - theirs).abs().max().item())
    return worst


@pytest.fixture(scope="module")
def has_vector(corpus):
    lines = Path(corpus.vectors).read_text(encoding="utf-8").splitlines()
    return {line.split(" ")[0] for line in lines}


@pytest.fixture(autouse=True)
def float64():
    """Both sides in float64: the comparison is of the two functions, not of float32 rounding (in float32 the two
    sums of up to 8 term scores agree to ~1.5e-5 in scores of magnitude ~10)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _built(corpus, has_vector, variant: str, settings: dict | None = None):
    model = build_model({**OFFICIAL, **(settings or {}), "variant": variant, "embeddings": corpus.vectors}, corpus)
    model = model.double().eval()
    _randomise(model)
    model._has_vector = [w in has_vector for w in model.embedder.vocab.words]
    return model


@pytest.mark.parametrize("variant", ["ndrm1", "ndrm3"])
def test_the_full_scale_settings_compute_the_authors_forward(corpus, has_vector, variant):
    model = _built(corpus, has_vector, variant)
    vocab = model.embedder.vocab
    assert NO_VECTOR in vocab.index and not model._has_vector[vocab.index[NO_VECTOR]]  # a row here, UNK there
    assert UNKNOWN not in vocab.index
    assert model.latent_row[vocab.index[NO_VECTOR]].item() == OOV
    assert _max_difference(model, corpus) <= 1e-5


@pytest.mark.parametrize("variant", ["ndrm1", "ndrm3"])
@pytest.mark.parametrize("key", sorted(PROJECT))
def test_each_project_default_computes_another_function(corpus, has_vector, variant, key):
    """Each of the four settings at this project's default (the default config's) moves the scores away from the
    authors' at the same weights: none of the four is dead."""
    model = _built(corpus, has_vector, variant, {key: PROJECT[key]})
    assert _max_difference(model, corpus) > 1e-3


def test_the_sum_over_terms_is_still_the_score_with_unknown_query_words_scored(corpus, has_vector):
    model = _built(corpus, has_vector, "ndrm3")
    query = f"wing {UNKNOWN} lift case"
    terms = model.query_terms(query)
    assert UNKNOWN in terms and NO_VECTOR in terms  # scored through the unknown-word row
    doc_ids = sorted(corpus.docs)[:4]
    docs = [corpus.docs[d] for d in doc_ids]
    pairs = model.score_pairs([query] * len(docs), doc_ids, docs)
    summed = model.term_scores(terms, doc_ids, docs).sum(dim=0)  # term_scores returns float32
    torch.testing.assert_close(pairs.float(), summed, atol=1e-4, rtol=1e-4)
