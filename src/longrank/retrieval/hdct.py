"""First-stage method ``hdct``: retrieval from the index the ``hdct`` stage built (:mod:`longrank.models.hdct`:
BM25 over the pseudo term frequencies HDCT predicts). Kept apart from the model so that retrieving needs neither
torch nor the encoder."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from longrank.data.words import STOP_WORDS, tokenize
from longrank.io import Run, read_json

log = logging.getLogger(__name__)

#: the hdct stage's output directory holds the bm25s index under INDEX and what building it cost in STATS
INDEX, STATS = "index", "stats.json"


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
    for qid in qids:
        terms = [t for t in tokenize(queries[qid]) if t not in STOP_WORDS and t in vocab]
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
