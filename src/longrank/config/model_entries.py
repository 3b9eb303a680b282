"""What a model's config entry says about its run, read the same way by the workflow's parse, the stages and the
report: one rule each, written once. Plain dicts in, no torch: the report imports nothing of ``models/`` or
``train/``, and the floors sit below the report.

:func:`effective_settings` resolves each entry once into what its jobs read (:class:`Effective`): the workflow's
parse passes those values to the stages on their command lines, and stage ``resolved_config`` writes them into
config.json for the report. No stage works them out again."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any
from collections.abc import Mapping

from longrank.config.model_types import capabilities, entry_defaults
from longrank.config.schema import schema_default


def is_enabled(entry: Mapping) -> bool:
    """Whether the entry runs (``enabled``, the schema's default where a hand-written entry leaves it out)."""
    return bool(entry.get("enabled", schema_default("models.*.enabled")))


def interpolates(entry: Mapping) -> bool:
    """Whether the entry's scores are also mixed with its first stage's (``interpolate``, the schema's default)."""
    return bool(entry.get("interpolate", schema_default("models.*.interpolate")))


def is_zero_shot(entry: Mapping | None) -> bool:
    """An untrained model (``train: {steps: 0}``), e.g. the bi-encoder floor every fine-tuned encoder is read against."""
    if not entry:
        return False
    return not entry.get("checkpoint_of") and (entry.get("train") or {}).get("steps", 1) == 0


def rerank_depth(entry: Mapping | None, global_depth: int) -> int:
    """How many first-stage candidates the model scores: its own ``rerank_depth``, else the config's."""
    return int((entry or {}).get("rerank_depth") or global_depth)


def words_read(config: Mapping, model: str) -> int | None:
    """How many words of a document a configured model reads (None: all of them): its document budget with the
    model's defaults filled in, so an entry that leaves ``max_doc_len`` out is read at its model's default; a model
    reading a graph set (MIR) without a budget of its own reads the set's ``max_doc_tokens``."""
    entry = config["models"][model]
    budget = capabilities({**entry_defaults(entry), **entry}).document_budget
    if budget is None and entry.get("graph_set"):
        return (config.get("mir_graphs") or {}).get(entry["graph_set"], {}).get("max_doc_tokens")
    return budget


@dataclass(frozen=True)
class Effective:
    """A model entry's settings as its jobs read them, resolved from the validated config."""

    rerank_depth: int  # first-stage candidates it scores per query (its own, else the config's)
    first_stage: str  # the first stage whose candidates it reranks (its own, else the config's first)
    words_read: int | None  # how much of a document it reads, its defaults filled in (None: all of it)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def effective_settings(config: Mapping) -> dict[str, Effective]:
    """Every model entry of a validated config (its ``first_stage`` filled in), resolved once."""
    return {
        name: Effective(
            rerank_depth=rerank_depth(entry, config["rerank_depth"]),
            first_stage=entry.get("first_stage") or next(iter(config["first_stages"])),
            words_read=words_read(config, name),
        )
        for name, entry in config["models"].items()
    }
