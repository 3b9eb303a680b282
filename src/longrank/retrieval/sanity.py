"""Stage ``sanity``: untrained lexical rerankers, the floors a trained reranker has to beat.

Each test query's top-``depth`` first-stage candidates are reranked by the number of *distinct* query terms (stop
words removed, as the word models see them) that occur in the document, ties broken by the first-stage order;
candidates below the depth keep first-stage order underneath, exactly as a model's run does (``runs.with_tail``).

Two kinds of floor, one run per distinct (first stage, depth, words read) (:class:`Floor`):

- ``query_term_matches``: the count over the *whole* document, on the default first stage's top ``rerank_depth``
  (the config's global depth). A model below it has learned less than "count the query words".
- ``query_term_matches@{first stage}-top{depth}-first{words}w``: the count over the first ``words`` words, on the
  candidates a model reranks at its own depth; ``words`` is what the model reads (its ``document_budget``,
  :func:`longrank.config.model_types.capabilities`, the model's defaults filled in). On long documents the
  whole-document count is a length prior (a long document holds more of any 25 words), and the count over the words
  a model reads can be far above it (IRLeD, top 30 of BM25, test nDCG@10: whole document 0.228, TK's first 200
  words 0.278, TKL's first 2,000 0.285; docs/studies/irled-exact-match.md): a model below *that* floor did not learn to
  use the evidence in its own input. A model that reads whole documents at its own depth gets
  ``query_term_matches@{first stage}-top{depth}``, and none where that is the global floor. For a WordPiece model
  the budget is in WordPiece tokens, which the count reads as that many words: somewhat more text than the model
  sees (a word is one or more WordPiece tokens).

Which floors a config asks for is :mod:`longrank.floors` (the workflow's side: it reads the models' entries).
The ``@`` keeps these names apart from any model's or first stage's (the schema allows neither to contain it).
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Iterable, Mapping

from longrank.data.corpus import Corpus
from longrank.data.words import query_terms, tokenize
from longrank.errors import InputError
from longrank.io.trec_files import Run, read_run, write_run
from longrank.results.run_metadata import TIES_BY_ID, write_run_metadata
from longrank.retrieval.sanity_floor import NAME
from longrank.runs import top_candidates, with_tail


def read_words(text: str, words: int | None) -> list[str]:
    """The tokens of ``text`` a floor reads: the first ``words`` (all with None)."""
    tokens = tokenize(text)
    return tokens[:words] if words else tokens


def match_counts(
    queries: Mapping[str, str],
    docs: Mapping[str, str],
    candidates: Run,
    qids: Iterable[str],
    depth: int,
    words: int | None = None,
) -> dict[str, dict[str, int]]:
    """Per query, its top-``depth`` candidates in first-stage order -> distinct query terms in the document's first
    ``words`` words (the whole document with None)."""
    doc_words: dict[str, set[str]] = {}  # a document is a candidate of several queries: tokenise it once
    out = {}
    for q in qids:
        terms = set(query_terms(queries[q], remove_stopwords=True))
        counts = {}
        for d in top_candidates(candidates, q, depth):
            if d not in doc_words:
                doc_words[d] = set(read_words(docs[d], words))
            counts[d] = len(terms & doc_words[d])
        if counts:
            out[q] = counts
    return out


def query_term_matches_run(
    queries: Mapping[str, str],
    docs: Mapping[str, str],
    candidates: Run,
    qids: list[str],
    depth: int,
    words: int | None = None,
) -> Run:
    """A floor's run: score = matches - r / n for the candidate at first-stage rank r (0-based) of the n
    reranked, so matches decide and the first-stage order breaks ties (r / n < 1 never crosses a count)."""
    head = {
        q: {d: c - r / len(counts) for r, (d, c) in enumerate(counts.items())}
        for q, counts in match_counts(queries, docs, candidates, qids, depth, words).items()
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
        "--rerank-depth", type=int, required=True, help="candidates reranked per query (the floor's depth)"
    )
    parser.add_argument(
        "--read-words", type=int, default=None, help="count over a document's first N words (default: all of it)"
    )
    parser.add_argument("--out", required=True, help=f"runs/{NAME}.run, or runs/{NAME}@... for a model's floor")


def run(args):
    if args.read_words is not None and args.read_words < 1:
        raise InputError(f"--read-words {args.read_words}: a floor reads at least one word (leave it out for all)")
    corpus = Corpus(args.data)
    # Test queries only, like a model's run: evaluation reads nothing else.
    result = query_term_matches_run(
        corpus.queries,
        corpus.docs,
        read_run(args.candidates),
        corpus.test_queries(),
        args.rerank_depth,
        args.read_words,
    )
    tag = Path(args.out).name.removesuffix(".run")
    write_run(Path(args.out), result, tag=tag)
    method = {"method": NAME, "rerank_depth": args.rerank_depth}
    write_run_metadata(
        args.out,
        method if args.read_words is None else {**method, "read_words": args.read_words},
        data_dir=args.data,
        pipeline={"reranks": Path(args.candidates).name.removesuffix(".run"), "depth": args.rerank_depth},
        upstream=[args.candidates],
        score_ties=TIES_BY_ID,  # written without the first stage's order (write_run's default)
    )
