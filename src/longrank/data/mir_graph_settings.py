"""A graph set's settings (``mir_graphs.<set>``) with their defaults, checked, as the graphs stage builds the set and
its settings.json (``data.records.GraphStore``) hands them to MIR. Light on purpose (no spaCy,
scikit-learn or torch): the workflow reads them when it parses the config (which entries the MIR bench times beside
MIR), the graphs stage and the MIR bench when they run. In data/, not in ``mir_graphs/``: the graphs stage there
loads the encoder's tokenizer from ``models/``, and MIR reads these settings, so they sit below both packages."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from longrank.errors import InputError
from longrank.config.schema import schema_default

NUMERIC_LABELS = ("DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL")
# en_core_web_sm's NER labels (OntoNotes 5) without the numeric ones
ENTITY_LABELS = ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE")
POSITIVE = ("window", "max_doc_tokens", "prf_depth")
NON_NEGATIVE = ("max_sentence_nodes", "max_token_nodes", "prf_terms", "p2p_top_k")


@dataclass(frozen=True)
class GraphSetSettings:
    """A graph set: its defaults the schema's (the one home of them), and the entity labels, which the schema leaves to
    the code. Not ``prf_queries``: the workflow passes that set to the stage as an input directory, not a setting."""

    encoder: str = schema_default("mir_graphs.*.encoder")  # whose WordPiece tokenizer cuts the documents
    window: int = schema_default("mir_graphs.*.window")  # passage length in tokens, w
    overlap: float = schema_default("mir_graphs.*.overlap")  # alpha: a passage starts every round(w(1-alpha)) tokens
    max_doc_tokens: int = schema_default("mir_graphs.*.max_doc_tokens")
    max_sentence_nodes: int = schema_default("mir_graphs.*.max_sentence_nodes")
    max_token_nodes: int = schema_default("mir_graphs.*.max_token_nodes")
    entity_labels: tuple[str, ...] = ENTITY_LABELS
    prf_depth: int = schema_default("mir_graphs.*.prf_depth")
    prf_terms: int = schema_default("mir_graphs.*.prf_terms")
    p2p_top_k: int = schema_default("mir_graphs.*.p2p_top_k")

    @property
    def stride(self) -> int:
        """k = round(w·(1-α)) tokens between passage starts."""
        return round(self.window * (1 - self.overlap))

    @classmethod
    def from_json(cls, stored: dict) -> GraphSetSettings:
        """The settings a graph set's settings.json holds (beside its tokenizer's ids)."""
        own = {f.name: stored[f.name] for f in fields(cls) if f.name in stored}
        return cls(**{**own, "entity_labels": tuple(own.get("entity_labels", ENTITY_LABELS))})

    def to_json(self) -> dict:
        """As the set's settings.json holds them (the model reads them there)."""
        return {**asdict(self), "entity_labels": list(self.entity_labels)}


KEYS = tuple(f.name for f in fields(GraphSetSettings))


def graph_settings(cfg: dict) -> GraphSetSettings:
    """The graph set's configuration with defaults, checked: errors name ``mir_graphs.<key>``."""
    unknown = set(cfg) - set(KEYS)
    if unknown:
        raise InputError(f"mir_graphs: unknown keys {sorted(unknown)}; expected some of {sorted(KEYS)}")
    labels = cfg.get("entity_labels", list(ENTITY_LABELS))
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise InputError(f"mir_graphs.entity_labels: {labels!r} is not a list of spaCy NER labels")
    s = GraphSetSettings(**{**cfg, "entity_labels": tuple(labels)})
    if not isinstance(s.encoder, str):
        raise InputError(f"mir_graphs.encoder: {s.encoder!r} is not an encoder name")
    for key in POSITIVE + NON_NEGATIVE:
        least, value = (1 if key in POSITIVE else 0), getattr(s, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise InputError(f"mir_graphs.{key}: {value!r} is not a{' positive' if least else ' non-negative'} integer")
    if not isinstance(s.overlap, (int, float)) or isinstance(s.overlap, bool) or not 0 <= s.overlap < 1:
        raise InputError(f"mir_graphs.overlap: {s.overlap!r} is not a fraction in [0, 1)")
    if s.stride < 1:
        raise InputError(f"mir_graphs.overlap: {s.overlap!r} leaves a stride of 0 tokens for a window of {s.window}")
    return s
