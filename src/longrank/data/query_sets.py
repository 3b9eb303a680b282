"""Query sets over the collection's documents that are never evaluated: queries that only train (``train_id`` /
``train_queries`` + ``train_qrels``) and queries that only choose the early-stopping point and the interpolation
weight (``dev_id`` / ``dev_queries`` + ``dev_qrels``, a seeded sample of ``dev_sample``). TREC DL trains on MS
MARCO's training queries, selects on a sample of MS MARCO's dev queries (as the Conformer-Kernel's official code
samples 100) and tests on every judged TREC DL query, rather than selecting on a third of 43 test queries."""

from __future__ import annotations

import logging

import numpy as np
from longrank.progress import progress

from longrank.data.collections import ir_datasets_downloads, local_file, max_file_bytes, read_local_queries
from longrank.errors import InputError
from longrank.io.trec_files import read_qrels

log = logging.getLogger(__name__)

ROLES = ("train", "dev")


def given(dataset: dict, role: str) -> bool:
    return bool(dataset.get(f"{role}_id") or dataset.get(f"{role}_queries"))


def source_of(dataset: dict, role: str) -> str:
    """Where a role's queries come from, in words (stats.json and the report's provenance)."""
    if dataset.get(f"{role}_id"):
        source = f"ir_datasets {dataset[f'{role}_id']}"
    else:
        source = f"{dataset[f'{role}_queries']} judged by {dataset[f'{role}_qrels']}"
    sample = dataset.get(f"{role}_sample")
    return source + (f", a sample of {sample} (seed {dataset.get(f'{role}_seed', 0)})" if sample else "")


def missing_documents(key: str, missing: dict[str, dict[str, int]], kept: dict[str, dict[str, int]]) -> dict:
    """What judgments of documents the collection lacks cost a query set (``missing``: query -> document -> gain;
    ``kept``: the judgments in the collection), logged as a warning and recorded in stats.json: the judgments, the
    relevant ones, and the queries left with no relevant document in the collection (not used)."""
    judgments = sum(len(d) for d in missing.values())
    relevant = sum(g > 0 for d in missing.values() for g in d.values())
    documents = len({doc for d in missing.values() for doc in d})
    without_relevant = sorted(
        q
        for q, d in missing.items()
        if any(g > 0 for g in d.values()) and not any(g > 0 for g in kept.get(q, {}).values())
    )
    examples = sorted(f"{q}:{doc}" for q, d in missing.items() for doc in d)[:5]
    if judgments:
        log.warning(
            "%s: %d judgments (%d relevant) name %d documents not in the collection, dropped (e.g. %s); %d queries "
            "are left with no relevant document in the collection and are not used (%s)",
            key,
            judgments,
            relevant,
            documents,
            ", ".join(examples[:3]),
            len(without_relevant),
            ", ".join(without_relevant[:3]) or "none",
        )
    return {
        "judgments": judgments,
        "relevant": relevant,
        "documents": documents,
        "queries_without_relevant": without_relevant,
        "examples": examples,
    }


def held_out(dataset: dict, role: str) -> bool:
    """Whether the ``role`` queries are the collection's own (``dev_id`` equal to ``id``: MS MARCO Dev tested on all
    but the 100 that choose): its sample is then held out of the test queries, not added beside them."""
    return bool(dataset.get(f"{role}_id")) and dataset.get(f"{role}_id") == dataset.get("id")


def add_query_set(dataset: dict, role: str, queries: dict, qrels: dict, docs, gain_of) -> tuple[set[str], dict]:
    """Add the ``role`` queries (with a judged relevant document in the collection) and their judgments, mapped by
    ``gain_of``; return their ids and what judgments of documents the collection lacks cost (``missing_documents``).
    Their ids must differ from every query already there, unless the set is the collection's own (``held_out``: the
    caller then takes them out of the test queries)."""
    if not given(dataset, role):
        return set(), missing_documents("", {}, {})
    texts, judged = _load(dataset, role)
    relevant, missing, kept = {}, {}, {}
    for qid, text in texts:
        judgments = {d: gain_of(g) for d, g in judged.get(qid, {}).items() if d in docs}
        absent = {d: gain_of(g) for d, g in judged.get(qid, {}).items() if d not in docs}
        if absent:
            missing[qid], kept[qid] = absent, judgments
        if any(g > 0 for g in judgments.values()):
            relevant[qid] = (text, judgments)
    chosen = sorted(relevant)
    if dataset.get(f"{role}_sample"):
        order = np.random.default_rng(dataset.get(f"{role}_seed", 0)).permutation(len(chosen))
        chosen = sorted(chosen[i] for i in order[: dataset[f"{role}_sample"]])
    key = f"dataset.{role}_id" if dataset.get(f"{role}_id") else f"dataset.{role}_queries"
    if not chosen:
        raise InputError(f"{key}: none of its queries has a relevant judged document in the collection")
    own = held_out(dataset, role)
    for qid in chosen:
        if qid in queries and not own:
            raise InputError(
                f"{key}: query id {qid!r} is also a query of the collection or of another set; ids must be distinct"
            )
        queries[qid], qrels[qid] = relevant[qid]
    return set(chosen), missing_documents(key, missing, kept)


def _load(dataset: dict, role: str):
    if dataset.get(f"{role}_id"):
        return _ir_datasets_queries(dataset[f"{role}_id"], dataset.get("query_field"), role)
    path = dataset.get(f"{role}_qrels")
    if not path:
        raise InputError(
            f"dataset.{role}_qrels: the queries of dataset.{role}_queries need their judgments in a qrels file"
        )
    limit = max_file_bytes(dataset)
    queries = read_local_queries(local_file(dataset, f"{role}_queries"), None, dataset.get("query_fields"), limit)
    return list(queries), read_qrels(local_file(dataset, f"{role}_qrels"), limit)


def _ir_datasets_queries(dataset_id: str, query_field: str | None, role: str):
    import ir_datasets

    try:
        ds = ir_datasets.load(dataset_id)
    except KeyError:
        raise InputError(f"dataset.{role}_id: {dataset_id!r} is not an ir_datasets id") from None
    field = query_field or ("text" if "text" in ds.queries_cls()._fields else "title")
    with ir_datasets_downloads(dataset_id):
        queries = [
            (q.query_id, getattr(q, field))
            for q in progress(ds.queries_iter(), desc=f"reading {role} queries", unit="query", mininterval=5)
        ]
        qrels: dict[str, dict[str, int]] = {}
        for qr in ds.qrels_iter():
            qrels.setdefault(qr.query_id, {})[qr.doc_id] = qr.relevance
    return queries, qrels


def folds_with(folds: list[dict], train_only: set[str], dev_only: set[str], evaluable: list[str]) -> list[dict]:
    """The splits with the given sets: training queries train every fold; with a dev set of its own, every evaluated
    query is a test query (one fold: the configured ``splits`` do not apply)."""
    if dev_only:
        return [{"train": sorted(train_only), "dev": sorted(dev_only), "test": sorted(evaluable)}]
    return [{**fold, "train": sorted(fold["train"] + list(train_only))} for fold in folds]
