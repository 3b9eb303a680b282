"""Which untrained lexical floors (stage ``sanity``, :mod:`longrank.retrieval.sanity`) a config asks for: the
whole-document count at the global depth, ``query_term_matches``, and per trained model the count over the words it
reads, at its own depth, on the first stage it reranks (:class:`~longrank.retrieval.sanity_floor.Floor`).

The workflow asks this at parse time (workflow/rules/common.smk: ``FLOORS``, ``MODEL_FLOORS``) and hands the report
each model's floor by its run in the manifest (``read_floors``). Each model's floor reads what the model reads: its
effective settings (:func:`longrank.config.model_entries.effective_settings`), torch-free as everything the parse imports.
"""

from __future__ import annotations

from collections.abc import Mapping

from longrank.config.model_entries import effective_settings, is_enabled, is_zero_shot
from longrank.retrieval.sanity_floor import NAME, Floor


def global_floor(config: Mapping) -> Floor:
    """``NAME``: the whole document, the default first stage's top ``rerank_depth``."""
    return Floor(next(iter(config["first_stages"])), int(config["rerank_depth"]), None)


def model_floors(config: Mapping) -> dict[str, str]:
    """Each enabled trained model -> the system name of its floor: its first stage, its rerank depth, the words it
    reads (``NAME`` where that is the global floor: a model reading whole documents of the default first stage at
    the global depth). Zero-shot models are left out, as in the report's sanity table."""
    reference = global_floor(config)
    return {model: NAME if floor == reference else floor.name for model, floor in _model_floors(config).items()}


def _model_floors(config: Mapping) -> dict[str, Floor]:
    """Each enabled trained model -> the floor over the words it reads (the global floor included, unnamed)."""
    out = {}
    for model, effective in effective_settings(config).items():
        entry = config["models"][model]
        if is_enabled(entry) and not is_zero_shot(entry):
            out[model] = Floor(effective.first_stage, effective.rerank_depth, effective.words_read)
    return out


def floor_systems(config: Mapping) -> dict[str, Floor]:
    """Every floor run to make, by system name: ``NAME`` first, then the models' own, each once (two models that
    read the same words of the same candidates at the same depth share one)."""
    reference = global_floor(config)
    systems = {NAME: reference}
    for floor in _model_floors(config).values():
        if floor != reference:
            systems.setdefault(floor.name, floor)
    return systems
