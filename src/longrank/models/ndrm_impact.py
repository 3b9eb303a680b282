"""NDRM's impact index (:mod:`longrank.models.ndrm`), written from a trained model and read back for reranking
when it is unpruned; :mod:`longrank.retrieval.impact` ranks a whole collection with it.

Impact index (the ``impact_index`` artifact, scope ``fold``): s_{t,d} of the fold's trained model for every
term of every query in the collection (no labels) against **every document of the collection**. Latent
scores can be negative, and an inverted index treats a missing entry as 0; so each term's row stores
s_{t,d} − floor_t, floor_t = min over the collection's documents, which is ≥ 0 and 0 for the term's worst
document: a query's sum of rows is its model score minus Σ floor_t, a constant per query (same ranking),
and a document a pruned row left out counts as the term's worst. ``impact.json``'s ``term_floors`` gives the
floors back: Σ_t (row_t[d] + floor_t) is the model's score exactly (unpruned). ``impact_depth`` keeps each
term's top documents only (null: all). When an unpruned index is attached (reranking), ``score_pairs``
reads scores from it instead of re-encoding documents: the same numbers, without the Conformer.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from longrank.errors import InputError
from longrank.progress import progress
from longrank.io.json_yaml import write_json

IMPACT_FORMAT = "longrank-impact/1"


def query_term_table(model, corpus) -> tuple[dict[str, list[str]], list[str]]:
    """Every query's processed terms (``impact.json``'s ``query_terms``) and the index's rows: their sorted union."""
    per_query = {qid: model.query_terms(text) for qid, text in sorted(corpus.queries.items())}
    return per_query, sorted({t for ts in per_query.values() for t in ts})


def write_impact_index(model, corpus, out_dir, batch_size: int) -> None:
    """``impact.npz`` and ``impact.json`` of ``model`` over every document and query term of ``corpus`` (see
    ``NDRM.build_artifacts``)."""
    started = time.perf_counter()
    all_docs = sorted(corpus.docs)
    per_query, terms = query_term_table(model, corpus)
    values, columns, floors = impact_rows(model, terms, [corpus.docs[d] for d in all_docs], batch_size, all_docs)
    rows = (values, columns, floors)
    save_impact_index(out_dir, terms, all_docs, rows, model.impact_depth, per_query, time.perf_counter() - started)


def save_impact_index(
    out_dir, terms: list[str], all_docs: list[str], rows, impact_depth, per_query: dict, build_seconds: float
) -> None:
    """The index of ``impact_rows``' (values, columns, floors) over ``all_docs``: one job's, or the shards' merge
    (ndrm_impact_shards.py), which writes the same bytes."""
    from scipy import sparse

    values, columns, floors = rows
    shifted = (values.astype(np.float64) - floors[:, None]).astype(np.float32)
    keep = shifted > 0  # an entry at its term's floor is what a missing entry means
    row_ids = np.broadcast_to(np.arange(len(terms))[:, None], shifted.shape)
    matrix = sparse.csr_matrix(
        (shifted[keep], (row_ids[keep], columns[keep])), shape=(len(terms), len(all_docs)), dtype=np.float32
    )
    sparse.save_npz(Path(out_dir) / "impact.npz", matrix)
    write_json(
        Path(out_dir) / "impact.json",
        {
            "format": IMPACT_FORMAT,
            "terms": terms,
            "doc_ids": all_docs,
            "impact_depth": impact_depth,
            "term_floors": [float(f) for f in floors],
            "build_seconds": build_seconds,
            "query_terms": per_query,
        },
    )


def impact_rows(
    model, terms: list[str], docs: list[str], batch_size: int, doc_ids: list[str] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stream the collection in batches: each term's kept scores [T, k] with their document columns, and
    each term's minimum over all documents [T] (float64). ``doc_ids`` name ``docs`` (a model's ``doc_fields``)."""
    n_terms = len(terms)
    floors = np.full(n_terms, np.inf)
    values = [np.zeros((n_terms, 0), dtype=np.float32)]
    columns = [np.zeros((n_terms, 0), dtype=np.int64)]
    for start in progress(
        range(0, len(docs), batch_size), desc=f"impact index ({n_terms} terms)", unit="batch", mininterval=5
    ):
        ids = doc_ids[start : start + batch_size] if doc_ids is not None else []
        scores = model.term_scores(terms, ids, docs[start : start + batch_size], batch_size).numpy()  # [T, D]
        floors = np.minimum(floors, scores.min(axis=1, initial=np.inf))
        values.append(scores)
        columns.append(np.broadcast_to(np.arange(start, start + scores.shape[1]), scores.shape))
        if model.impact_depth is not None:  # keep at most depth + one batch per term in memory
            kept, where = np.concatenate(values, axis=1), np.concatenate(columns, axis=1)
            # highest first, earlier documents first among ties (a stable sort): the same for any batch size
            order = np.argsort(-kept, axis=1, kind="stable")[:, : model.impact_depth]
            values, columns = [np.take_along_axis(kept, order, axis=1)], [np.take_along_axis(where, order, axis=1)]
    return (
        np.concatenate(values, axis=1),
        np.concatenate(columns, axis=1),
        np.where(np.isfinite(floors), floors, 0.0),
    )


def read_exact_index(directory) -> dict | None:
    """The index in ``directory`` as term and document numbers, floors and the CSR matrix; None for a pruned
    index, which cannot give exact scores."""
    directory = Path(directory)
    try:
        meta = json.loads((directory / "impact.json").read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(
            f"{directory} holds no readable NDRM impact index (impact.json: {err}); rebuild the artifacts"
        ) from None
    if meta.get("format") != IMPACT_FORMAT:
        raise InputError(f"{directory / 'impact.json'}: format {meta.get('format')!r}, expected {IMPACT_FORMAT!r}")
    if meta["impact_depth"] is not None:
        return None
    from scipy import sparse

    return {
        "terms": {t: i for i, t in enumerate(meta["terms"])},
        "docs": {d: j for j, d in enumerate(meta["doc_ids"])},
        "floors": np.asarray(meta["term_floors"], dtype=np.float64),
        "matrix": sparse.load_npz(directory / "impact.npz").tocsr(),
    }


def impact_scores(index: dict, query_terms, queries: list[str], doc_ids: list[str]) -> torch.Tensor | None:
    """Σ over the query's terms (``query_terms(query)``) of (stored entry + floor) per pair, or None if a term or
    document is not in ``index`` (``read_exact_index``'s)."""
    rows, columns, pairs = [], [], []
    for i, (query, doc_id) in enumerate(zip(queries, doc_ids)):
        column = index["docs"].get(doc_id)
        term_rows = [index["terms"].get(t) for t in query_terms(query)]
        if column is None or None in term_rows:
            return None
        rows += term_rows
        columns += [column] * len(term_rows)
        pairs += [i] * len(term_rows)
    values = (
        np.asarray(index["matrix"][rows, columns], dtype=np.float64).ravel() + index["floors"][rows]
        if rows
        else np.zeros(0)
    )
    return torch.from_numpy(
        np.bincount(np.asarray(pairs, dtype=np.int64), weights=values, minlength=len(queries)).astype(np.float32)
    )
