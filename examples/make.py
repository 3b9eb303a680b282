"""Writes the example collection ``examples/mine/`` (README, "Your own collection"): 50 documents, 10 queries,
judgments graded 0-2, in the formats a user brings (``docs.jsonl`` with ``doc_id`` and ``text``, ``queries.tsv``
as ``id<TAB>text``, TREC qrels). Deterministic: ``python examples/make.py`` rewrites the same bytes.

Ten topics, five documents each: two mostly about their topic (grade 2), two that mention it (grade 1) and one
that barely does (grade 0); every document also mentions another topic. Each query also judges two documents of other topics 0.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).parent / "mine"
TOPICS = [
    "bread dough yeast oven",
    "river flood bank rainfall",
    "chess opening bishop knight",
    "violin string bow tuning",
    "glacier ice melt climate",
    "bicycle chain gear brake",
    "volcano lava eruption magma",
    "coffee bean roast grinder",
    "honey bee hive pollen",
    "telescope lens star orbit",
]
FILLER = (
    "the of and a in to is for on with by from this that it was were are as at its which one can more "
    "often some most new first also time people place used early later small large part many"
).split()
SHARE = (0.35, 0.35, 0.12, 0.12, 0.02)  # how much of each of a topic's five documents is about it
GRADE = {0.35: 2, 0.12: 1, 0.02: 0}


def text(rnd: random.Random, topic: list[str], share: float, other: list[str]) -> str:
    """60-120 words: ``share`` of them the topic's, a tenth another topic's (so a query's words also occur in
    documents not about it), the rest filler."""
    words = []
    for _ in range(rnd.randint(60, 120)):
        draw = rnd.random()
        words.append(
            rnd.choice(topic) if draw < share else rnd.choice(other) if draw < share + 0.1 else rnd.choice(FILLER)
        )
    return " ".join(words)


def main() -> None:
    rnd = random.Random("mine")
    OUT.mkdir(exist_ok=True)
    docs, topic_of = {}, {}
    for t, topic in enumerate(TOPICS):
        for k, share in enumerate(SHARE):
            doc_id = f"d{t * 5 + k:02d}"
            other = rnd.choice([o for o in TOPICS if o != topic])
            docs[doc_id] = text(rnd, topic.split(), share, other.split())
            topic_of[doc_id] = (t, share)
    queries, qrels = {}, []
    for t, topic in enumerate(TOPICS):
        qid = f"q{t}"
        queries[qid] = " ".join(topic.split()[:3])
        qrels += [(qid, d, GRADE[s]) for d, (dt, s) in topic_of.items() if dt == t]
        qrels += [(qid, d, 0) for d in rnd.sample([d for d, (dt, _) in topic_of.items() if dt != t], 2)]
    (OUT / "docs.jsonl").write_text("".join(json.dumps({"doc_id": d, "text": x}) + "\n" for d, x in docs.items()))
    (OUT / "queries.tsv").write_text("".join(f"{q}\t{x}\n" for q, x in queries.items()))
    (OUT / "qrels.txt").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels))


if __name__ == "__main__":
    main()
