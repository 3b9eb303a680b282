"""First-stage method ``hdct``: BM25 over the pseudo term frequencies HDCT predicts (the network:
:mod:`longrank.models.hdct_encoder`; the stage that trains it and writes the index: :mod:`longrank.train.hdct`). What turns
a document into passages, its passages' predicted weights into pseudo term frequencies, and those into the bm25s
index, and the retrieval from that index: none of it needs torch or the encoder, so that retrieving (stage
``candidates``) and a dry run import neither, and the index's format has one home beside its reader.

- **Passages**: each document's words (lower-cased ``\\w+`` runs, ``data/words.py``) in passages of
  ``passage_words`` words, at most ``max_passages`` of them (what lies beyond is not indexed). A document shorter
  than ``passage_words`` (an abstract of 40 words under the default 100) is one passage, the whole document: its
  weights are HDCT's weights of the whole text, as a passage of a long document is weighted in its own context, so
  short collections are indexed as they are, with no error. A document without a word is an empty pseudo-document
  (found by no query); a collection in which no document keeps an indexable term stops with an ``InputError``.
- **Pseudo term frequencies**: a term of a passage counts round(m · √ŷ) (``m`` = 100, the paper's N; ŷ clipped at
  0, stop words not indexed) once per passage, with the largest prediction among its occurrences there, as in
  DeepCT and HDCT: the predicted importance replaces the term's frequency rather than multiplying it (HDCT's
  released script keeps each passage term's largest rounded weight and drops those below 1). The passages' weights
  are combined by ``combine``: ``max``, ``sum``, or ``decay`` (the paper's position-decayed sum: passage i counts
  1 / (i + 1)), and truncated to an integer, as that script does. The pseudo-document repeats each term tf times
  and bm25s indexes it (``k1``, ``b``), as HDCT's pseudo-documents were indexed with an ordinary BM25 engine.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter
from pathlib import Path

from longrank.data.words import stop_words, tokenize
from longrank.errors import InputError
from longrank.io.json_yaml import read_json
from longrank.io.trec_files import Run
from longrank.retrieval.first_stage import HDCT_COMBINE

log = logging.getLogger(__name__)

METHOD = "hdct"
#: the hdct stage's output directory holds the bm25s index under INDEX and what building it cost in STATS
INDEX, STATS = "index", "stats.json"


def passages_of(text: str, passage_words: int, max_passages: int) -> list[list[str]]:
    """The document's words in passages of ``passage_words`` (the last one shorter; a short document one passage,
    all of it; no words no passage), the first ``max_passages`` of them."""
    words = tokenize(text)
    return [
        words[i : i + passage_words] for i in range(0, min(len(words), passage_words * max_passages), passage_words)
    ]


def pseudo_frequencies(passages: list[list[tuple[str, float]]], m: int = 100, combine: str = "decay") -> Counter:
    """A document's pseudo term frequencies from its passages' (term, predicted weight) occurrences: in each passage
    a term counts once, round(m·√w) of its largest w (clipped at 0; below 1 it is not indexed), combined over the
    passages (``max``, ``sum``, or ``decay``: passage i counts 1 / (i + 1)) and truncated to an integer."""
    if combine not in HDCT_COMBINE:
        raise InputError(f"first stage hdct: combine {combine!r} is not one of {list(HDCT_COMBINE)}")
    tf: dict[str, float] = {}
    for i, occurrences in enumerate(passages):
        own: dict[str, int] = {}
        for term, w in occurrences:
            own[term] = max(own.get(term, 0), round(m * math.sqrt(max(0.0, w))))
        for term, f in own.items():
            if f < 1:
                continue
            if combine == "max":
                tf[term] = max(tf.get(term, 0.0), f)
            else:
                tf[term] = tf.get(term, 0.0) + (f / (i + 1) if combine == "decay" else f)
    return Counter({t: int(f) for t, f in tf.items() if int(f) > 0})


def build_index(doc_ids: list[str], tfs: list[Counter], k1: float, b: float, out: Path) -> None:
    """bm25s over the pseudo-documents (each term repeated tf times), saved with the document ids."""
    import bm25s

    if not any(tfs):  # bm25s cannot index a collection without a term
        raise InputError(
            f"first stage hdct: none of the {len(tfs)} documents keeps an indexable term (every word a stop "
            "word, or every weight rounded to 0); check the collection's text, or raise m"
        )
    # the vocabulary numbered in sorted order: bm25s numbers the terms of token lists in set order, which follows the
    # process's string hash seed, so two runs (or a sharded run's merge and one job) would write other index bytes
    vocabulary = {term: i for i, term in enumerate(sorted({term for tf in tfs for term in tf}))}
    pseudo_documents = [[vocabulary[t] for t, f in sorted(tf.items()) for _ in range(f)] for tf in tfs]
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index((pseudo_documents, vocabulary), show_progress=False)
    retriever.save(str(out))
    (out / "doc_ids.json").write_text(json.dumps(doc_ids), encoding="utf-8")


def retrieve(index_dir: Path, queries: dict[str, str], top_k: int) -> tuple[Run, dict]:
    """Every query's top ``top_k`` from a saved HDCT index; query terms are the documents' (lower-cased words,
    stop words out), unknown terms dropped."""
    import bm25s

    started = time.perf_counter()
    retriever = bm25s.BM25.load(str(index_dir / INDEX))
    doc_ids = json.loads((index_dir / INDEX / "doc_ids.json").read_text(encoding="utf-8"))
    loaded = time.perf_counter()
    vocab = retriever.vocab_dict
    qids = sorted(queries)
    run: Run = {}
    stop = stop_words()
    for qid in qids:
        terms = [t for t in tokenize(queries[qid]) if t not in stop and t in vocab]
        if not terms:
            continue
        results, scores = retriever.retrieve([terms], k=min(top_k, len(doc_ids)), show_progress=False)
        hits = {doc_ids[int(i)]: float(s) for i, s in zip(results[0], scores[0]) if s > 0}
        if hits:
            run[qid] = hits
    done = time.perf_counter()
    missing = len(qids) - len(run)
    if missing:
        log.warning("hdct: %d queries have no indexed term and no candidates", missing)
    built = read_json(index_dir / STATS)
    # the report's first-stage costs: building = weighting every passage through the encoder + indexing (training
    # not included, as for a model's impact index); the index = bm25s's arrays on disk
    return run, {
        **built,
        "load_seconds": loaded - started,
        "query_seconds": done - loaded,
        "query_ms_per_query": 1000 * (done - loaded) / max(1, len(qids)),
        "build_seconds": built["weight_seconds"] + built["index_seconds"],
        "index_bytes": built["index_mb"] * 1e6,
    }
