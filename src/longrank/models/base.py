"""The interface every re-ranker implements, so the training loop, reranking and benchmarking never
need to know which paper a model comes from.

A model is built by ``from_config(params, corpus)`` where ``params`` is the model's entry in the config
(architecture keys only; training keys live under ``train:``) and ``corpus`` gives access to the
collection (documents, queries, document frequencies) for vocabularies and IDF initialisation.

``encode`` turns (query, document) pairs into CPU tensors (the model owns its tokeniser: words for the
kernel models, WordPiece for the BERT family); it receives each document's id beside its text, so a model
can look up what an artifact stage computed for that document. ``forward`` turns those tensors into one
score per pair. Models that can say *why* (TKL's region positions) also implement ``explain``.

Per-document artifacts: a model declares what it needs precomputed (``artifacts(params)``: name -> scope),
the ``artifacts`` stage builds it (``build_artifacts`` into a directory) and training / reranking attach
that directory before the model scores anything (``attach_artifacts``). Scopes:

- ``collection``: built once from the data, without trained weights (MIR graphs, HDCT weights); attached
  in training and in reranking.
- ``fold``: built from one fold's trained weights (MORES Reuse-S1/S2 stores, an NDRM impact index);
  attached in reranking.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

import torch
from torch import nn

from longrank.errors import InputError
from longrank.models.modules.kept_documents import KeptDocuments
from longrank.config.schema import schema_default

if TYPE_CHECKING:
    from longrank.data.corpus import Corpus


def config_keys(part: Callable) -> dict[str, Any]:
    """The config keys a constructor (or function) takes and their defaults: its parameters that have one.
    Parameters without a default are wiring the model passes itself (a vocabulary, a width)."""
    return {
        name: p.default
        for name, p in inspect.signature(part).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


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
    def export_notes(cls, params: dict[str, Any]) -> list[str]:
        """What ``longrank export`` tells the user of a model configured by ``params`` that its ranker directory
        leaves out (a fold artifact the exported model does without)."""
        return []

    @classmethod
    def from_config(cls, params: dict[str, Any], corpus: Corpus) -> Ranker:
        raise NotImplementedError

    def encode(self, queries: list[str], doc_ids: list[str], docs: list[str]) -> dict[str, torch.Tensor]:
        """Tokenise ``len(queries) == len(doc_ids) == len(docs)`` pairs into the keyword tensors ``forward``
        takes; ``doc_ids[i]`` is the id of ``docs[i]`` (for per-document artifacts)."""
        raise NotImplementedError

    # ``*args: Any, **batch: Any``: each model's forward names its own keyword tensors (``query``, ``doc``, ...), the
    # keys its ``encode`` gives; this signature lets a subclass declare them.
    def forward(self, *args: Any, **batch: Any) -> torch.Tensor:  # noqa: D401 - shape [batch]
        raise NotImplementedError

    def train(self, mode: bool = True) -> Ranker:
        """As ``nn.Module.train``; back to training, the documents' states kept for reranking
        (:mod:`longrank.models.modules.kept_documents`) are dropped: the next step makes them stale, and on a GPU
        they would hold memory through the training."""
        if mode:
            for kept in self.__dict__.values():
                if isinstance(kept, KeptDocuments):
                    kept.clear()
        return super().train(mode)

    def score_pairs(self, queries: list[str], doc_ids: list[str], docs: list[str]) -> torch.Tensor:
        """Scores for reranking (no gradient). Models with precomputed document representations
        (MORES Reuse-S1/S2) override this to look documents up by id instead of encoding their text."""
        batch = {k: v.to(self.device) for k, v in self.encode(queries, doc_ids, docs).items()}
        return self(**batch)

    # --- per-document artifacts (see the module docstring) -------------------------------------------
    # What the workflow asks of a model type without building one (its capabilities, document budget, the artifacts
    # it needs) is its row of the torch-free table longrank.config.model_types, which the registry checks this class against.
    def build_artifacts(
        self,
        scope: str,
        corpus: Corpus,
        doc_ids: list[str],
        out_dir: Path,
        *,
        batch_size: int = schema_default("rerank.batch_size"),
    ) -> None:
        """Write this model's artifacts of ``scope`` for ``doc_ids`` into the (existing, empty) ``out_dir``, on the
        model's device, ``batch_size`` documents at a time where batches matter. For ``fold`` the model holds that
        fold's trained weights."""
        raise InputError(f"{type(self).__name__} declares no {scope!r} artifacts to build")

    def attach_artifacts(self, directory: Path) -> None:
        """Use the artifacts ``build_artifacts`` wrote into ``directory`` from now on. A model with artifacts of
        both scopes is called once per scope's directory, the collection's first."""
        raise InputError(f"{type(self).__name__} declares no artifacts; {directory} cannot be attached")

    def explain(self, *args: Any, **batch: Any) -> dict[str, torch.Tensor] | None:  # keys: as ``forward``
        """Optional per-pair details worth keeping beside the run (e.g. TKL's top region positions)."""
        return None

    def explain_pairs(self, queries: list[str], doc_ids: list[str], docs: list[str]) -> dict[str, torch.Tensor] | None:
        """``explain`` of pairs given as text, as reranking asks it after ``score_pairs`` of the same pairs (a model
        that keeps its documents' states there reads them back here)."""
        return self.explain(**{k: v.to(self.device) for k, v in self.encode(queries, doc_ids, docs).items()})

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device
