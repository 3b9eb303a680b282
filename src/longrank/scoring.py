"""Scoring first-stage candidates with a model: shared by dev evaluation during training and by reranking
(the top of a ranked list and the mean of a measure are :mod:`longrank.runs`'s)."""

from __future__ import annotations

import functools

import torch
from longrank.progress import progress

from longrank.io.trec_files import Run
from longrank.models.base import Ranker
from longrank.precision import autocast
from longrank.runs import top_candidates
from longrank.config.schema import schema_default


@torch.no_grad()
def score_candidates(
    model,
    corpus,
    candidates: Run,
    qids: list[str],
    depth: int,
    batch_size: int = schema_default("rerank.batch_size"),
    desc: str = "scoring",
    details: list | None = None,
    precision: str = schema_default("rerank.precision"),
) -> Run:
    """Model scores of each query's top-``depth`` candidates, the forward under ``precision``'s autocast
    (:mod:`longrank.precision`; scores come back as fp32 floats). If ``details`` is a list and the model can
    explain its scores, one dict per (query, doc) is appended to it."""
    in_precision = functools.partial(autocast, model.device, precision)
    was_training = model.training
    model.eval()
    # Only models that override Ranker.explain have anything to say; do not re-encode batches for the rest.
    explanations = details if type(model).explain is not Ranker.explain else None
    pairs = [(q, d) for q in qids for d in top_candidates(candidates, q, depth)]
    out: Run = {q: {} for q in qids if candidates.get(q)}
    for start in progress(range(0, len(pairs), batch_size), desc=desc, unit="batch", mininterval=5):
        chunk = pairs[start : start + batch_size]
        queries = [corpus.queries[q] for q, _ in chunk]
        doc_ids = [d for _, d in chunk]
        docs = [corpus.docs[d] for d in doc_ids]
        with in_precision():
            scores = model.score_pairs(queries, doc_ids, docs).float().cpu().tolist()
        for (q, d), s in zip(chunk, scores):
            out[q][d] = s
        if explanations is not None:
            with in_precision():
                explained = model.explain_pairs(queries, doc_ids, docs)
            if explained:
                for i, (q, d) in enumerate(chunk):
                    explanations.append(
                        {"query_id": q, "doc_id": d, **{k: v[i].float().cpu().tolist() for k, v in explained.items()}}
                    )
    model.train(was_training)
    return out
