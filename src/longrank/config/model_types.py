"""The model types as the workflow sees them, without importing one: for each config entry's ``type:``, the
architecture keys it takes with their defaults, what the workflow, the config checks, the benches and
the report ask of it (its capabilities), how much of a document it reads and which per-document artifacts it needs.

Torch-free on purpose: the config checks and the workflow's parse (``snakemake -n``) read this table, never the model
classes, so a dry run imports no torch. The classes stay the truth of their own keys: the architecture defaults here
are generated from their signatures (``longrank.config.model_defaults``, written by ``python -m longrank.docgen``), and
``longrank.models.registry`` checks each class against its row the first time it loads it, so a table that has fallen
behind a model's code stops the job that would have read it, with the command that brings it up to date.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any
from collections.abc import Callable, Mapping

from longrank.errors import InputError
from longrank.config.model_defaults import ARCHITECTURE_DEFAULTS
from longrank.config.user_models import USER_KEYS, is_user, kind_of

# The pretrained encoders an entry's ``encoder:`` can name besides a Hugging Face checkpoint or a directory
# (longrank.models.modules.encoders loads them)
DEFAULT_ENCODER = "minilm"
RANDOM_BERT_BASE = "random-bert-base"
#: MaxP windows of a BERT ranker entry that leaves ``max_passages`` out
DEFAULT_MAX_PASSAGES = 16

#: the paper-figure benches a model type can declare (``ModelType.speed_bench``): rules of workflow/rules/bench.smk and
#: workflow/rules/attention_scaling.smk
SPEED_BENCHES = ("mores_speed", "mir_speed", "attention_scaling")
#: where a per-document artifact is built: once from the data, or from one fold's trained weights
ARTIFACT_SCOPES = ("collection", "fold")

# Keys of a model's config entry that belong to the workflow, not to the model's constructor (``like`` is resolved
# away when the config is validated: longrank.validation.validate.resolve_likes).
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


def max_doc_len(params: Mapping[str, Any]) -> int | None:
    """Most models read a document's first ``max_doc_len`` words or tokens; None when the entry leaves it out."""
    return params.get("max_doc_len")


def bert_windows(params: Mapping[str, Any]) -> int | None:
    """The passages the BERT ranker reads (FirstP: ``passage_len``; MaxP: ``max_passages`` windows every
    ``passage_stride``, as its ``encode`` cuts them); None for an entry that leaves ``passage_len`` out."""
    window = params.get("passage_len")
    if not window:
        return max_doc_len(params)
    if params.get("mode") != "maxp":
        return window
    stride = params.get("passage_stride") or window
    return stride * ((params.get("max_passages") or DEFAULT_MAX_PASSAGES) - 1) + window


def mir_tokens(params: Mapping[str, Any]) -> int | None:
    """``max_doc_tokens`` (None: the graph set's, which cut the documents)."""
    return params.get("max_doc_tokens")


def no_artifacts(params: Mapping[str, Any]) -> dict[str, str]:
    return {}


def no_batch_norm(params: Mapping[str, Any]) -> bool:
    return False


def ndrm3_batch_norm(params: Mapping[str, Any]) -> bool:
    """NDRM3 batch-normalises its two per-term scores before combining them (Eq. 3); NDRM1 and NDRM2 have no batch
    norm."""
    return params.get("variant", ARCHITECTURE_DEFAULTS["ndrm"]["variant"]) == "ndrm3"


def mores_store(params: Mapping[str, Any]) -> dict[str, str]:
    """Reuse-S1/S2 need the reuse store, built per fold from that fold's trained weights."""
    reuse = params.get("reuse", ARCHITECTURE_DEFAULTS["mores"]["reuse"])
    return {"store": "fold"} if reuse in ("s1", "s2") else {}


@dataclass(frozen=True)
class ModelType:
    """What one ``type:`` declares to the workflow (the class that implements it: ``longrank.models.registry``)."""

    #: the groups a training key gives their own learning rate (``train.embedding_lr`` -> ``embeddings``,
    #: ``train.scoring_lr`` -> ``scoring``); the class maps each to its parameters' name prefixes
    parameter_groups: tuple[str, ...] = ()
    #: reads each document by id from a graph set under ``mir_graphs`` (MIR): the workflow builds the set, the entry
    #: must name one, and the generic bench, which cuts synthetic documents, cannot time it
    reads_graph_set: bool = False
    #: the paper-figure bench that times it: ``mores_speed`` (MORES Table 4), ``mir_speed`` (MIR Fig. 5: MIR, and
    #: BERT-MaxP over the same windows), ``attention_scaling`` (NDRM Fig. 2); None when none does
    speed_bench: str | None = None
    #: query and document tokens attend to each other in a pretrained BERT encoder (the BERT ranker, MORES): the BERT
    #: rows the report sets beside MIR's
    cross_encoder: bool = False
    #: built on a pretrained WordPiece encoder (its ``encoder:`` key): its budget is in WordPiece tokens
    on_pretrained_encoder: bool = False
    #: how much of a document an entry reads, from its own architecture keys (defaults not filled in)
    document_budget: Callable[[Mapping[str, Any]], int | None] = field(default=max_doc_len, compare=False)
    #: the per-document artifacts an entry needs: artifact name -> scope (``ARTIFACT_SCOPES``)
    artifacts: Callable[[Mapping[str, Any]], dict[str, str]] = field(default=no_artifacts, compare=False)
    #: whether an entry's model has batch norm, whose training-mode output depends on the rest of its batch: such a
    #: model cannot take its batch in micro-batches (``train.accumulation``), from its own architecture keys
    batch_norm: Callable[[Mapping[str, Any]], bool] = field(default=no_batch_norm, compare=False)


