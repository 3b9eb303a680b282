"""MIR's chain: every job a MIR model's rerank waits for, by the wildcards of the jobs that make it. MIR's chain is
the longest of the default run, and a rule's priority does not pass to the jobs it waits for, so each job of the
chain carries the chain's priority itself (longrank.plan.priorities)."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable, Mapping

from longrank.plan.models import graph_set_readers, pseudo_queries_of, weights_of


@dataclass(frozen=True)
class MirChain:
    """The chain's jobs by wildcard value: the models trained (MIR's, the weights they share, a first stage's
    model), the first stages whose candidates are read, the first stages whose index is read (``indexes``: those
    and the ones a pseudo-query set's BM25 reads alone) and the pseudo-query sets (graph sets' PRF queries,
    pre-training queries, HDCT's targets)."""

    models: frozenset[str]
    stages: frozenset[str]
    indexes: frozenset[str]
    pseudo_sets: frozenset[str]


def _stage_reads(config: Mapping, stage: str) -> tuple[set[str], set[str]]:
    """The models and pseudo-query sets a first stage's candidates read."""
    spec = config["first_stages"][stage]
    models = {spec["model"]} if spec["method"] == "model" else set()
    # titles are the collection's own, no pseudo-query set (as hdct_pseudo_queries)
    targets = spec.get("targets", "titles") if spec["method"] == "hdct" else "titles"
    return models, (set() if targets == "titles" else {targets})


def _named(name: str | None) -> set[str]:
    """The one name, or none where the setting is unset."""
    return set() if name is None else {name}


def mir_chain(config: Mapping, models: list[str], first_stage_of: Callable[[str], str]) -> MirChain:
    """A walk from the MIR models over what each job reads, until nothing is added (each pass only adds configured
    names, so it ends)."""
    chain_models = set(graph_set_readers(config, models))
    stages: set[str] = set()
    index_only: set[str] = set()
    sets: set[str] = set()
    while True:
        size = (len(chain_models), len(stages), len(index_only), len(sets))
        for m in list(chain_models):
            entry = config["models"][m]
            chain_models.add(weights_of(config, m))
            stages.add(first_stage_of(m))
            sets |= _named(pseudo_queries_of(config, m))
            if entry.get("graph_set") in config["mir_graphs"]:
                sets |= _named(config["mir_graphs"][entry["graph_set"]].get("prf_queries"))
        for stage in stages:
            stage_models, stage_sets = _stage_reads(config, stage)
            chain_models |= stage_models
            sets |= stage_sets
        read_alone = (config["pseudo_queries"][p].get("first_stage") for p in sets if p in config["pseudo_queries"])
        index_only |= {first for first in read_alone if first is not None}
        if size == (len(chain_models), len(stages), len(index_only), len(sets)):
            return MirChain(frozenset(chain_models), frozenset(stages), frozenset(stages | index_only), frozenset(sets))
