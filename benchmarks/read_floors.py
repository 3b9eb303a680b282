"""Untrained lexical floors on the words a model reads.

The report's sanity floors (src/longrank/retrieval/sanity.py, stage ``sanity``) rank a query's top-k first-stage
candidates by the number of distinct query words (stop words removed): ``query_term_matches`` in the *whole*
document, ``query_term_matches@{first stage}-top{k}-first{N}w`` in the first N words, the N a model reads. The
workflow makes those on the test queries. This script computes the same count at other lengths and on dev and train
queries too, beside two variants the workflow does not make, to ask which evidence a model's input holds:

- distinct query words in the first N tokens (N from ``--lengths``; 0 = the whole document): the stage's own run;
- the same, each word weighted by the IDF the word models use (``query_term_weights: idf``);
- TKL's shape: the distinct query words of each ``--region``-token region (stride 2), summed over the top 3
  regions that do not overlap, in the first N tokens.

Ties are broken by the first-stage order, candidates below the depth keep first-stage order (as the sanity run).
Prints nDCG@10 per query set of fold 0 (test, dev, train). Reads a prepared data directory (the data stage's
output) and a first-stage run:

    python benchmarks/read_floors.py --data results/irled/data --candidates results/irled/candidates/bm25.run \
        --depth 30 --lengths 0 200 2000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from longrank.data.corpus import Corpus  # noqa: E402
from longrank.data.words import query_terms  # noqa: E402
from longrank.io.trec_files import read_run
from longrank.retrieval.sanity import query_term_matches_run, read_words  # noqa: E402
from longrank.runs import mean_measure, top_candidates, with_tail  # noqa: E402


def top_regions(tokens: list[str], terms: set[str], size: int = 30, stride: int = 2, top: int = 3) -> int:
    """Distinct query words per ``size``-token region, summed over the ``top`` best regions that do not overlap."""
    if not terms.intersection(tokens):
        return 0
    scored = sorted(
        ((len(terms.intersection(tokens[s : s + size])), s) for s in range(0, max(1, len(tokens) - size + 1), stride)),
        key=lambda x: -x[0],
    )
    chosen: list[tuple[int, int]] = []
    for value, start in scored:
        if all(abs(start - other) >= size for _, other in chosen):
            chosen.append((value, start))
            if len(chosen) == top:
                break
    return sum(v for v, _ in chosen)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="results/{dataset}/data")
    p.add_argument("--candidates", required=True, help="the first-stage run the models rerank")
    p.add_argument("--depth", type=int, default=30, help="candidates reranked per query (default: %(default)s)")
    p.add_argument("--lengths", type=int, nargs="+", default=[0, 200, 2000], help="tokens read; 0 = whole document")
    p.add_argument("--region", type=int, default=30, help="TKL's region size r (default: %(default)s)")
    p.add_argument("--sets", nargs="+", default=["test", "dev", "train"])
    args = p.parse_args(argv)

    corpus = Corpus(args.data)
    run, qrels, fold = read_run(args.candidates), corpus.qrels, corpus.folds[0]
    vocab = corpus.word_vocabulary()
    idf = vocab.idf()
    tokens: dict[tuple[str, int], list[str]] = {}

    def words(doc_id: str, n: int) -> list[str]:
        if (doc_id, n) not in tokens:
            tokens[doc_id, n] = read_words(corpus.docs[doc_id], n or None)
        return tokens[doc_id, n]

    def weighted(terms, d, n):
        return sum(float(idf[vocab.index.get(w, 1)]) for w in terms.intersection(words(d, n)))

    def regions(terms, d, n):
        return top_regions(words(d, n), terms, args.region)

    def reranked(qids, scorer, n):
        if scorer == "count":  # the sanity stage's floor itself
            return query_term_matches_run(corpus.queries, corpus.docs, run, qids, args.depth, n or None)
        head = {}
        for q in qids:
            terms = set(query_terms(corpus.queries[q]))
            docs = top_candidates(run, q, args.depth)
            head[q] = {d: scorer(terms, d, n) - r / len(docs) / 1e3 for r, d in enumerate(docs)}
        return with_tail(head, run, qids)

    print(f"nDCG@10, top {args.depth} reranked; " + " / ".join(f"{s} ({len(fold[s])})" for s in args.sets))
    rows = [("first stage (as is)", None, 0)]
    for n in args.lengths:
        where = "whole document" if n == 0 else f"first {n} tokens"
        rows += [
            (f"distinct query words, {where}", "count", n),
            (f"IDF-weighted distinct query words, {where}", weighted, n),
            (f"top-3 {args.region}-token regions' distinct words, {where}", regions, n),
        ]
    for name, scorer, n in rows:
        values = [
            mean_measure(run if scorer is None else reranked(fold[s], scorer, n), qrels, fold[s]) for s in args.sets
        ]
        print(f"{name:60s} " + "  ".join(f"{v:.4f}" for v in values), flush=True)


if __name__ == "__main__":
    main()
