"""A synthetic MS MARCO documents collection in ir_datasets' own cache layout, so that the real
``ir_datasets.load("msmarco-document/...")`` code reads it offline, as it would read the files it downloads
(ir_datasets 0.6.3: ``ir_datasets/datasets/msmarco_document.py``, cache paths from ``etc/downloads.json``):

    msmarco-document/collection.tsv.gz          TREC-format documents: <DOC><DOCNO>D..</DOCNO><TEXT>url\\ntitle\\nbody
    msmarco-document/{train,dev}/queries.tsv.gz  qrels.gz  ms.run.gz (the official top 100, scoreddocs)
    msmarco-document/trec-dl-{2019,2020}/queries.tsv.gz  qrels (plain)  ms.run.gz

Shaped like MS MARCO (docs/studies/trec-dl-rehearsal.md): documents with url, title and body, log-normal body lengths
(median ~600 words, a tail past 5,000), training and dev queries with one relevant document each, 43 / 45 judged TREC
DL queries (of 50 / 54 released) with grades 0-3 over several documents each, top-100 lists that hold most but not all
relevant documents. Relevance is learnable: each query is three topic words, its relevant documents use them often
(grade 3 all three densely, lower grades fewer), and judged non-relevant documents share one of them.

Deterministic: the same arguments write the same bytes (gzip with mtime 0).

    python tests/collections/msmarco-mini/make.py [IR_DATASETS_HOME]   # default: $IR_DATASETS_HOME or ~/.ir_datasets
"""

from __future__ import annotations

import gzip
import math
import os
import random
import sys
from collections import Counter
from pathlib import Path

NAME = "msmarco-document"

# Content words (real English, so GloVe and WordPiece know them): a query's topic is three of them.
CONTENT = """
aircraft airport apple army artist asthma bacteria bakery ballet banana battery beach bicycle biology blood bonsai
bread bridge budget butter cabinet cactus camera cancer canyon carbon castle cattle cement cheese chess chocolate
cinema climate coffee comet compass copper cotton crystal dairy dance debt dental desert diabetes diamond diesel
diet dinosaur dolphin drought eagle earthquake eclipse economy electron elephant engine enzyme erosion fabric falcon
farming fever fiber finance fishing flood flute forest fossil fungus furniture galaxy garden garlic genome geology
ginger glacier glass gold granite grape guitar harbor harvest helmet highway honey horse hospital hurricane
insulin insurance island jazz jewelry kidney kitchen ladder lake laptop lava lawyer leather lemon library liver
lizard lobster lumber magnet mammal mango marble marathon medicine melody meteor migraine mineral monkey mortgage
mosquito mountain museum mushroom nickel nitrogen novel nutrition ocean olive opera orbit orchid oxygen painting
pancreas parrot pasta peanut pepper piano pigment pilot planet plastic poetry pollen pottery poverty protein
pumpkin puzzle pyramid quartz rabbit radar railway rainbow recipe reptile rice river robot rocket saddle salmon
satellite sculpture shark silver skeleton soccer soil solar spider sugar surgery swamp symphony tattoo taxes tea
telescope tennis theater thunder tiger timber tomato tornado tourism tractor trumpet tulip tunnel turtle vaccine
valley vinegar violin virus volcano voltage wallet walnut weather whale wheat wine wolf wool yoga zebra zinc
""".split()
# Function and generic words that every document uses (no signal)
FILLER = """
the of and a to in is that for it as with was on be by this are from or have an they which one you were all we
can her has there been if more when will would who so no other some time about people into only new also year
these two may first then do any like my now over such our man me even most made after well through back much
before where must way how many information find best use used help make known often part number example called
""".split()
QUESTION = "what is how does define why are the cost of meaning types average when".split()


