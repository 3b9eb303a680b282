"""Model registry: the ``type:`` of a config entry names one paper model (one file each).

Imports are lazy so that a workflow using only KNRM never imports transformers.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import asdict, dataclass
from typing import Any

from longrank.io import InputError

MODEL_TYPES = {
    "knrm": "longrank.models.knrm:KNRM",
    "tk": "longrank.models.tk:TK",
    "tkl": "longrank.models.tkl:TKL",
    "ndrm": "longrank.models.ndrm:NDRM",
    "bert_ranker": "longrank.models.bert_ranker:BertRanker",
    "mores": "longrank.models.mores:MORES",
    "bi_encoder": "longrank.models.bi_encoder:BiEncoder",
    "mir": "longrank.models.mir:MIR",
}

# Keys of a model's config entry that belong to the workflow, not to the model's constructor (``like`` is resolved
# away when the config is validated: longrank.config.resolve_likes).
WORKFLOW_KEYS = {
    "type",
    "train",
    "interpolate",
    "rerank_depth",
    "enabled",
    "checkpoint_of",
    "first_stage",
    "graph_set",
    "like",
}


def model_module(model_type: str) -> str:
    """The module that defines model type ``model_type`` (its code is an input of its training and reranking)."""
    if model_type not in MODEL_TYPES:
        raise InputError(f"unknown model type {model_type!r}; expected one of {sorted(MODEL_TYPES)}")
    return MODEL_TYPES[model_type].split(":")[0]


def model_class(model_type: str):
    try:
        module_name, class_name = MODEL_TYPES[model_type].split(":")
    except KeyError:
        raise InputError(f"unknown model type {model_type!r}; expected one of {sorted(MODEL_TYPES)}") from None
    return getattr(importlib.import_module(module_name), class_name)


def architecture_params(model_cfg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in model_cfg.items() if k not in WORKFLOW_KEYS}


def build_model(model_cfg: dict[str, Any], corpus):
    """Construct the (untrained) model a config entry describes."""
    return model_class(model_cfg["type"]).from_config(architecture_params(model_cfg), corpus)


def constructor_defaults(model_type: str) -> dict[str, Any]:
    """The architecture keys a model type falls back to when its config entry leaves them out (its own
    constructor's and those of the parts it builds from its config, e.g. TK's embedder and Transformer)."""
    from longrank.models.base import config_keys

    cls = model_class(model_type)
    defaults: dict[str, Any] = {}
    for part in (*cls.config_parts, cls.__init__):
        defaults.update(config_keys(part))
    return {**defaults, **cls.part_defaults}


def artifact_scopes(model_cfg: dict[str, Any]) -> list[str]:
    """The sorted scopes (``collection``, ``fold``) of the per-document artifacts a configured model entry
    needs (``Ranker.artifacts``); the workflow adds an ``artifacts`` job per scope (and per fold)."""
    from longrank.models.base import ARTIFACT_SCOPES

    declared = model_class(model_cfg["type"]).artifacts(architecture_params(model_cfg))
    bad = {name: scope for name, scope in declared.items() if scope not in ARTIFACT_SCOPES}
    if bad:
        raise InputError(f"{model_cfg['type']}: artifacts {bad} have a scope other than {list(ARTIFACT_SCOPES)}")
    return sorted(set(declared.values()))


@dataclass(frozen=True)
class Capabilities:
    """What the workflow, the config checks, the benches and the report ask of a configured model entry, as its class
    declares it (``Ranker.reads_graph_set`` and the rest): the one place besides the model's own file that a new model
    type touches is ``MODEL_TYPES``."""

    reads_graph_set: bool  # MIR: the entry names a graph set under mir_graphs, which the workflow builds
    speed_bench: str | None  # the paper-figure bench that times it (longrank.models.base.SPEED_BENCHES), if any
    cross_encoder: bool  # a BERT row the report sets beside MIR's
    parameter_groups: tuple[str, ...]  # the groups a training key gives their own learning rate
    document_budget: int | None  # how much of a document the entry reads (words or WordPiece tokens), if it says

    def to_json(self) -> dict[str, Any]:
        """As the config stage writes it into config.json (the report reads it there)."""
        return {**asdict(self), "parameter_groups": list(self.parameter_groups)}


def capabilities(model_cfg: dict[str, Any]) -> Capabilities:
    """The capabilities of a configured model entry (its type's declarations, its document budget from its keys)."""
    cls = model_class(model_cfg["type"])
    return Capabilities(
        reads_graph_set=cls.reads_graph_set,
        speed_bench=cls.speed_bench,
        cross_encoder=cls.cross_encoder,
        parameter_groups=tuple(sorted(cls.parameter_groups)),
        document_budget=cls.document_budget(architecture_params(model_cfg)),
    )


def on_pretrained_encoder(model_type: str) -> bool:
    """Whether the model is built on a pretrained WordPiece encoder (BERT ranker, MORES, bi-encoder)."""
    return "encoder" in inspect.signature(model_class(model_type).__init__).parameters
