"""Document-length analyses (TKL paper, Hofstätter et al. SIGIR 2020, Fig. 1-3).

- ``query_length_buckets``: test queries bucketed by the median length (words) of their relevant
  documents, in quantile buckets, for nDCG@10 per bucket (Fig. 2 style).
- ``length_distributions``: over equal-mass length buckets of the whole collection (deciles of
  ``doc_lengths.tsv``), the share of relevant candidates and of each run's top-30 documents falling in
  each bucket (Fig. 1). Because each bucket holds the same share of the collection, P(bucket | rel) is
  proportional to P(rel | bucket) (Bayes with a uniform P(bucket)), and likewise for retrieval, so the
  gap between the two curves reads as in the paper.
- ``region_positions``: start offsets of TKL's top-3 regions over each query's top-10 documents (Fig. 3).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from longrank.errors import InputError
from longrank.tables import read_table

log = logging.getLogger(__name__)


def read_doc_lengths(path: str | os.PathLike) -> pd.Series:
    frame = read_table(path, sep="\t")
    if not {"doc_id", "words"} <= set(frame.columns):
        raise InputError(f"{path}: expected header 'doc_id\\twords', got {list(frame.columns)}")
    return frame.set_index("doc_id")["words"].astype(float)


def relevant_median_length(
    qrels: Mapping[str, Mapping[str, int]], lengths: pd.Series, qids: Iterable[str]
) -> pd.Series:
    """Median length in words of each query's relevant documents (queries without known lengths are left out)."""
    out = {}
    for q in qids:
        ls = [lengths[d] for d, g in qrels.get(q, {}).items() if g > 0 and d in lengths.index]
        if ls:
            out[q] = float(np.median(ls))
    return pd.Series(out, dtype=float, name="median_relevant_words")


def query_length_buckets(median_lengths: pd.Series, n_buckets: int = 4) -> pd.Series:
    """Quantile buckets of queries by median relevant-document length; labels 'lo–hi words'."""
    if median_lengths.empty:
        return pd.Series(dtype=object)
    n = max(1, min(n_buckets, median_lengths.nunique()))
    codes, edges = pd.qcut(median_lengths, q=n, labels=False, retbins=True, duplicates="drop")
    labels = [f"{int(round(edges[i]))}–{int(round(edges[i + 1]))}" for i in range(len(edges) - 1)]
    return codes.map(lambda c: labels[int(c)]).astype(pd.CategoricalDtype(labels, ordered=True))


def ndcg_by_bucket(per_query: Mapping[str, pd.DataFrame], buckets: pd.Series, measure: str = "nDCG@10") -> pd.DataFrame:
    """Rows: bucket label; columns: systems (mean measure) plus 'queries' (count)."""
    data = {}
    for system, frame in per_query.items():
        common = frame.index.intersection(buckets.index)
        data[system] = frame.loc[common, measure].groupby(buckets.loc[common], observed=False).mean()
    out = pd.DataFrame(data)
    out["queries"] = buckets.value_counts().reindex(out.index).fillna(0).astype(int)
    return out


def collection_length_edges(lengths: pd.Series, n_buckets: int = 10) -> np.ndarray:
    edges = np.unique(np.quantile(lengths.to_numpy(), np.linspace(0, 1, n_buckets + 1)))
    if len(edges) < 2:
        edges = np.array([lengths.min(), lengths.max() + 1.0])
    return edges


def _bucket_shares(doc_lengths: Sequence[float], edges: np.ndarray) -> np.ndarray:
    if len(doc_lengths) == 0:
        return np.full(len(edges) - 1, np.nan)
    idx = np.clip(np.searchsorted(edges, doc_lengths, side="right") - 1, 0, len(edges) - 2)
    counts = np.bincount(idx, minlength=len(edges) - 1).astype(float)
    return counts / counts.sum()


def top_k(run: Mapping[str, Mapping[str, float]], k: int) -> dict[str, list[str]]:
    # ties in the run's own order (a run read from its file: its rank column), as reranked ties are written
    return {q: [d for d, _ in sorted(docs.items(), key=lambda kv: -kv[1])[:k]] for q, docs in run.items()}


def uniform_region_share(
    run: Mapping[str, Mapping[str, float]],
    qids: Iterable[str],
    lengths: pd.Series,
    read_len: int,
    region_size: int = 30,
    threshold: int = 500,
    top_docs: int = 10,
) -> float:
    """The share of regions that would start at token >= ``threshold`` if each region's start were uniform over
    the part of the document the model reads (its first ``read_len`` words), over each query's top documents:
    the baseline a region-position share is read against (long collections push it up by themselves)."""
    keep = set(qids)
    shares = []
    for _q, docs in top_k({q: v for q, v in run.items() if q in keep}, top_docs).items():
        for d in docs:
            if d in lengths.index:
                starts = max(int(min(lengths[d], read_len)) - region_size + 1, 1)  # possible region starts
                shares.append(max(starts - threshold, 0) / starts)
    return sum(shares) / len(shares) if shares else float("nan")


def length_distributions(
    candidates: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    runs: Mapping[str, Mapping[str, Mapping[str, float]]],
    lengths: pd.Series,
    qids: Iterable[str],
    depth: int = 30,
    n_buckets: int = 10,
) -> pd.DataFrame:
    """Rows: length buckets; columns 'lo', 'hi', 'relevant' and one per run: share of documents per bucket."""
    qids = set(qids)
    edges = collection_length_edges(lengths, n_buckets)
    rel = [
        lengths[d] for q in qids for d in candidates.get(q, {}) if qrels.get(q, {}).get(d, 0) > 0 and d in lengths.index
    ]
    out = pd.DataFrame({"lo": edges[:-1], "hi": edges[1:], "relevant": _bucket_shares(rel, edges)})
    for name, run in runs.items():
        tops = top_k({q: run[q] for q in qids if q in run}, depth)
        ret = [lengths[d] for docs in tops.values() for d in docs if d in lengths.index]
        out[name] = _bucket_shares(ret, edges)
    return out


def region_positions(
    details_path: str | os.PathLike,
    run: Mapping[str, Mapping[str, float]] | None,
    qids: Iterable[str] | None = None,
    top_docs: int = 10,
    regions: int = 3,
) -> dict[int, list[int]]:
    """Start offsets of the rank-1..``regions`` regions (by region score) of each query's top documents.

    Documents are the top ``top_docs`` of ``run`` per query (all documents in the file when ``run`` is None).
    """
    wanted = None
    if run is not None:
        keep = set(qids) if qids is not None else set(run)
        wanted = {
            (q, d) for q, docs in top_k({q: v for q, v in run.items() if q in keep}, top_docs).items() for d in docs
        }
    positions: dict[int, list[int]] = {r: [] for r in range(1, regions + 1)}
    with open(details_path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                key = (str(rec["query_id"]), str(rec["doc_id"]))
                starts, scores = list(rec["region_starts"]), list(rec.get("region_scores") or [])
            except (ValueError, KeyError) as err:
                raise InputError(
                    f"{details_path}:{lineno}: expected JSON with query_id, doc_id, region_starts ({err})"
                ) from None
            if wanted is not None and key not in wanted:
                continue
            if len(scores) == len(starts):  # order by region score, best first
                starts = [s for _, s in sorted(zip(scores, starts), key=lambda t: -t[0])]
            for r, s in enumerate(starts[:regions], start=1):
                positions[r].append(int(s))
    return positions
