"""Stage ``candidates``: first-stage retrieval of every query into ``candidates/{first_stage}.run``."""

from __future__ import annotations

import json
from pathlib import Path

from longrank.data.corpus import Corpus
from longrank.io import InputError, write_run


def add_arguments(parser):
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--first-stage", required=True, help="the config's first_stage block as JSON")
    parser.add_argument("--out", required=True)


def run(args):
    cfg = json.loads(args.first_stage)
    corpus = Corpus(args.data)
    method = cfg.get("method", "bm25")
    if method != "bm25":
        raise InputError(f"first_stage.method: {method!r} is not available; expected bm25")
    from longrank.retrieval.bm25 import bm25_run

    top_k = cfg.get("top_k", 100)
    excluded = corpus.excluded
    extra = max((len(v) for v in excluded.values()), default=0)  # retrieve enough to keep top_k after exclusion
    result = bm25_run(corpus.docs, corpus.queries, k1=cfg.get("k1", 0.9), b=cfg.get("b", 0.4), stemmer=cfg.get("stemmer", "english"),
                      stopwords=cfg.get("stopwords", "en"), top_k=top_k + extra)
    write_run(Path(args.out), without_excluded(result, excluded, top_k), tag=method)


def without_excluded(run: dict, excluded: dict[str, set[str]], top_k: int) -> dict:
    """Each query's top ``top_k`` documents after taking out the ones excluded for it."""
    out = {}
    for qid, scores in run.items():
        kept = [(d, s) for d, s in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])) if d not in excluded.get(qid, ())]
        out[qid] = dict(kept[:top_k])
    return out
