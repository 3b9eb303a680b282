"""A researcher's own ranker, run beside the papers' models without editing the package (docs/your-model.md):
KNRM whose kernels are pooled twice over the document, by KNRM's log-sum and by their peak (the best single match
of each query word per kernel), so one strong passage counts as well as many weak ones. Built on the package's own
word embedder and kernels; ``examples/your_model.yaml`` names it beside KNRM."""

from __future__ import annotations

import torch
from torch import nn

from longrank.models.base import Ranker, split_config
from longrank.models.modules.kernel_pooling import cosine_matrix, kernel_centers, rbf_kernels
from longrank.models.modules.word_embedder import WordEmbedder


class KernelMax(Ranker):
    reads = "words"  # as its config entry says: the workflow cuts documents into words for it
    config_parts = (WordEmbedder,)  # the entry's embedder keys (embeddings, train_embeddings, ...) go to it
    parameter_groups = {"embeddings": ("embedder.",), "scoring": ("dense.",)}  # train.embedding_lr, train.scoring_lr

    def __init__(self, embedder: WordEmbedder, n_kernels: int = 11, max_query_len: int = 30, max_doc_len: int = 200):
        super().__init__()
        self.embedder = embedder
        self.max_query_len, self.max_doc_len = max_query_len, max_doc_len
        mu, sigma = kernel_centers(n_kernels)
        self.register_buffer("mu", mu, persistent=False)
        self.register_buffer("sigma", sigma, persistent=False)
        self.dense = nn.Linear(2 * n_kernels, 1)  # log-sum and peak features of every kernel
        nn.init.uniform_(self.dense.weight, -0.014, 0.014)
        nn.init.zeros_(self.dense.bias)

    @classmethod
    def from_config(cls, params, corpus):
        embedder_keys, own = split_config("kernel_max", params, WordEmbedder, cls.__init__)
        return cls(WordEmbedder.for_corpus(corpus, **embedder_keys), **own)

    def encode(self, queries, doc_ids, docs):
        return self.embedder.encode_pair(queries, docs, self.max_query_len, self.max_doc_len)

    def forward(self, query: torch.Tensor, doc: torch.Tensor) -> torch.Tensor:
        q, q_mask = self.embedder(query)
        d, d_mask = self.embedder(doc)
        kernels = rbf_kernels(cosine_matrix(q, d), self.mu, self.sigma) * d_mask[:, None, :, None]  # [B, Lq, Ld, K]
        log_sum = torch.log(torch.clamp(kernels.sum(dim=2), min=1e-10)) * 0.01  # [B, Lq, K], as KNRM
        peak = kernels.max(dim=2).values  # [B, Lq, K]
        per_term = torch.cat([log_sum, peak], dim=-1) * self.embedder.query_weights(query, q_mask)[:, :, None]
        return self.dense(per_term.sum(dim=1)).squeeze(-1)  # [B]
