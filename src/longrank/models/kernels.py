"""Pieces the kernel-pooling family shares (KNRM, TK, TKL): RBF kernels over cosine similarity and
GloVe-initialised word embeddings over the collection vocabulary."""

from __future__ import annotations

import torch
from torch import nn

from longrank.data.words import PAD, Vocabulary, embedding_matrix


def kernel_centers(n_kernels: int = 11, sigma: float = 0.1, exact_sigma: float = 0.001) -> tuple[torch.Tensor, torch.Tensor]:
    """KNRM's kernels: one exact-match kernel at mu = 1 (sigma 0.001) and ``n_kernels - 1`` soft kernels
    centred at 0.9, 0.7, ..., -0.9 (for 11 kernels) with ``sigma``. Returns (mu, sigma), each [K]."""
    soft = n_kernels - 1
    step = 2.0 / soft
    mus = [1.0] + [1.0 - step / 2 - i * step for i in range(soft)]
    sigmas = [exact_sigma] + [sigma] * soft
    return torch.tensor(mus), torch.tensor(sigmas)


def rbf_kernels(cosine: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """[..., Lq, Ld] cosine similarities -> [..., Lq, Ld, K] kernel activations (Eq. 2 of TKL)."""
    return torch.exp(-((cosine.unsqueeze(-1) - mu) ** 2) / (2 * sigma**2))


def cosine_matrix(q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """[B, Lq, E] x [B, Ld, E] -> [B, Lq, Ld] cosine similarities (padding vectors give 0, not NaN)."""
    qn = nn.functional.normalize(q, dim=-1, eps=1e-8)
    dn = nn.functional.normalize(d, dim=-1, eps=1e-8)
    return torch.bmm(qn, dn.transpose(1, 2))


class WordEmbedder(nn.Module):
    """The collection vocabulary with GloVe vectors (``embeddings: glove-6b-50d`` from PyPI, or a path to a
    word-vector text file for the papers' 300d GloVe). Also owns tokenisation into padded id tensors."""

    def __init__(self, vocab: Vocabulary, source: str = "glove-6b-50d", trainable: bool = True):
        super().__init__()
        self.vocab = vocab
        matrix, self.coverage = embedding_matrix(vocab, source)
        self.embedding = nn.Embedding.from_pretrained(matrix, freeze=not trainable, padding_idx=PAD)

    @property
    def dim(self) -> int:
        return self.embedding.embedding_dim

    def encode(self, texts: list[str], max_len: int, min_len: int = 1) -> torch.Tensor:
        return self.vocab.encode_batch(texts, max_len, min_len)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids [B, L] -> (vectors [B, L, E], mask [B, L] float, 1 for real tokens)."""
        return self.embedding(ids), (ids != PAD).float()
