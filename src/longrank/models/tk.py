"""TK: Hofstätter, Zlabinger and Hanbury, "Interpretable & Time-Budget-Constrained Contextualization for
Re-Ranking" (ECAI 2020); the Transformer baseline of the TKL paper's Table 1 (max document length 200).

Word embeddings (GloVe, trainable) are contextualised by a small Transformer; a learned scalar mixes raw and
contextual vectors (``mix * raw + (1 - mix) * contextual``, initialised 0.5; the TKL paper's "highway
connection"), and the mixed vectors are matched by kernel pooling: cosine similarities, 11 RBF kernels,
per-query-term saturation, query terms summed, kernel weights to the score.

Choices, stated, with the source each default follows (the official code is matchmaker's
``models/published/ecai20_tk.py``):
- Attention: post-norm Transformer encoder layers (ReLU feed-forward, as ``nn.TransformerEncoderLayer``, on
  ``scaled_dot_product_attention``) with ``n_heads`` heads that split the embedding width, so 50d GloVe
  gives **10 heads of 5 dimensions** (300d GloVe: 10 of 30); FF width 300; dropout 0 (official code).
- Positions (official code): sinusoids added to the Transformer's input only (not to the raw half of the
  mix); query tokens take positions 0, 1, ..., document tokens ``doc_position_offset`` = 500, 501, ...
  ``positions: learned`` makes them trainable (TKL's choice); ``doc_position_offset: 0`` shares them.
- Kernels: mu = 1, 0.9, 0.7, ..., -0.9 with sigma 0.1 for *every* kernel (``exact_sigma: 0.1``): the TKL paper
  states "11 kernels from -1 to +1 and standard deviation of 0.1", and after contextualisation the same word
  in two places no longer has cosine exactly 1, so KNRM's sigma = 0.001 exact-match kernel would rarely fire.
- Pooling (official code): log-saturated kernel sums per query term (KNRM's ``log(sum) * 0.01``), summed
  over query terms, one linear layer to the score. ``length_norm: true`` adds a second feature set, kernel
  mass per document token (this project's first version; it invites a document-length shortcut).
- Query terms and unknown words: see ``kernels.py`` (``remove_query_stopwords``, ``query_term_weights``;
  OOV tokens are masked like padding, as the official ``pad_oov_mask``).
- Learning rates: ``train.scoring_lr`` reaches ``dense`` (the official code gives its kernel weights 10x
  the Transformer's rate), ``train.embedding_lr`` the word embeddings.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from longrank.io import InputError
from longrank.models.base import Ranker, config_keys, split_config
from longrank.models.kernels import WordEmbedder, cosine_matrix, kernel_centers, rbf_kernels


def sinusoidal_positions(length: int, dim: int, device=None) -> torch.Tensor:
    """[length, dim] sine/cosine position features (Vaswani et al.), computed on the fly so any length works."""
    position = torch.arange(length, dtype=torch.float32, device=device)[:, None]
    half = (dim + 1) // 2
    freq = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=device) / max(1, half))
    angles = position * freq
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)[:, :dim]


class EncoderLayer(nn.Module):
    """A post-norm Transformer encoder layer (as ``nn.TransformerEncoderLayer``: attention, add & norm, ReLU
    feed-forward, add & norm) on ``F.scaled_dot_product_attention``, so training and inference take the same
    fused attention kernel; PyTorch's inference fast path for ``nn.TransformerEncoderLayer`` uses a masked
    softmax that took over a quarter of TKL's CPU inference time."""

    def __init__(self, dim: int, n_heads: int, ff_dim: int, dropout: float):
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, ff_dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ff_dim, dim))
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, attend: torch.Tensor) -> torch.Tensor:
        """x [N, L, E]; attend [N, 1, 1, L] bool, True for keys that may be attended to."""
        n, length, dim = x.shape
        q, k, v = self.qkv(x).view(n, length, 3, self.n_heads, dim // self.n_heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=attend, dropout_p=self.dropout if self.training else 0.0)
        x = self.norm1(x + self.drop1(self.out(att.transpose(1, 2).reshape(n, length, dim))))
        return self.norm2(x + self.drop2(self.ff(x)))


POSITIONS = ("fixed", "learned")


class Contextualizer(nn.Module):
    """TK's representation: Transformer over (embedding + position) with a learned raw/contextual mix.

    Input vectors [N, L, E] and mask [N, L] (1 = real token); output [N, L, E] with padding vectors zeroed.
    Rows without any real token (an empty query, a padding-only TKL window on the unpacked path) would make
    attention's softmax NaN; they attend over their (ignored) padding instead and their output is zeroed.

    Position features (official code): queries take sinusoid rows 0, 1, ... and documents rows
    ``doc_position_offset`` (500), 501, ..., so the Transformer can tell a query from a document token;
    ``positions: fixed`` keeps the sinusoids (TK, ECAI 2020), ``learned`` starts from them and trains them
    (TKL, SIGIR 2020). ``doc_position_offset: 0`` shares one set of positions (this project's first version).
    ``max_positions`` is the longest sequence the model feeds (a learned table has one row per position).
    """

    def __init__(self, dim: int, max_positions: int, n_layers: int = 2, n_heads: int = 10, ff_dim: int = 300,
                 dropout: float = 0.0, positions: str = "fixed", doc_position_offset: int = 500):
        super().__init__()
        if dim % n_heads:
            raise InputError(f"n_heads: {n_heads} heads must divide the embedding width {dim} (e.g. 10 for 50d or 300d GloVe)")
        if positions not in POSITIONS:
            raise InputError(f"positions: {positions!r} is not one of {list(POSITIONS)}")
        if doc_position_offset < 0:
            raise InputError(f"doc_position_offset: must be >= 0, got {doc_position_offset}")
        self.layers = nn.ModuleList(EncoderLayer(dim, n_heads, ff_dim, dropout) for _ in range(n_layers))
        self.mix = nn.Parameter(torch.tensor(0.5))
        self.doc_position_offset = doc_position_offset
        self.position_table = None
        if positions == "learned":
            self.position_table = nn.Parameter(sinusoidal_positions(doc_position_offset + max_positions, dim))

    def positions(self, length: int, offset: int, dim: int, device) -> torch.Tensor:
        if self.position_table is None:
            return sinusoidal_positions(offset + length, dim, device)[offset:]
        if offset + length > len(self.position_table):
            raise InputError(f"a sequence of {length} tokens exceeds the {len(self.position_table) - offset} learned positions")
        return self.position_table[offset : offset + length]

    def forward(self, vectors: torch.Tensor, mask: torch.Tensor, is_document: bool = False) -> torch.Tensor:
        attend = mask > 0
        attend = (attend | ~attend.any(dim=1, keepdim=True))[:, None, None, :]  # all-padding rows: attend to all
        offset = self.doc_position_offset if is_document else 0
        contextual = vectors + self.positions(vectors.shape[1], offset, vectors.shape[2], vectors.device)
        for layer in self.layers:
            contextual = layer(contextual, attend)
        return (self.mix * vectors + (1 - self.mix) * contextual) * mask[..., None]


def tk_kernels(n_kernels: int = 11, sigma: float = 0.1, exact_sigma: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """TK/TKL's kernels (every sigma 0.1, see above); the keyword defaults are the config defaults."""
    return kernel_centers(n_kernels, sigma, exact_sigma)


class TK(Ranker):
    default_loss = "pairwise_hinge"
    config_parts = (WordEmbedder, Contextualizer, tk_kernels)
    parameter_groups = {"embeddings": ("embedder.",), "scoring": ("dense.",)}

    def __init__(self, embedder: WordEmbedder, contextualizer: Contextualizer, mu: torch.Tensor, sigma: torch.Tensor,
                 max_query_len: int = 30, max_doc_len: int = 200, length_norm: bool = False):
        super().__init__()
        self.embedder, self.contextualizer = embedder, contextualizer
        self.max_query_len, self.max_doc_len, self.length_norm = max_query_len, max_doc_len, length_norm
        self.register_buffer("mu", mu, persistent=False)
        self.register_buffer("sigma", sigma, persistent=False)
        n_features = len(mu) * (2 if length_norm else 1)
        self.dense = nn.Linear(n_features, 1)
        # Small initial weights, as KNRM: log-sum features are large and a big first step wrecks the embeddings.
        nn.init.uniform_(self.dense.weight, -0.014, 0.014)
        nn.init.zeros_(self.dense.bias)

    @classmethod
    def from_config(cls, params, corpus):
        embedder_keys, context_keys, kernel_keys, own = split_config("tk", params, WordEmbedder, Contextualizer, tk_kernels, cls.__init__)
        embedder = WordEmbedder(corpus.word_vocabulary, **embedder_keys)
        sizes = {**config_keys(cls.__init__), **own}  # the learned position table must hold the longest input
        longest = max(sizes["max_query_len"], sizes["max_doc_len"])
        return cls(embedder, Contextualizer(embedder.dim, longest, **context_keys), *tk_kernels(**kernel_keys), **own)

    def encode(self, queries, docs):
        return {"query": self.embedder.encode_query(queries, self.max_query_len), "doc": self.embedder.encode(docs, self.max_doc_len)}

    def forward(self, query: torch.Tensor, doc: torch.Tensor) -> torch.Tensor:
        q, q_mask = self.embedder(query)
        d, d_mask = self.embedder(doc)
        q, d = self.contextualizer(q, q_mask), self.contextualizer(d, d_mask, is_document=True)
        kernels = rbf_kernels(cosine_matrix(q, d), self.mu, self.sigma) * d_mask[:, None, :, None]
        per_term = kernels.sum(dim=2)  # [B, Lq, K]
        q_weight = self.embedder.query_weights(query, q_mask)[..., None]
        features = [(torch.log(torch.clamp(per_term, min=1e-10)) * 0.01 * q_weight).sum(dim=1)]
        if self.length_norm:
            doc_len = d_mask.sum(dim=1).clamp(min=1.0)
            features.append((per_term / doc_len[:, None, None] * q_weight).sum(dim=1))
        return self.dense(torch.cat(features, dim=-1)).squeeze(-1)
