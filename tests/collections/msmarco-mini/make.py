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

The learnability study's collections (``--learnability``, docs/studies/learnability.md): relevance partly in words
that no query has, thousands of training queries, the same documents and test queries at every training-set size:

    python tests/collections/msmarco-mini/make.py HOME --learnability --train-pool 3000 --train-queries 300
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
# The learnability mode's hidden words: each content word's associated word, the nearest GloVe 6B 50d neighbour (cosine
# 0.58-0.97, median ~0.8) among GloVe's 30,000 most frequent words that is no content, filler or question word, shares
# no Snowball stem or first four letters with it and is no other word's associate (computed once and written out, so
# that the generator needs no GloVe). A query never contains them; its relevant documents do.
ASSOCIATED = dict(
    pair.split(":")
    for pair in """
aircraft:planes airport:port apple:blackberry army:forces artist:musician asthma:respiratory bacteria:pathogens bakery:grocery 
ballet:repertory banana:coconut battery:weapon beach:park bicycle:bike biology:genetics blood:causes bonsai:ornamental 
bread:baked bridge:road budget:spending butter:mixture cabinet:prime cactus:flowering camera:screen cancer:prostate 
canyon:creek carbon:dioxide castle:manor cattle:sheep cement:steel cheese:sausage chess:gymnastics chocolate:cream 
cinema:theatre climate:warming coffee:drink comet:asteroid compass:navigation copper:metals cotton:corn crystal:dome 
dairy:milk dance:singing debt:loans dental:surgeons desert:jungle diabetes:hypertension diamond:jewel diesel:gasoline 
diet:eating dinosaur:prehistoric dolphin:panda drought:famine eagle:blue earthquake:quake eclipse:lunar economy:growth 
electron:particle elephant:bird engine:powered enzyme:inhibitor erosion:depletion fabric:cloth falcon:jaguar farming:agricultural 
fever:dengue fiber:fibre finance:investment fishing:boats flood:rains flute:clarinet forest:habitat fossil:biomass 
fungus:bacterium furniture:antique galaxy:jupiter garden:lawn garlic:onions genome:sequencing geology:archaeology ginger:cinnamon 
glacier:antarctica glass:metal gold:bronze granite:limestone grape:varieties guitar:vocals harbor:shore harvest:crop 
helmet:mask highway:route honey:sweet horse:riding hospital:clinic hurricane:storm insulin:hormone insurance:pension 
island:coast jazz:blues jewelry:clothing kidney:marrow kitchen:bathroom ladder:climbing lake:pond laptop:ipod 
lava:volcanic lawyer:attorney leather:shoes lemon:juice library:archives liver:lungs lizard:snake lobster:crab 
lumber:mill magnet:playground mammal:endangered mango:pineapple marble:ornate marathon:event medicine:studies melody:riff 
meteor:helium migraine:nausea mineral:natural monkey:mouse mortgage:lenders mosquito:insect mountain:hills museum:gallery 
mushroom:edible nickel:titanium nitrogen:sulfur novel:fiction nutrition:recommends ocean:waters olive:lavender opera:premiere 
orbit:spacecraft orchid:frog oxygen:hydrogen painting:portrait pancreas:transplants parrot:moths pasta:sauce peanut:potato 
pepper:mustard piano:cello pigment:coating pilot:crew planet:earth plastic:bags poetry:poems pollen:nectar 
pottery:ceramics poverty:illiteracy protein:molecule pumpkin:pudding puzzle:intriguing pyramid:bust quartz:metallic rabbit:bunny 
radar:infrared railway:tram rainbow:dove recipe:dessert reptile:alligator rice:vegetables river:tributary robot:simulator 
rocket:launcher saddle:pony salmon:trout satellite:network sculpture:mural shark:crocodile silver:medal skeleton:skull 
soccer:football soil:moisture solar:geothermal spider:beast sugar:syrup surgery:underwent swamp:mangrove symphony:orchestra 
tattoo:doll taxes:income tea:drinks telescope:hubble tennis:volleyball theater:broadway thunder:roar tiger:woods 
timber:plantations tomato:cucumber tornado:snowstorm tourism:development tractor:truck trumpet:saxophone tulip:beetles tunnel:crossing 
turtle:squirrel vaccine:smallpox valley:foothills vinegar:tablespoon violin:concerto virus:influenza volcano:eruption voltage:amplifier 
wallet:briefcase walnut:pine weather:temperatures whale:hunts wheat:grain wine:tasting wolf:hunter wool:linen 
yoga:meditation zebra:striped zinc:aluminium
""".split()
)


