"""Questions about configured model entries that the workflow's targets and inputs ask: whose weights an entry
uses, what it pre-trains on, which paper-figure bench times it, which entries read a MIR graph set."""

from __future__ import annotations

from collections.abc import Mapping

from longrank.errors import InputError
from longrank.config.model_types import DEFAULT_ENCODER, capabilities


def weights_of(config: Mapping, model: str) -> str:
    """The model whose trained checkpoints ``model`` uses (``checkpoint_of``: Reuse variants share MORES's weights)."""
    return config["models"][model].get("checkpoint_of") or model


def pseudo_queries_of(config: Mapping, model: str) -> str | None:
    """The pseudo-query set a model pre-trains on (train.pretrain.queries), or None."""
    return (config["models"][model].get("train", {}).get("pretrain") or {}).get("queries")


def check_checkpoint_sources(config: Mapping, models: list[str]) -> None:
    """Each ``checkpoint_of`` names a configured model that trains its own weights: a chain of them has no weights."""
    for name in models:
        source = config["models"][name].get("checkpoint_of")
        if source is not None and (source not in config["models"] or config["models"][source].get("checkpoint_of")):
            raise InputError(
                f"config key models.{name}.checkpoint_of: {source!r} must name a model that trains its own weights"
            )


def graph_set_readers(config: Mapping, models: list[str]) -> list[str]:
    """The MIR models: those reading a graph set (longrank.config.model_types: the workflow asks the capability, never the
    model's type name)."""
    return [m for m in models if capabilities(config["models"][m]).reads_graph_set]


def speed_benched(config: Mapping, models: list[str], bench: str) -> list[str]:
    """The configured models the paper-figure bench ``bench`` times (longrank.config.model_types: speed_bench)."""
    return [m for m in models if capabilities(config["models"][m]).speed_bench == bench]


def mores_speed_encoder(config: Mapping, models: list[str]) -> str:
    """The encoder mores_speed times: the first configured MORES entry's."""
    benched = speed_benched(config, models, "mores_speed")
    return next((config["models"][m].get("encoder", DEFAULT_ENCODER) for m in benched), DEFAULT_ENCODER)


def mir_reference(config: Mapping, models: list[str]) -> str | None:
    """The MIR entry MIR's Fig. 5 bench times beside BERT-MaxP over the same windows: the one named mir, else the
    first. MIR models read documents by id from their graph set, so the generic bench, which cuts synthetic
    documents, does not time them."""
    timed = graph_set_readers(config, speed_benched(config, models, "mir_speed"))
    return "mir" if "mir" in timed else next(iter(timed), None)
