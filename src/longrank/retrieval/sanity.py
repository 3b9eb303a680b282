"""Stage ``sanity``: an untrained lexical reranker, ``runs/query_term_matches.run``.

Each test query's top-``rerank_depth`` first-stage candidates are reranked by the number of *distinct*
query terms (stop words removed, as the word models see them) that occur in the document, ties broken
by the first-stage order; candidates below the depth keep first-stage order underneath, exactly as a
model's run does (``runs.with_tail``). It is the trivial baseline a trained reranker has to beat: a
model below it has learned less than "count the query words".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

from longrank.data.corpus import Corpus
from longrank.data.words import query_terms, tokenize
from longrank.io import Run, read_run, write_run
from longrank.provenance import write_run_metadata
from longrank.runs import top_candidates, with_tail

NAME = "query_term_matches"  # the system name in SYSTEMS (workflow/rules/common.smk) and the report


def match_counts(
    queries: Mapping[str, str], docs: Mapping[str, str], candidates: Run, qids: Iterable[str], depth: int
) -> dict[str, dict[str, int]]:
    """Per query, its top-``depth`` candidates in first-stage order -> distinct query terms in the document."""
    doc_words: dict[str, set[str]] = {}  # a document is a candidate of several queries: tokenise it once
    out = {}
    for q in qids:
        terms = set(query_terms(queries[q], remove_stopwords=True))
        counts = {}
        for d in top_candidates(candidates, q, depth):
            if d not in doc_words:
                doc_words[d] = set(tokenize(docs[d]))
            counts[d] = len(terms & doc_words[d])
        if counts:
            out[q] = counts
    return out


def query_term_matches_run(
    queries: Mapping[str, str], docs: Mapping[str, str], candidates: Run, qids: list[str], depth: int
) -> Run:
    """The sanity run: score = matches - r / n for the candidate at first-stage rank r (0-based) of the n
    reranked, so matches decide and the first-stage order breaks ties (r / n < 1 never crosses a count)."""
    head = {
        q: {d: c - r / len(counts) for r, (d, c) in enumerate(counts.items())}
        for q, counts in match_counts(queries, docs, candidates, qids, depth).items()
    }
    return with_tail(head, candidates, qids)


def read_docs(path: str | Path, wanted: set[str]) -> dict[str, str]:
    """Only the ``wanted`` documents of a ``docs.jsonl`` (the report needs the candidates', not the collection)."""
    docs = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d["doc_id"] in wanted:
                docs[d["doc_id"]] = d["text"]
    return docs


def add_arguments(parser):
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--candidates", required=True, help="the first-stage run")
    parser.add_argument(
        "--rerank-depth", type=int, default=100, help="candidates reranked per query (default: %(default)s)"
    )
    parser.add_argument("--out", required=True, help=f"runs/{NAME}.run")


def run(args):
    corpus = Corpus(args.data)
    # Test queries only, like a model's run: evaluation reads nothing else.
    result = query_term_matches_run(
        corpus.queries, corpus.docs, read_run(args.candidates), corpus.test_queries(), args.rerank_depth
    )
    write_run(Path(args.out), result, tag=NAME)
    write_run_metadata(args.out, {"method": "query_term_matches", "rerank_depth": args.rerank_depth})
