"""Ranked lists as every stage handles them (query id -> doc id -> score): the top of a query's list, the
first-stage tail below a reranked head, and the mean of a measure through ir-measures. No model code here,
so that lexical baselines, interpolation and the report use it without importing torch."""

from __future__ import annotations

from longrank.io.trec_files import Run, in_order


def top_candidates(candidates: Run, qid: str, depth: int) -> list[str]:
    """A query's top ``depth`` documents by descending score, ties by document id."""
    return in_order(candidates.get(qid, {}))[:depth]


def with_tail(reranked: Run, first_stage: Run, qids: list[str]) -> Run:
    """Append the candidates below the rerank depth, in first-stage order, below every reranked document."""
    out = {}
    for qid in qids:
        head = dict(reranked.get(qid, {}))
        tail = [d for d in top_candidates(first_stage, qid, len(first_stage.get(qid, {}))) if d not in head]
        floor = min(head.values(), default=0.0)
        for rank, d in enumerate(tail, start=1):
            head[d] = floor - rank
        if head:
            out[qid] = head
    return out


def mean_measure(run: Run, qrels: dict, qids: list[str], measure: str = "nDCG@10") -> float:
    """Mean of ``measure`` over ``qids`` through ir-measures; a query missing from the run counts as 0."""
    import ir_measures

    parsed = ir_measures.parse_measure(measure)
    qset = set(qids)
    values = {
        m.query_id: m.value
        for m in ir_measures.iter_calc(
            [parsed],
            [ir_measures.Qrel(q, d, g) for q in qset for d, g in qrels.get(q, {}).items()],
            [ir_measures.ScoredDoc(q, d, s) for q in qset for d, s in run.get(q, {}).items()],
        )
    }
    return sum(values.get(q, 0.0) for q in qids) / max(1, len(qids))