def _gz(path: Path, text: str) -> None:
    """Write ``text`` gzipped with a fixed mtime, so that the same call writes the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as out:
        out.write(text.encode("utf8"))


def _body(rnd: random.Random, length: int, topic_rates: dict[str, float]) -> list[str]:
    """``length`` words: filler, random content words and each topic word at its rate (occurrences per 100 words)."""
    words = [rnd.choice(FILLER) if rnd.random() < 0.9 else rnd.choice(CONTENT) for _ in range(length)]
    for word, rate in topic_rates.items():
        for _ in range(max(1, round(length * rate / 100))):
            words[rnd.randrange(length)] = word
    return words


def make(
    ir_datasets_home: Path,
    *,
    train_queries: int = 200,
    dev_queries: int = 110,
    background_docs: int = 150,
    median_words: int = 600,
    sigma: float = 0.8,
    seed: int = 0,
    missing_documents: bool = False,
) -> dict[str, int]:
    """Write the collection under ``ir_datasets_home/msmarco-document``; return its counts. Every relevant document
    is a document of its own, plus ``background_docs`` about random topics, so the collection holds
    train + dev + 6 x (43 + 45) + background documents (~1,000 at the defaults: a few thousand would be MS MARCO's
    shape at a smaller scale too, but MIR's spaCy annotation of every document alone then takes minutes of the CPU
    rehearsal's budget; ``background_docs`` adds more). 110 dev queries: more than the configs' dev_sample of 100.

    ``missing_documents``: leave out of the collection the relevant document of the first dev query and the grade-3
    document of the first judged query of each year, which the qrels and the official lists still name (the faults
    tests/test_msmarco_faults.py checks are counted and reported, not a crash)."""
    rnd = random.Random(seed)
    root = Path(ir_datasets_home) / NAME
    doc_ids = iter(f"D{n}" for n in rnd.sample(range(1, 3_300_000), 100_000))
    query_ids = iter(str(n) for n in rnd.sample(range(1_000, 1_200_000), 10_000))
    docs: dict[str, tuple[str, str, list[str]]] = {}  # id -> url, title, body words
    topics: dict[str, list[str]] = {}

    def length() -> int:
        # log-normal as MS MARCO's bodies: median ``median_words``, a tail past 5,000 words at the defaults
        return max(20, min(20_000, round(rnd.lognormvariate(math.log(median_words), sigma))))

    def document(topic_rates: dict[str, float], title_words: list[str]) -> str:
        doc_id = next(doc_ids)
        title = " ".join(title_words + rnd.sample(CONTENT, 2)).capitalize()
        url = f"http://www.{rnd.choice(CONTENT)}{rnd.choice(CONTENT)}.com/{'-'.join(rnd.sample(CONTENT, 2))}.html"
        docs[doc_id] = (url, title, _body(rnd, length(), topic_rates))
        return doc_id

    def query(n_words: int = 3) -> str:
        qid = next(query_ids)
        topics[qid] = rnd.sample(CONTENT, n_words)
        return qid

    def graded(qid: str, grade: int) -> str:
        """A document of grade 3 (all topic words, densely, in the title too) down to 0 (one topic word)."""
        topic = topics[qid]
        if grade == 0:
            return document({rnd.choice(topic): 0.8}, [])
        words = topic if grade >= 2 else rnd.sample(topic, 2)
        rate = {3: 1.5, 2: 0.8, 1: 0.5}[grade]
        return document({w: rate for w in words}, topic[:2] if grade == 3 else [])

    # MS MARCO's training and dev queries: one relevant document each
    sets: dict[str, dict[str, dict[str, int]]] = {"train": {}, "dev": {}}
    for name, count in (("train", train_queries), ("dev", dev_queries)):
        for _ in range(count):
            qid = query()
            sets[name][qid] = {graded(qid, 3): 1}
    # TREC DL: 50 / 54 released queries, 43 / 45 judged by NIST with 0-3 over several documents each
    released = {"trec-dl-2019": (50, 43), "trec-dl-2020": (54, 45)}
    test_queries: dict[str, list[str]] = {}
    for name, (n_released, n_judged) in released.items():
        test_queries[name] = [query() for _ in range(n_released)]
        sets[name] = {}
        for qid in test_queries[name][:n_judged]:
            grades = [3, 2, 1, 1, 0, 0]
            sets[name][qid] = {graded(qid, g): g for g in grades}
    for _ in range(background_docs):
        document({w: 0.6 for w in rnd.sample(CONTENT, 3)}, [])

    # The official top 100 (ms.run): a term-matching ranking of the whole collection, as Indri's was
    tf = {d: Counter(body) for d, (_, title, body) in docs.items()}
    df = Counter(w for counts in tf.values() for w in counts)

    def top100(qid: str, relevant: set[str]) -> list[tuple[str, float]]:
        scores = {
            d: sum(math.log1p(counts[w]) * math.log(len(docs) / df[w]) for w in topics[qid] if w in counts)
            + rnd.random() * 0.5
            for d, counts in tf.items()
        }
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:100]
        # most but not all relevant documents: one relevant document of every tenth query misses the list
        missed = sorted(relevant & {d for d, _ in ranked})
        if missed and rnd.random() < 0.1:
            gone = rnd.choice(missed)
            ranked = [kv for kv in ranked if kv[0] != gone]
            ranked.append(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[100])
        return ranked

    def run_lines(qids: list[str], judged: dict[str, dict[str, int]]) -> str:
        lines = []
        for qid in qids:
            relevant = {d for d, g in judged.get(qid, {}).items() if g > 0}
            for rank, (doc_id, score) in enumerate(top100(qid, relevant), start=1):
                lines.append(f"{qid} Q0 {doc_id} {rank} {-100 / (1 + score):.5f} IndriQueryLikelihood\n")
        return "".join(lines)

    def query_lines(qids: list[str]) -> str:
        return "".join(f"{q}\t{' '.join(rnd.sample(QUESTION, 2) + topics[q])}\n" for q in qids)

    def qrels_lines(judged: dict[str, dict[str, int]], iteration: str) -> str:
        return "".join(f"{q} {iteration} {d} {g}\n" for q, grades in judged.items() for d, g in grades.items())

    left_out = set()
    if missing_documents:
        left_out = {next(iter(next(iter(sets["dev"].values()))))}
        left_out |= {next(iter(next(iter(sets[name].values())))) for name in test_queries}
    _gz(
        root / "collection.tsv.gz",
        "".join(
            f"<DOC>\n<DOCNO>{d}</DOCNO>\n<TEXT>\n{url}\n{title}\n{' '.join(body)}\n</TEXT>\n</DOC>\n"
            for d, (url, title, body) in sorted(docs.items())
            if d not in left_out
        ),
    )
    for name in ("train", "dev"):
        qids = list(sets[name])
        _gz(root / name / "queries.tsv.gz", query_lines(qids))
        _gz(root / name / "qrels.gz", qrels_lines(sets[name], "0"))
        _gz(root / name / "ms.run.gz", run_lines(qids, sets[name]))
    for name, qids in test_queries.items():
        _gz(root / name / "queries.tsv.gz", query_lines(qids))
        (root / name / "qrels").write_text(qrels_lines(sets[name], "Q0"))
        _gz(root / name / "ms.run.gz", run_lines(qids, sets[name]))
    return {"docs": len(docs) - len(left_out), **{f"{name} queries": len(judged) for name, judged in sets.items()}}


if __name__ == "__main__":
    home = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("IR_DATASETS_HOME", "~/.ir_datasets"))
    print(make(home.expanduser()))
