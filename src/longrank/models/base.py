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

import inspect
from typing import TYPE_CHECKING, Any, Callable

import torch
from torch import nn

from longrank.io import InputError

if TYPE_CHECKING:
    from longrank.data.corpus import Corpus


def config_keys(part: Callable) -> dict[str, Any]:
    """The config keys a constructor (or function) takes and their defaults: its parameters that have one.
    Parameters without a default are wiring the model passes itself (a vocabulary, a width)."""
    return {name: p.default for name, p in inspect.signature(part).parameters.items()
            if p.default is not inspect.Parameter.empty}


def split_config(model: str, params: dict[str, Any], *parts: Callable) -> list[dict[str, Any]]:
    """Deal a model's config keys out to the parts that take them (by their signatures), so each default
    lives in one place, the part's signature. A key no part takes is an error naming the key."""
    taken = [{k: v for k, v in params.items() if k in config_keys(part)} for part in parts]
    unknown = set(params) - {k for part in parts for k in config_keys(part)}
    if unknown:
        known = sorted({k for part in parts for k in config_keys(part)})
        raise InputError(f"{model}: unknown keys {sorted(unknown)}; expected some of {known}")
    return taken


class Ranker(nn.Module):
    #: the loss the paper trains this model with; ``train.loss`` in the config overrides it
    default_loss: str = "pairwise_hinge"
    #: callables besides ``__init__`` whose keyword defaults are config keys of this model (``split_config``)
    config_parts: tuple[Callable, ...] = ()
    #: this model's own defaults for keys of its parts, where they differ from the part's signature
    part_defaults: dict[str, Any] = {}
    #: parameter groups a training key can give their own learning rate: group -> parameter-name prefixes
    #: (``train.embedding_lr`` -> ``embeddings``, ``train.scoring_lr`` -> ``scoring``)
    parameter_groups: dict[str, tuple[str, ...]] = {}

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