# In the report's order of families: the word models, then the encoders
MODEL_TYPES: dict[str, ModelType] = {
    "knrm": ModelType(parameter_groups=("embeddings", "scoring")),
    "tk": ModelType(parameter_groups=("embeddings", "scoring")),
    "tkl": ModelType(parameter_groups=("embeddings", "scoring")),
    "ndrm": ModelType(
        parameter_groups=("embeddings", "scoring"),
        speed_bench="attention_scaling",  # the Conformer's attention by length, materialised / fused / separable
        artifacts=lambda params: {"impact_index": "fold"},
        batch_norm=ndrm3_batch_norm,
    ),
    "bert_ranker": ModelType(
        parameter_groups=("scoring",),
        speed_bench="mir_speed",  # MaxP entries over MIR's windows are timed beside MIR (bench/mir_speed.py)
        cross_encoder=True,
        on_pretrained_encoder=True,
        document_budget=bert_windows,
    ),
    "mores": ModelType(
        parameter_groups=("scoring",),
        speed_bench="mores_speed",
        cross_encoder=True,  # the interaction blocks are BERT layers in which the query attends to the document
        on_pretrained_encoder=True,
        artifacts=mores_store,
    ),
    "bi_encoder": ModelType(on_pretrained_encoder=True),
    "mir": ModelType(
        parameter_groups=("scoring",),
        reads_graph_set=True,
        speed_bench="mir_speed",
        on_pretrained_encoder=True,
        document_budget=mir_tokens,
        artifacts=lambda params: {"graphs": "collection"},  # every MIR reads its graph set (even ``graphs: []``)
    ),
}


def model_type(name: str) -> ModelType:
    if name not in MODEL_TYPES:
        raise InputError(f"unknown model type {name!r}; expected one of {sorted(MODEL_TYPES)}")
    return MODEL_TYPES[name]


def declared_type(model_cfg: Mapping[str, Any]) -> ModelType:
    """What a configured entry's type declares: its row of ``MODEL_TYPES``, or for an entry that names its own class
    (longrank.config.user_models) what the entry declares: no artifacts, no graph set, no speed bench, its budget in
    WordPiece tokens when it reads them."""
    if is_user(model_cfg):
        return ModelType(on_pretrained_encoder=model_cfg.get("reads") == "wordpieces")
    return model_type(model_cfg["type"])


def architecture_params(model_cfg: Mapping[str, Any]) -> dict[str, Any]:
    # a user entry's class and reads are the workflow's; a paper entry never has them (check_model_keys names them)
    workflow = WORKFLOW_KEYS | USER_KEYS if is_user(model_cfg) else WORKFLOW_KEYS
    return {k: v for k, v in model_cfg.items() if k not in workflow}


def architecture_defaults(name: str) -> dict[str, Any]:
    """The architecture keys model type ``name`` takes, each with the value it falls back to when its config entry
    leaves it out (its constructor's and those of the parts it builds from its config, e.g. TK's embedder)."""
    model_type(name)
    return {k: list(v) if isinstance(v, list) else v for k, v in ARCHITECTURE_DEFAULTS[name].items()}


def entry_defaults(model_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``architecture_defaults`` of a configured entry's type; none for a user class (its signature has them, and the
    workflow's parse does not import it: its entry states what the workflow reads)."""
    return {} if is_user(model_cfg) else architecture_defaults(model_cfg["type"])


@dataclass(frozen=True)
class Capabilities:
    """What the workflow, the config checks, the benches and the report ask of a configured model entry."""

    reads_graph_set: bool
    speed_bench: str | None
    cross_encoder: bool
    parameter_groups: tuple[str, ...]
    document_budget: int | None  # how much of a document the entry reads (words or WordPiece tokens), if it says

    def to_json(self) -> dict[str, Any]:
        """As the config stage writes it into config.json (the report reads it there)."""
        return {**asdict(self), "parameter_groups": list(self.parameter_groups)}


def capabilities(model_cfg: Mapping[str, Any]) -> Capabilities:
    """The capabilities of a configured model entry (its type's declarations, its document budget from its keys)."""
    declared = declared_type(model_cfg)
    return Capabilities(
        reads_graph_set=declared.reads_graph_set,
        speed_bench=declared.speed_bench,
        cross_encoder=declared.cross_encoder,
        parameter_groups=tuple(sorted(declared.parameter_groups)),
        document_budget=declared.document_budget(architecture_params(model_cfg)),
    )


def artifact_scopes(model_cfg: Mapping[str, Any]) -> list[str]:
    """The sorted scopes (``collection``, ``fold``) of the per-document artifacts a configured model entry needs; the
    workflow adds an ``artifacts`` job per scope (and per fold)."""
    declared = artifacts_of(model_cfg)
    bad = {name: scope for name, scope in declared.items() if scope not in ARTIFACT_SCOPES}
    if bad:
        raise InputError(f"{kind_of(model_cfg)}: artifacts {bad} have a scope other than {list(ARTIFACT_SCOPES)}")
    return sorted(set(declared.values()))


def has_batch_norm(model_cfg: Mapping[str, Any]) -> bool:
    """Whether a configured model entry's model has batch norm (``ModelType.batch_norm``)."""
    return declared_type(model_cfg).batch_norm(architecture_params(model_cfg))


def artifacts_of(model_cfg: Mapping[str, Any]) -> dict[str, str]:
    """The artifacts a configured model entry needs, by name -> scope."""
    return declared_type(model_cfg).artifacts(architecture_params(model_cfg))
