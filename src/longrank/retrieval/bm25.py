"""BM25 first stage through bm25s (Lucene's BM25 variant), with a Snowball stemmer and stop words: the
``bm25`` method of ``first_stages`` (workflow/schemas/config.schema.yaml gives its keys' types and defaults)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from longrank.errors import InputError
from longrank.io.trec_files import Run
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)

METHOD = "bm25"
#: the first_stages[] keys only this method reads
KEYS = {"k1", "b", "stemmer", "stopwords"}


def _stemmer(language: str | None):
    if not language:
        return None
    import Stemmer

    try:
        return Stemmer.Stemmer(language)
    except KeyError:
        raise InputError(
            f"first_stages[].stemmer: no Snowball stemmer for {language!r}; try 'english' or null"
        ) from None


def bm25_run(
    docs: Mapping[str, str],
    queries: dict[str, str],
    k1: float = 0.9,
    b: float = 0.4,
    stemmer: str | None = "english",
    stopwords: str | None = "en",
    top_k: int = schema_default("first_stages.*.top_k"),
    timings: dict | None = None,
) -> Run:
    """Retrieve the ``top_k`` documents of every query. Documents that match no query term (score 0)
    are not candidates; a query left with none is logged by name. ``timings``, when given, receives the
    seconds spent indexing and querying (``index_seconds``, ``query_seconds``)."""
    import bm25s  # here, so that validating a config does not import it

    doc_ids = list(docs)
    started = time.perf_counter()
    stem = _stemmer(stemmer)
    corpus_tokens = bm25s.tokenize(list(docs.values()), stopwords=stopwords or [], stemmer=stem, show_progress=True)
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index(corpus_tokens, show_progress=True)
    indexed = time.perf_counter()
    qids = sorted(queries)
    # Tokenise queries with the corpus vocabulary so unknown words are dropped rather than mis-mapped.
    query_tokens = bm25s.tokenize(
        [queries[q] for q in qids], stopwords=stopwords or [], stemmer=stem, return_ids=False, show_progress=False
    )
    k = min(top_k, len(doc_ids))
    results, scores = retriever.retrieve(query_tokens, k=k, show_progress=True)
    if timings is not None:
        timings.update(index_seconds=indexed - started, query_seconds=time.perf_counter() - indexed)
    run: Run = {}
    empty = []
    for row, qid in enumerate(qids):
        hits = {doc_ids[int(i)]: float(s) for i, s in zip(results[row], scores[row]) if s > 0}
        if hits:
            run[qid] = hits
        else:
            empty.append(qid)
    if empty:
        log.warning(
            "%d queries have no BM25 candidate (no query term occurs in the collection): %s",
            len(empty),
            ", ".join(empty[:10]),
        )
    return run


def candidates(settings, corpus, depth: int) -> tuple[Run, dict]:
    """A bm25 first stage (its :class:`~longrank.retrieval.first_stage.Bm25Settings`) over a prepared corpus, and
    its timings."""
    timings: dict = {}
    run = bm25_run(
        corpus.docs,
        corpus.queries,
        k1=settings.k1,
        b=settings.b,
        stemmer=settings.stemmer,
        stopwords=settings.stopwords,
        top_k=depth,
        timings=timings,
    )
    return run, {**timings, "query_ms_per_query": 1000 * timings["query_seconds"] / max(1, len(corpus.queries))}
