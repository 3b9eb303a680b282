"""KNRM: Xiong et al., "End-to-End Neural Ad-hoc Ranking with Kernel Pooling" (SIGIR 2017); the kernel
baseline of the TKL paper's Table 1.

Translation matrix of cosine similarities between query and document word embeddings, 11 RBF kernels
(exact match mu = 1, sigma = 0.001; soft kernels mu = 0.9 ... -0.9, sigma = 0.1), log-sum pooling over the
document per query term, summed over query terms, and a linear layer to the score. The original applies
tanh to the output; like the TK authors' re-implementation we leave the score linear, which keeps
pairwise-loss gradients from vanishing once scores grow.
"""

from __future__ import annotations

import torch
from torch import nn

from longrank.models.base import Ranker, split_config
from longrank.models.modules.kernel_pooling import cosine_matrix, kernel_centers, rbf_kernels
from longrank.models.modules.word_embedder import WordEmbedder


class KNRM(Ranker):
    default_loss = "pairwise_hinge"
    config_parts = (WordEmbedder,)
    parameter_groups = {"embeddings": ("embedder.",), "scoring": ("dense.",)}
    mu: torch.Tensor  # buffers: the kernels' centres and widths
    sigma: torch.Tensor

    def __init__(self, embedder: WordEmbedder, n_kernels: int = 11, max_query_len: int = 30, max_doc_len: int = 200):
        super().__init__()
        self.embedder = embedder
        self.max_query_len, self.max_doc_len = max_query_len, max_doc_len
        mu, sigma = kernel_centers(n_kernels)
        self.register_buffer("mu", mu, persistent=False)
        self.register_buffer("sigma", sigma, persistent=False)
        self.dense = nn.Linear(n_kernels, 1)
        # Small initial weights: log-sum features are large, and a big first step wrecks the embeddings.
        nn.init.uniform_(self.dense.weight, -0.014, 0.014)
        nn.init.zeros_(self.dense.bias)

    @classmethod
    def from_config(cls, params, corpus):
        embedder_keys, own = split_config("knrm", params, WordEmbedder, cls.__init__)
        return cls(WordEmbedder.for_corpus(corpus, **embedder_keys), **own)

    def encode(self, queries, doc_ids, docs):
        return self.embedder.encode_pair(queries, docs, self.max_query_len, self.max_doc_len)

    def forward(self, query: torch.Tensor, doc: torch.Tensor) -> torch.Tensor:
        q, q_mask = self.embedder(query)
        d, d_mask = self.embedder(doc)
        kernels = rbf_kernels(cosine_matrix(q, d), self.mu, self.sigma) * d_mask[:, None, :, None]
        per_term = torch.log(torch.clamp(kernels.sum(dim=2), min=1e-10)) * 0.01  # [B, Lq, K]; 0.01 as in KNRM
        features = (per_term * self.embedder.query_weights(query, q_mask)[:, :, None]).sum(dim=1)  # [B, K]
        return self.dense(features).squeeze(-1)
