"""Which untrained lexical floors (stage ``sanity``, :mod:`longrank.retrieval.sanity`) a config asks for: the
whole-document count at the global depth, ``query_term_matches``, and per trained model the count over the words it
reads, at its own depth, on the first stage it reranks (:class:`~longrank.retrieval.sanity_floor.Floor`).

The workflow asks this at parse time (workflow/rules/common.smk: ``FLOORS``, ``MODEL_FLOORS``) and hands the report
each model's floor by its run in the manifest (``read_floors``). It reads the models' entries through the model
types' table (:func:`longrank.model_types.capabilities`: their ``document_budget``, defaults filled in), torch-free as
everything the workflow's parse imports.
"""

from __future__ import annotations

from typing import Mapping

from longrank.model_entries import is_zero_shot, rerank_depth
from longrank.model_types import architecture_defaults, capabilities
from longrank.retrieval.sanity_floor import NAME, Floor


def global_floor(config: Mapping) -> Floor:
    """``NAME``: the whole document, the default first stage's top ``rerank_depth``."""
    return Floor(next(iter(config["first_stages"])), int(config["rerank_depth"]), None)


def read_length(config: Mapping, model: str) -> int | None:
    """How many words of a document a configured model reads (None: all of them): its document budget with the
    model's defaults filled in, so an entry that leaves ``max_doc_len`` out is read at its model's default; a model
    reading a graph set (MIR) without a budget of its own reads the set's ``max_doc_tokens``."""
    entry = config["models"][model]
    budget = capabilities({**architecture_defaults(entry["type"]), **entry}).document_budget
    if budget is None and entry.get("graph_set"):
        return (config.get("mir_graphs") or {}).get(entry["graph_set"], {}).get("max_doc_tokens")
    return budget


def model_floors(config: Mapping) -> dict[str, str]:
    """Each enabled trained model -> the system name of its floor: its first stage, its rerank depth, the words it
    reads (``NAME`` where that is the global floor: a model reading whole documents of the default first stage at
    the global depth). Zero-shot models are left out, as in the report's sanity table."""
    reference, out = global_floor(config), {}
    for model, entry in config["models"].items():
        if entry.get("enabled", True) and not is_zero_shot(entry):
            floor = Floor(
                entry.get("first_stage") or reference.first_stage,
                rerank_depth(entry, config["rerank_depth"]),
                read_length(config, model),
            )
            out[model] = NAME if floor == reference else floor.name
    return out


def floor_systems(config: Mapping) -> dict[str, Floor]:
    """Every floor run to make, by system name: ``NAME`` first, then the models' own, each once (two models that
    read the same words of the same candidates at the same depth share one)."""
    systems = {NAME: global_floor(config)}
    for name in model_floors(config).values():
        systems.setdefault(name, Floor.parse(name))
    return systems
