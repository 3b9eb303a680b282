"""An exact-match channel for TK and TKL (``exact_match: true``; this project's, in neither paper nor official code).

The score gains ``w * sum_i idf_i * log(1 + tf_i)``: tf_i the number of times query word i occurs, by vocabulary id,
in the document tokens the model reads, idf_i the query term weight the kernels use (``query_term_weights``), and w
one learned weight, trained at ``train.scoring_lr``. Unknown words and padding never match.

Why: the kernels cannot count words. TK and TKL match *contextualised* vectors, in which a word and its own repeat
no longer have cosine 1, so the mu = 1 kernel (sigma 0.1) sums exact and near matches alike. On IRLeD
(docs/studies/irled-exact-match.md) the untrained count of distinct query words in the tokens each model reads ranks BM25's
top 30 better (test nDCG@10 0.278 over TK's 200 tokens, 0.285 over TKL's 2,000) than trained TK (0.179) or TKL
(0.200), and 69 training queries do not teach the kernels to count. The channel hands them the count (log-saturated,
as BM25 saturates tf); the kernels learn what it misses.

``w`` starts at 0.01: the untrained model then ranks like the IDF-weighted count, at a score spread near the hinge
loss's margin of 1 (IRLeD: 26 query terms of IDF ~2-7), rather than overriding the kernel features' spread or
hiding under it.
"""

from __future__ import annotations

import torch
from torch import nn

from longrank.data.words import OOV

INITIAL_WEIGHT = 0.01


class ExactMatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.tensor(INITIAL_WEIGHT))

    def forward(self, query: torch.Tensor, doc: torch.Tensor, query_weights: torch.Tensor) -> torch.Tensor:
        """query ids [B, Lq], document ids [B, Ld] (the tokens the model reads), query term weights [B, Lq] (0 on
        padding) -> [B] score contributions."""
        known_doc = doc > OOV
        same = (query[:, :, None] == doc[:, None, :]) & known_doc[:, None, :]
        tf = same.sum(dim=-1).to(query_weights.dtype)  # [B, Lq]
        return self.weight * (torch.log1p(tf) * query_weights * (query > OOV)).sum(dim=1)
