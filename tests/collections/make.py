"""Writes the tiny synthetic collections the tests run the workflow on, one folder each, in the formats a user
brings (README, "Your own collection"). Deterministic: `python tests/collections/make.py` rewrites the same bytes.

- ``graded/``: 120 documents of ~120 words, 24 evaluated queries judged 0-3 (TREC DL's grades: 3 perfectly
  relevant ... 0 not), 40 training queries in their own files (``train_queries.tsv``, ``train_qrels.txt``), and a
  TREC run of a noisy lexical ranker (``run.trec``) to rerank as a ``run_file`` first stage.
- ``short/``: 150 abstracts of ~40 words, 24 queries, binary judgments.
- ``long/``: 40 documents of 3,000-6,000 words, where the matching passage sits anywhere, 16 queries, binary.

Each query asks about a topic (three content words); a document is about one topic, its grade rises with how
much of it is about the query's topic, and every document shares filler words with every other.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

HERE = Path(__file__).parent
TOPICS = [
    "wing lift airfoil",
    "heat transfer boundary",
    "shock wave supersonic",
    "plate buckling stress",
    "flutter vibration panel",
    "jet nozzle flow",
    "laminar turbulent transition",
    "rocket combustion chamber",
    "cone pressure hypersonic",
    "viscous drag body",
    "ablation heat shield",
    "orbit satellite drag",
    "helicopter rotor blade",
    "compressor stall surge",
    "propeller noise thrust",
    "icing droplet impingement",
    "spin recovery tail",
    "landing gear shimmy",
    "fuel injection spray",
    "radar cross section",
    "gust load response",
    "slender body theory",
    "wake vortex decay",
    "cavity resonance acoustic",
    "inlet distortion engine",
    "delta wing vortex",
    "skin friction coefficient",
    "thermal stress cylinder",
    "creep fatigue alloy",
    "panel method potential",
    "boundary layer suction",
    "re entry heating",
    "magnetohydrodynamic channel flow",
    "nose cone bluntness",
    "control surface hinge moment",
    "stagnation point heating",
    "free molecular flow",
    "base pressure drag",
    "hypersonic inlet ramp",
    "aeroelastic divergence speed",
]
FILLER = (
    "the of and a in to is for on with by results method data analysis model experimental theoretical "
    "measured obtained shown present study values range conditions approximate solution effect"
).split()


def words(rnd: random.Random, n: int, topic: list[str], share: float) -> list[str]:
    """``n`` words, ``share`` of them the topic's words, the rest filler."""
    return [rnd.choice(topic) if rnd.random() < share else rnd.choice(FILLER) for _ in range(n)]


def write_tsv(path: Path, rows: dict[str, str]) -> None:
    path.write_text("".join(f"{k}\t{v}\n" for k, v in rows.items()))


def write_qrels(path: Path, qrels: list[tuple[str, str, int]]) -> None:
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels))


def graded(rnd: random.Random) -> None:
    out = HERE / "graded"
    out.mkdir(exist_ok=True)
    docs, topic_of = {}, {}
    for i in range(120):
        t = i % 40
        # how much of the document is about its topic: the grade its topic's queries give it
        share = 0.02 if i % 7 == 0 else (0.08, 0.16, 0.3)[i // 40]
        docs[f"g{i:03d}"] = " ".join(words(rnd, rnd.randint(90, 150), TOPICS[t].split(), share))
        topic_of[f"g{i:03d}"] = (t, share)
    grade = {0.02: 0, 0.08: 1, 0.16: 2, 0.3: 3}
    queries, train_queries, qrels, train_qrels = {}, {}, [], []
    for t in range(40):
        evaluated = t < 24
        qid = f"{'q' if evaluated else 't'}{t}"
        (queries if evaluated else train_queries)[qid] = f"{TOPICS[t]} {rnd.choice(FILLER)}"
        judged = [(qid, d, grade[s]) for d, (dt, s) in topic_of.items() if dt == t]
        judged += [(qid, d, 0) for d in rnd.sample([d for d, (dt, _) in topic_of.items() if dt != t], 3)]
        (qrels if evaluated else train_qrels).extend(judged)
    (out / "docs.jsonl").write_text("".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in docs.items()))
    write_tsv(out / "queries.tsv", queries)
    write_tsv(out / "train_queries.tsv", train_queries)
    write_qrels(out / "qrels.txt", qrels)
    write_qrels(out / "train_qrels.txt", train_qrels)
    # a noisy lexical first stage: topic-word count plus noise, top 30 of every query (training ones included)
    lines = []
    for qid, text in {**queries, **train_queries}.items():
        terms = set(text.split()[:-1])
        scored = sorted(((sum(w in terms for w in docs[d].split()) + rnd.gauss(0, 3), d) for d in docs), reverse=True)[
            :30
        ]
        lines += [f"{qid} Q0 {d} {r} {s:.4f} noisy\n" for r, (s, d) in enumerate(scored, 1)]
    (out / "run.trec").write_text("".join(lines))


def short(rnd: random.Random) -> None:
    out = HERE / "short"
    out.mkdir(exist_ok=True)
    docs, qrels, queries = {}, [], {}
    for i in range(150):
        t = i % 30
        relevant = i // 30 < 2  # two of each topic's five abstracts are about it
        docs[f"s{i:03d}"] = " ".join(words(rnd, rnd.randint(30, 50), TOPICS[t].split(), 0.25 if relevant else 0.04))
        if t < 24:
            qrels.append((f"q{t}", f"s{i:03d}", int(relevant)))
    for t in range(24):
        queries[f"q{t}"] = TOPICS[t]
    (out / "docs.jsonl").write_text("".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in docs.items()))
    write_tsv(out / "queries.tsv", queries)
    write_qrels(out / "qrels.txt", qrels)


def long(rnd: random.Random) -> None:
    out = HERE / "long"
    out.mkdir(exist_ok=True)
    docs, qrels, queries = {}, [], {}
    for i in range(40):
        t = i % 20
        body = words(rnd, rnd.randint(3000, 6000), TOPICS[(t + 7) % 20].split(), 0.01)
        relevant = i < 20 or i % 3 == 0
        if relevant:  # a 300-word passage about the topic, anywhere in the document (beyond the first 2,000 words too)
            at = rnd.randrange(len(body))
            body[at:at] = words(rnd, 300, TOPICS[t].split(), 0.2)
        docs[f"l{i:03d}"] = " ".join(body)
        if t < 16:
            qrels.append((f"q{t}", f"l{i:03d}", int(relevant)))
    for t in range(16):
        queries[f"q{t}"] = TOPICS[t]
    with gzip.GzipFile(out / "docs.jsonl.gz", "wb", mtime=0) as f:
        f.write("".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in docs.items()).encode())
    write_tsv(out / "queries.tsv", queries)
    write_qrels(out / "qrels.txt", qrels)


if __name__ == "__main__":
    for make in (graded, short, long):
        make(random.Random(make.__name__))
