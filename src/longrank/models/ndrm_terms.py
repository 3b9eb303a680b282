"""NDRM's terms (:mod:`longrank.models.ndrm`): the vocabulary and embedder of its text processing, the IDF and
RBF kernels its variants read, and the explicit term score of NDRM2 (Eq. 4) with its batch-scaled statistics."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from longrank.data import word2vec as word2vec_stage
from longrank.data.words import PAD, Vocabulary, analyzer
from longrank.errors import InputError
from longrank.io.text_records import read_tsv_dict
from longrank.models.modules.word_embedder import WORD2VEC, WordEmbedder, word2vec_path
from longrank.config.schema import schema_default

SCALE_EPS = 1e-6  # Eq. 4's ε, in BatchScale and in the denominator
IDF_FORMULAS = ("smoothed", "clipped")


def ndrm_idf(vocab: Vocabulary, formula: str = "smoothed") -> torch.Tensor:
    """NDRM2's IDF per vocabulary id: ``smoothed`` log((N − df + 0.5) / (df + 0.5) + 1) (``Vocabulary.idf``, the
    other kernel models' and BM25's, never negative) or ``clipped`` max(log((N − df + 0.5) / (df + 0.5)), 0), the
    authors' code's (0 for a term in half the documents or more); 0 for padding either way."""
    if formula not in IDF_FORMULAS:
        raise InputError(f"idf_formula: {formula!r} is not one of {list(IDF_FORMULAS)}")
    if formula == "smoothed":
        return vocab.idf()
    df = torch.tensor(vocab.doc_freq, dtype=torch.float64)
    idf = torch.clamp(torch.log((vocab.num_docs - df + 0.5) / (df + 0.5)), min=0.0).float()
    idf[PAD] = 0.0
    return idf


def ndrm_kernels(n_kernels: int = 10, sigma: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """NDRM's RBF kernels: mu_i = 1 − 2i/K (i = 0..K−1), every sigma ``sigma`` (see the module docstring).
    The keyword defaults are the config defaults (the paper's 10 kernels)."""
    if n_kernels < 1:
        raise InputError(f"n_kernels: must be a positive integer, got {n_kernels}")
    return torch.tensor([1.0 - 2.0 * i / n_kernels for i in range(n_kernels)]), torch.full((n_kernels,), float(sigma))


class BatchScale(nn.Module):
    """BS(x) = x / (E[x] + ε) (Eq. 4), E[x] the cumulative mean over training batches (module docstring)."""

    mean: torch.Tensor  # buffers: E[x] and the number of values it averages
    count: torch.Tensor

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.ones(()))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.training:
            values = x.detach() if mask is None else x.detach()[mask.bool()]
            if values.numel():
                total = self.count + values.numel()
                self.mean.copy_((self.mean.double() * self.count + values.double().sum()) / total)
                self.count.copy_(total)
        return x / (self.mean + SCALE_EPS)


class ExplicitMatch(nn.Module):
    """NDRM2's term score (Eq. 4); w_dlen and b_dlen are its only parameters."""

    def __init__(self):
        super().__init__()
        self.scale_tf, self.scale_dlen = BatchScale(), BatchScale()
        self.w_dlen = nn.Parameter(torch.tensor(1.0))
        self.b_dlen = nn.Parameter(torch.tensor(0.0))

    def forward(
        self, tf: torch.Tensor, dlen: torch.Tensor, idf: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """tf [D, T], dlen [D], idf [D or 1, T], mask [D, T] (real query terms, for the TF statistics) -> [D, T]."""
        tf = self.scale_tf(tf, mask)
        saturation = torch.relu(self.w_dlen * self.scale_dlen(dlen) + self.b_dlen)[:, None]
        return idf * tf / (tf + saturation + SCALE_EPS)


def processed_embedder(corpus, processing: str, embedder_keys: dict) -> WordEmbedder:
    """The word embedder over ``corpus``'s terms as ``processing`` (``text_processing``) makes them."""
    if processing == "words":
        return WordEmbedder.for_corpus(corpus, **embedder_keys)  # resolves ``embeddings: word2vec`` (the paper's)
    # the vocabulary is read with the filters already: not cut again (a cut would drop the query words kept beyond
    # it, whose document frequency is not 0)
    keys = {**embedder_keys, "min_doc_freq": 1, "max_vocabulary": None}
    if keys.get("embeddings") == WORD2VEC:
        keys["embeddings"] = str(word2vec_path(corpus.dir))
    return WordEmbedder(processed_vocabulary(corpus, processing, embedder_keys), **keys)


def processed_vocabulary(corpus, processing: str, embedder_keys: dict) -> Vocabulary:
    """The vocabulary of ``processing``'s terms (stems, for ``ck``), its ``analyze`` that processing. With
    ``embeddings: word2vec`` it is read from the word2vec stage's document frequencies, which must have been
    counted with the same processing (``word2vec.json`` says which); otherwise it is counted here over the
    collection's documents (a pass over them: fine for a small collection, use word2vec on a large one)."""
    analyze = analyzer(processing)
    queries = read_tsv_dict(Path(corpus.dir) / "queries.tsv").values()
    limits = (embedder_keys.get("min_doc_freq", 1), embedder_keys.get("max_vocabulary"))
    if embedder_keys.get("embeddings") != WORD2VEC:
        return Vocabulary.build(corpus.docs.values(), queries, *limits, analyze=analyze)
    directory = word2vec_path(corpus.dir).parent
    meta_path = directory / word2vec_stage.META_FILE
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    trained_on = meta.get("processing", schema_default("word2vec.processing"))
    if trained_on != processing:
        raise InputError(
            f"ndrm: text_processing: {processing} needs word vectors of {processing} terms, but "
            f"{directory / word2vec_stage.FILE_NAME} was trained on {trained_on!r} terms "
            f"({meta_path}); set the config's word2vec.processing: {processing} and rerun the word2vec stage"
        )
    return Vocabulary.load(
        directory / word2vec_stage.DOC_FREQ_FILE, corpus.stats["num_docs"], queries, *limits, analyze=analyze
    )
