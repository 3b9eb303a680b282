"""The interface every re-ranker implements, so the training loop, reranking and benchmarking never
need to know which paper a model comes from.

A model is built by ``from_config(params, corpus)`` where ``params`` is the model's entry in the config
(architecture keys only; training keys live under ``train:``) and ``corpus`` gives access to the
collection (documents, queries, document frequencies) for vocabularies and IDF initialisation.

``encode`` turns raw (query, document) text pairs into CPU tensors (the model owns its tokeniser:
words for the kernel models, WordPiece for the BERT family), ``forward`` turns those tensors into one
score per pair. Models that can say *why* (TKL's region positions) also implement ``explain``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from longrank.data.corpus import Corpus


class Ranker(nn.Module):
    #: the loss the paper trains this model with; ``train.loss`` in the config overrides it
    default_loss: str = "pairwise_hinge"

    @classmethod
    def from_config(cls, params: dict[str, Any], corpus: "Corpus") -> "Ranker":
        raise NotImplementedError

    def encode(self, queries: list[str], docs: list[str]) -> dict[str, torch.Tensor]:
        """Tokenise ``len(queries) == len(docs)`` pairs into the keyword tensors ``forward`` takes."""
        raise NotImplementedError

    def forward(self, **batch: torch.Tensor) -> torch.Tensor:  # noqa: D401 - shape [batch]
        raise NotImplementedError

    def score_pairs(self, queries: list[str], doc_ids: list[str], docs: list[str]) -> torch.Tensor:
        """Scores for reranking (no gradient). Models with precomputed document representations
        (MORES Reuse-S1/S2) override this to look documents up by id instead of encoding their text."""
        batch = {k: v.to(self.device) for k, v in self.encode(queries, docs).items()}
        return self(**batch)

    def explain(self, **batch: torch.Tensor) -> dict[str, torch.Tensor] | None:
        """Optional per-pair details worth keeping beside the run (e.g. TKL's top region positions)."""
        return None

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device
