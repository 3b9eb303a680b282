"""A graph set's settings (``mir_graphs.<set>``) with their defaults, checked. Light on purpose (no spaCy,
scikit-learn or torch): the workflow reads them when it parses the config (which entries the MIR bench times beside
MIR), the graphs stage and the MIR bench when they run."""

from __future__ import annotations

from longrank.io import InputError
from longrank.schema import schema_defaults

NUMERIC_LABELS = ("DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL")
# en_core_web_sm's NER labels (OntoNotes 5) without the numeric ones
ENTITY_LABELS = ["PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE"]
# The schema's defaults (mir_graphs.<set>), and the entity labels, which it leaves to the code; not prf_queries, which
# the workflow passes to the stage as an input directory, not a setting
DEFAULTS = {k: v for k, v in schema_defaults("mir_graphs.*").items() if k != "prf_queries"} | {
    "entity_labels": ENTITY_LABELS
}
POSITIVE = ("window", "max_doc_tokens", "prf_depth")
NON_NEGATIVE = ("max_sentence_nodes", "max_token_nodes", "prf_terms", "p2p_top_k")


def graph_settings(cfg: dict) -> dict:
    """The graph set's configuration with defaults, checked: errors name ``mir_graphs.<key>``."""
    unknown = set(cfg) - set(DEFAULTS)
    if unknown:
        raise InputError(f"mir_graphs: unknown keys {sorted(unknown)}; expected some of {sorted(DEFAULTS)}")
    s = {**DEFAULTS, **cfg}
    if not isinstance(s["encoder"], str):
        raise InputError(f"mir_graphs.encoder: {s['encoder']!r} is not an encoder name")
    for key in POSITIVE + NON_NEGATIVE:
        least = 1 if key in POSITIVE else 0
        if not isinstance(s[key], int) or isinstance(s[key], bool) or s[key] < least:
            raise InputError(
                f"mir_graphs.{key}: {s[key]!r} is not a{' positive' if least else ' non-negative'} integer"
            )
    if not isinstance(s["overlap"], (int, float)) or isinstance(s["overlap"], bool) or not 0 <= s["overlap"] < 1:
        raise InputError(f"mir_graphs.overlap: {s['overlap']!r} is not a fraction in [0, 1)")
    if stride(s) < 1:
        raise InputError(
            f"mir_graphs.overlap: {s['overlap']!r} leaves a stride of 0 tokens for a window of {s['window']}"
        )
    labels = s["entity_labels"]
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise InputError(f"mir_graphs.entity_labels: {labels!r} is not a list of spaCy NER labels")
    return s


def stride(settings: dict) -> int:
    """k = round(w·(1-α)) tokens between passage starts."""
    return round(settings["window"] * (1 - settings["overlap"]))
