"""What a model entry of the config reads, answered from the entry alone (no model code): the workflow, the config
checks, the benches and the report ask it, and the report must not import models/ or train/."""

from __future__ import annotations

# BertRanker's default number of MaxP windows (models/bert_ranker.py), for an entry that leaves max_passages out
DEFAULT_MAX_PASSAGES = 16


def document_budget(entry: dict) -> int | None:
    """How much of a document a model entry reads: ``max_doc_len`` (words or WordPiece tokens), or for the
    BERT ranker its passages (FirstP: ``passage_len``; MaxP: ``max_passages`` windows every ``passage_stride``,
    as :class:`longrank.models.bert_ranker.BertRanker` cuts them)."""
    if entry.get("type") == "mir":
        return entry.get("max_doc_tokens")
    if entry.get("type") == "bert_ranker" and entry.get("passage_len"):
        if entry.get("mode") == "maxp":
            return (entry.get("passage_stride") or entry["passage_len"]) * (
                (entry.get("max_passages") or DEFAULT_MAX_PASSAGES) - 1
            ) + entry["passage_len"]
        return entry["passage_len"]
    return entry.get("max_doc_len")
