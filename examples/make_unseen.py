"""Writes ``examples/unseen/``: a collection the five-minute example's models never saw (README, "Using a trained
model elsewhere"): 8 documents and 4 queries about whales, pianos and harvests, words none of which is among the 81
of ``examples/mine/`` (every content word is in GloVe 6B), one query of made-up words no vocabulary has, and
a first stage to rerank (``bm25.trec``: every document for every query, LongRank's BM25 matches first and the
rest below them in reverse doc-id order; u4 matches none). Deterministic: ``python examples/make_unseen.py``
rewrites the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).parent / "unseen"
DOCS = {
    "w1": "the humpback whale sings a long song that carries across the ocean for miles",
    "w2": "a pod of dolphins followed the whale along the coast of the ocean",
    "w3": "whale watching boats leave the harbour at dawn in summer",
    "p1": "she played the melody on the piano with a soft chord under every note",
    "p2": "a piano needs tuning when a chord sounds sour and the melody drifts",
    "h1": "the farmer brought the wheat harvest in before the autumn rain",
    "h2": "a tractor pulls the plough while the farmer plans the next harvest",
    "h3": "wheat prices fell after a record harvest across the plains",
}
QUERIES = {
    "u1": "whale song ocean",
    "u2": "piano chord melody",
    "u3": "wheat harvest farmer",
    "u4": "snorkelwump blorptastic",  # made up: no vocabulary knows a word of it (the warning's case)
}


def main() -> None:
    from longrank.io.trec_files import write_run
    from longrank.retrieval.bm25 import bm25_run

    OUT.mkdir(exist_ok=True)
    (OUT / "docs.jsonl").write_text("".join(json.dumps({"doc_id": d, "text": x}) + "\n" for d, x in DOCS.items()))
    (OUT / "queries.tsv").write_text("".join(f"{q}\t{x}\n" for q, x in QUERIES.items()))
    matched = bm25_run(DOCS, QUERIES, top_k=len(DOCS))
    # every document is a candidate of every query: BM25's matches first, then the rest in reverse doc-id order below
    # them (u4 matches nothing: all of it). A reranker that cannot tell documents apart must keep this order.
    run = {}
    for qid in QUERIES:
        head = matched.get(qid, {})
        rest = [d for d in sorted(DOCS, reverse=True) if d not in head]
        run[qid] = {**head, **{d: -1.0 - i for i, d in enumerate(rest)}}
    write_run(OUT / "bm25.trec", run, "bm25")


if __name__ == "__main__":
    main()