def _gz(path: Path, text: str) -> None:
    """Write ``text`` gzipped with a fixed mtime, so that the same call writes the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as out:
        out.write(text.encode("utf8"))


def _body(rnd: random.Random, length: int, topic_rates: dict[str, float], distinct: bool = False) -> list[str]:
    """``length`` words: filler, random content words and each topic word at its rate (occurrences per 100 words).
    ``distinct``: the topic words at distinct positions, so that none overwrites another (each is there at least
    once); without it a later word may overwrite an earlier one, as the default collection always had."""
    words = [rnd.choice(FILLER) if rnd.random() < 0.9 else rnd.choice(CONTENT) for _ in range(length)]
    if distinct:
        planted = [w for w, rate in topic_rates.items() for _ in range(max(1, round(length * rate / 100)))]
        for position, word in zip(rnd.sample(range(length), len(planted)), planted):
            words[position] = word
        return words
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
    median_words: int | None = None,
    sigma: float = 0.8,
    seed: int = 0,
    missing_documents: bool = False,
    learnability: bool = False,
    train_pool: int | None = None,
    judged_queries: int | None = None,
    distractors: int = 2,
) -> dict[str, int]:
    """Write the collection under ``ir_datasets_home/msmarco-document``; return its counts. Every relevant document
    is a document of its own, plus ``background_docs`` about random topics, so the collection holds
    train + dev + 6 x (43 + 45) + background documents (~1,000 at the defaults: a few thousand would be MS MARCO's
    shape at a smaller scale too, but MIR's spaCy annotation of every document alone then takes minutes of the CPU
    rehearsal's budget; ``background_docs`` adds more). 110 dev queries: more than the configs' dev_sample of 100.

    ``missing_documents``: leave out of the collection the relevant document of the first dev query and the grade-3
    document of the first judged query of each year, which the qrels and the official lists still name (the faults
    tests/test_msmarco_faults.py checks are counted and reported, not a crash).

    ``learnability`` (docs/studies/learnability.md): part of relevance is invisible to term matching. Every judged
    document of a query, relevant or not, uses the query's three topic words (relevant ones a little more often), and
    every one carries three *associated* words (``ASSOCIATED``: a GloVe neighbour of a content word, never in any
    query) at one rate; which three decides relevance: a grade-3 document carries the associates of all three of the
    query's topic words, grade 2 of two, grade 1 of one, the rest and every non-relevant document those of other
    content words. So term matching finds the topic but barely the relevant documents in it, while a model that
    learns that "earthquake" goes with "quake" can, and no word of a document says "relevant" whatever the query.
    Each training and dev query has one relevant document and ``distractors`` non-relevant ones of its topic; each
    judged TREC DL query 3, 2, 1, 1 and four of grade 0. Bodies are shorter (median 150 words unless
    ``median_words`` says otherwise), ``judged_queries`` sets the judged queries of each year (released: 7 / 9 more),
    and the official lists are computed with numpy (the same ranking as the default's, at thousands of queries).

    ``train_pool``: make the documents of this many training queries (default ``train_queries``) and write the first
    ``train_queries`` of them, so that collections made with one pool and different ``train_queries`` hold the same
    documents, dev and test queries, byte for byte, and differ in their training queries only (a learning curve).
    The default arguments write what this generator always wrote, byte for byte."""
    pool = train_queries if train_pool is None else train_pool
    if pool < train_queries:
        raise ValueError(f"train_pool ({pool}) is smaller than train_queries ({train_queries})")
    if median_words is None:
        median_words = 150 if learnability else 600
    rnd = random.Random(seed)
    root = Path(ir_datasets_home) / NAME
    doc_ids = iter(f"D{n}" for n in rnd.sample(range(1, 3_300_000), 100_000))
    query_ids = iter(str(n) for n in rnd.sample(range(1_000, 1_200_000), 10_000 if pool <= 9_000 else pool + 1_000))
    docs: dict[str, tuple[str, str, list[str]]] = {}  # id -> url, title, body words
    topics: dict[str, list[str]] = {}

    def length() -> int:
        # log-normal as MS MARCO's bodies: median ``median_words``, a tail past 5,000 words at the defaults
        return max(20, min(20_000, round(rnd.lognormvariate(math.log(median_words), sigma))))

    def document(topic_rates: dict[str, float], title_words: list[str]) -> str:
        doc_id = next(doc_ids)
        title = " ".join(title_words + rnd.sample(CONTENT, 2)).capitalize()
        url = f"http://www.{rnd.choice(CONTENT)}{rnd.choice(CONTENT)}.com/{'-'.join(rnd.sample(CONTENT, 2))}.html"
        docs[doc_id] = (url, title, _body(rnd, length(), topic_rates, distinct=learnability))
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

    def hidden_graded(qid: str, grade: int) -> str:
        """Learnability: the query's topic words in every grade, the associates of 3, 2, 1 or 0 of them (the rest
        associates of other content words), so that the associates decide the grade."""
        topic = topics[qid]
        own = rnd.sample(topic, {3: 3, 2: 2, 1: 1, 0: 0}[grade])
        others = rnd.sample([w for w in CONTENT if w not in topic], 3 - len(own))
        associates = [ASSOCIATED[w] for w in own + others]
        rates = {w: 1.0 if grade > 0 else 0.7 for w in topic} | {a: 1.5 for a in associates}
        return document(rates, [topic[0], associates[0]])

    # MS MARCO's training and dev queries: one relevant document each
    sets: dict[str, dict[str, dict[str, int]]] = {"train": {}, "dev": {}}
    distractor_docs: dict[str, list[str]] = {}  # learnability: a query's judged non-relevant documents
    for name, count in (("train", pool), ("dev", dev_queries)):
        for _ in range(count):
            qid = query()
            if learnability:
                sets[name][qid] = {hidden_graded(qid, 3): 1}
                distractor_docs[qid] = [hidden_graded(qid, 0) for _ in range(distractors)]
            else:
                sets[name][qid] = {graded(qid, 3): 1}
    # TREC DL: 50 / 54 released queries, 43 / 45 judged by NIST with 0-3 over several documents each
    released = {"trec-dl-2019": (50, 43), "trec-dl-2020": (54, 45)}
    if judged_queries is not None:
        released = {
            "trec-dl-2019": (judged_queries + 7, judged_queries),
            "trec-dl-2020": (judged_queries + 9, judged_queries),
        }
    test_queries: dict[str, list[str]] = {}
    for name, (n_released, n_judged) in released.items():
        test_queries[name] = [query() for _ in range(n_released)]
        sets[name] = {}
        for qid in test_queries[name][:n_judged]:
            if learnability:
                sets[name][qid] = {hidden_graded(qid, g): g for g in [3, 2, 1, 1, 0, 0, 0, 0]}
            else:
                grades = [3, 2, 1, 1, 0, 0]
                sets[name][qid] = {graded(qid, g): g for g in grades}
    for _ in range(background_docs):
        if learnability:
            topic = rnd.sample(CONTENT, 3)
            document({w: 0.6 for w in topic} | {ASSOCIATED[w]: 0.6 for w in topic}, [])
        else:
            document({w: 0.6 for w in rnd.sample(CONTENT, 3)}, [])

    # The official top 100 (ms.run): a term-matching ranking of the whole collection, as Indri's was
    tf = {d: Counter(body) for d, (_, title, body) in docs.items()}
    df = Counter(w for counts in tf.values() for w in counts)

    def top100(qid: str, relevant: set[str]) -> list[tuple[str, float]]:
        if learnability:
            return fast_top100(qid, relevant)
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

    if learnability:  # the same ranking with numpy: thousands of queries over ~10,000 documents
        import numpy as np

        doc_order = sorted(tf)
        weights = {
            w: np.array([math.log1p(tf[d][w]) * math.log(len(docs) / df[w]) for d in doc_order])
            for w in {w for t in topics.values() for w in t}
        }
        noise = np.random.default_rng(seed)

        def fast_top100(qid: str, relevant: set[str]) -> list[tuple[str, float]]:
            scores = sum(weights[w] for w in topics[qid]) + noise.random(len(doc_order)) * 0.5
            order = np.lexsort((np.arange(len(doc_order)), -scores))[:101]
            ranked = [(doc_order[i], float(scores[i])) for i in order]
            top, spare = ranked[:100], ranked[100]
            missed = sorted(relevant & {d for d, _ in top})
            if missed and rnd.random() < 0.1:
                gone = rnd.choice(missed)
                top = [kv for kv in top if kv[0] != gone] + [spare]
            return top

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
        if name == "train" and train_queries < pool:
            # every query of the pool is ranked and phrased (the same draws as with all of them written), the first
            # train_queries written
            kept = set(qids[:train_queries])
            phrased = query_lines(qids).splitlines(keepends=True)[:train_queries]
            runs = run_lines(qids, sets[name]).splitlines(keepends=True)
            _gz(root / name / "queries.tsv.gz", "".join(phrased))
            _gz(root / name / "qrels.gz", qrels_lines({q: g for q, g in sets[name].items() if q in kept}, "0"))
            _gz(root / name / "ms.run.gz", "".join(line for line in runs if line.split(" ", 1)[0] in kept))
            continue
        _gz(root / name / "queries.tsv.gz", query_lines(qids))
        _gz(root / name / "qrels.gz", qrels_lines(sets[name], "0"))
        _gz(root / name / "ms.run.gz", run_lines(qids, sets[name]))
    for name, qids in test_queries.items():
        _gz(root / name / "queries.tsv.gz", query_lines(qids))
        (root / name / "qrels").write_text(qrels_lines(sets[name], "Q0"))
        _gz(root / name / "ms.run.gz", run_lines(qids, sets[name]))
    counts = {f"{name} queries": len(judged) for name, judged in sets.items()}
    counts["train queries"] = train_queries
    return {"docs": len(docs) - len(left_out), **counts}


PASSAGE_NAME = "msmarco-passage"


def make_passages(
    ir_datasets_home: Path,
    *,
    train_queries: int = 200,
    dev_queries: int = 110,
    background_passages: int = 600,
    median_words: int = 50,
    seed: int = 0,
) -> dict[str, int]:
    """MS MARCO *passage* ranking under ``ir_datasets_home/msmarco-passage`` (ir_datasets 0.6.3:
    ``ir_datasets/datasets/msmarco_passage.py``), for MORES's setting (§4.1): ``collection.tsv`` (numeric passage ids,
    ``pid<TAB>text``, log-normal lengths around ``median_words``, MS MARCO's ~55), ``irds_version.txt`` (else
    ir_datasets' migrator deletes the collection), ``train/`` and ``dev/small/`` queries with one relevant passage
    each, ``trec-dl-2019/`` with 200 released queries of which 43 are judged 0-3 over six passages each, and each
    subset's top-1000 list as ir_datasets caches it (``ms.run``: ``qid<TAB>pid``, no score, best first). Relevance
    is learnable as the documents': a query is three topic words, its relevant passages use them."""
    rnd = random.Random(seed)
    root = Path(ir_datasets_home) / PASSAGE_NAME
    passage_ids = iter(str(n) for n in rnd.sample(range(0, 8_841_823), 50_000))
    query_ids = iter(str(n) for n in rnd.sample(range(1_000, 1_200_000), 10_000))
    passages: dict[str, list[str]] = {}
    topics: dict[str, list[str]] = {}

    def passage(topic_rates: dict[str, float]) -> str:
        pid = next(passage_ids)
        length = max(10, min(200, round(rnd.lognormvariate(math.log(median_words), 0.4))))
        passages[pid] = _body(rnd, length, topic_rates, distinct=True)
        return pid

    def query() -> str:
        qid = next(query_ids)
        topics[qid] = rnd.sample(CONTENT, 3)
        return qid

    def graded(qid: str, grade: int) -> str:
        topic = topics[qid]
        if grade == 0:
            return passage({rnd.choice(topic): 3.0})
        words = topic if grade >= 2 else rnd.sample(topic, 2)
        return passage({w: {3: 6.0, 2: 4.0, 1: 3.0}[grade] for w in words})

    sets: dict[str, dict[str, dict[str, int]]] = {}
    for name, count in (("train", train_queries), ("dev/small", dev_queries)):
        sets[name] = {}
        for _ in range(count):
            qid = query()
            sets[name][qid] = {graded(qid, 3): 1}
    released = [query() for _ in range(200)]
    sets["trec-dl-2019"] = {qid: {graded(qid, g): g for g in [3, 2, 1, 1, 0, 0]} for qid in released[:43]}
    for _ in range(background_passages):
        passage({w: 3.0 for w in rnd.sample(CONTENT, 3)})

    tf = {p: Counter(words) for p, words in passages.items()}
    df = Counter(w for counts in tf.values() for w in counts)

    def top1000(qid: str) -> list[str]:
        scores = {
            p: sum(math.log1p(counts[w]) * math.log(len(passages) / df[w]) for w in topics[qid] if w in counts)
            + rnd.random() * 0.5
            for p, counts in tf.items()
        }
        return [p for p, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:1000]]

    root.mkdir(parents=True, exist_ok=True)
    (root / "irds_version.txt").write_text("v2")
    (root / "collection.tsv").write_text("".join(f"{p}\t{' '.join(words)}\n" for p, words in sorted(passages.items())))
    runs = {"train": "train", "dev/small": "dev", "trec-dl-2019": "trec-dl-2019"}
    for name, judged in sets.items():
        qids = released if name == "trec-dl-2019" else list(judged)
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "queries.tsv").write_text(
            "".join(f"{q}\t{' '.join(rnd.sample(QUESTION, 2) + topics[q])}\n" for q in qids)
        )
        iteration = "Q0" if name == "trec-dl-2019" else "0"
        (root / name / "qrels").write_text(
            "".join(f"{q} {iteration} {p} {g}\n" for q, grades in judged.items() for p, g in grades.items())
        )
        (root / runs[name] / "ms.run").write_text("".join(f"{q}\t{p}\n" for q in qids for p in top1000(q)))
    return {"passages": len(passages), **{f"{name} queries": len(judged) for name, judged in sets.items()}}


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", nargs="?", default=os.environ.get("IR_DATASETS_HOME", "~/.ir_datasets"))
    parser.add_argument("--learnability", action="store_true", help="relevance partly in associated words no query has")
    parser.add_argument("--passages", action="store_true", help="MS MARCO passage ranking (MORES's setting) instead")
    parser.add_argument("--train-queries", type=int, default=200, help="training queries written (default 200)")
    parser.add_argument("--train-pool", type=int, help="training queries whose documents are made (default: as many)")
    parser.add_argument("--judged-queries", type=int, help="judged queries per TREC DL year (default 43 / 45)")
    parser.add_argument("--median-words", type=int, help="median body length (default 600; 150 with --learnability)")
    args = parser.parse_args(argv)
    if args.passages:
        print(make_passages(Path(args.home).expanduser()))
        return
    counts = make(
        Path(args.home).expanduser(),
        learnability=args.learnability,
        train_queries=args.train_queries,
        train_pool=args.train_pool,
        judged_queries=args.judged_queries,
        median_words=args.median_words,
    )
    print(counts)


if __name__ == "__main__":
    main(sys.argv[1:])
