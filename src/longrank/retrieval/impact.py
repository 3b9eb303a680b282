"""Full retrieval from an impact index: the first stage of a query-term-independent model (NDRM, Mitra et al.,
"Improving Transformer-Kernel Ranking Model Using Conformer and Query Term Independence", Sec. 3 "Query term
independence" and RQ3).

Under QTI a document's score is the sum of its scores for the query's terms, S_{q,d} = sum_{t in q} s_{t,d}
(Sec. 2), so the trained model's s_{t,d} for every term of the query vocabulary can be computed offline, once per
fold (``NDRM.build_artifacts("fold", ...)``), and a query is answered by adding up a few rows of that matrix:
the inverted-index retrieval the paper's fullrank runs do, here over scipy.sparse.

The index of one fold is a directory with

- ``impact.npz``: ``scipy.sparse.save_npz`` of a CSR float32 matrix [n_terms, n_docs]; row t holds s_{t,d} of
  the documents kept for term t (its top ``impact_depth`` when pruned, all documents when not);
- ``impact.json``: ``{"format": "longrank-impact/1", "terms": [...], "doc_ids": [...], "impact_depth": int|null,
  "build_seconds": float, "query_terms": {query_id: [term, ...]}}``; ``query_terms`` is each query as the model
  processes it (stop words, truncation, duplicates kept: a term twice counts twice, as in the model's sum).
  Optional ``term_floors`` ([n_terms]): NDRM stores s_{t,d} − floor_t (floor_t its term's lowest score, so that
  an entry is ≥ 0 and a missing one means "the term's worst"); adding the query's floors back makes the run's
  scores the model's scores (exactly, unpruned) without changing the ranking.

Retrieval semantics: a query's candidates are the documents stored in at least one of its terms' rows (the
union of the posting lists, as an inverted index sees it), ranked by the sum of their stored scores; a
document missing from a row contributes 0 for that term (exact when the index is unpruned). Scores of NDRM3
can be negative (BatchNorm-ed, Eq. 3), so candidates are not cut at score > 0. Ties are broken by document id
(ascending), the order ``write_run`` and the candidates stage use, so the top k is the same on every machine.
"""

from __future__ import annotations

import json
import logging
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from longrank.errors import InputError
from longrank.io.trec_files import Run

log = logging.getLogger(__name__)

FORMAT = "longrank-impact/1"
MATRIX_FILE, META_FILE = "impact.npz", "impact.json"


@dataclass
class ImpactIndex:
    """One fold's index in memory: the CSR arrays and the lexicon."""

    directory: Path
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    term_row: dict[str, int]
    doc_ids: np.ndarray  # object array of str, column order
    doc_key: np.ndarray  # rank of each column's doc id in sorted order: the tie-break key
    query_terms: dict[str, list[str]]
    floors: np.ndarray  # [n_terms] float64, added back per query term (zeros when the index stores raw scores)
    impact_depth: int | None
    build_seconds: float
    file_bytes: int

    @property
    def nbytes(self) -> int:
        """The index's size in memory: the CSR arrays (scores, column ids, row pointers)."""
        return int(self.data.nbytes + self.indices.nbytes + self.indptr.nbytes)

    @property
    def nonzeros(self) -> int:
        return int(len(self.data))

    def scores(self, terms: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(columns, summed scores) of the documents stored in any of ``terms``' rows; unknown terms add nothing.
        Works on the rows' postings only (never a dense [n_docs] vector): cost O(postings of the query)."""
        rows = [self.term_row[t] for t in terms if t in self.term_row]
        if not rows:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        floor = float(self.floors[rows].sum())  # one constant per query: the ranking is the stored rows' sum
        cols = np.concatenate([self.indices[self.indptr[r] : self.indptr[r + 1]] for r in rows])
        # float64 accumulation: the sum of a few float32 rows, exact to float32 whatever the term order
        vals = np.concatenate([self.data[self.indptr[r] : self.indptr[r + 1]] for r in rows]).astype(np.float64)
        n_docs = len(self.doc_ids)
        if len(cols) * 8 >= n_docs:
            # long postings (an unpruned or deeply pruned index): one pass over a dense accumulator beats sorting
            docs = np.flatnonzero(np.bincount(cols, minlength=n_docs))
            return docs, np.bincount(cols, weights=vals, minlength=n_docs)[docs] + floor
        docs, inverse = np.unique(cols, return_inverse=True)
        return docs, np.bincount(inverse, weights=vals, minlength=len(docs)) + floor

    def top(self, terms: list[str], k: int) -> list[tuple[str, float]]:
        """The ``k`` best (doc_id, score) of a query, best first, ties by ascending doc id."""
        docs, sums = self.scores(terms)
        if len(docs) > k > 0:
            # argpartition finds the k-th best score in O(n); every document tying with it is kept for the sort,
            # so which of the tied documents make the cut is decided by doc id, not by partition order.
            kth = -np.partition(-sums, k - 1)[k - 1]
            keep = np.flatnonzero(sums >= kth)
            docs, sums = docs[keep], sums[keep]
        order = np.lexsort((self.doc_key[docs], -sums))[: max(k, 0)]
        return [(self.doc_ids[docs[i]], float(sums[i])) for i in order]


def load_index(directory: Path) -> ImpactIndex:
    """Read and check one fold's index; anything missing or of another format is an InputError naming the file."""
    directory = Path(directory)
    meta_path, matrix_path = directory / META_FILE, directory / MATRIX_FILE
    for path in (meta_path, matrix_path):
        if not path.is_file():
            raise InputError(
                f"impact index: {path} not found (the artifacts stage writes {MATRIX_FILE} and {META_FILE} "
                "of a query-term-independent model's fold)"
            )
    meta = _read_meta(meta_path)
    terms, doc_ids = list(meta["terms"]), list(meta["doc_ids"])
    matrix = _read_matrix(matrix_path, meta_path, len(terms), len(doc_ids))
    floors = meta.get("term_floors")
    if floors is None:
        floors = np.zeros(len(terms))
    elif not isinstance(floors, list) or len(floors) != len(terms):
        raise InputError(f"impact index: {meta_path} has term_floors of another length than its {len(terms)} terms")
    matrix = matrix.tocsr()
    matrix.sum_duplicates()  # one entry per (term, document), indices sorted
    doc_array = np.asarray(doc_ids, dtype=object)
    doc_key = np.empty(len(doc_ids), dtype=np.int64)
    doc_key[np.argsort(np.asarray(doc_ids, dtype=str), kind="stable")] = np.arange(len(doc_ids))
    return ImpactIndex(
        directory=directory,
        indptr=matrix.indptr,
        indices=matrix.indices,
        data=matrix.data,
        term_row={t: i for i, t in enumerate(terms)},
        doc_ids=doc_array,
        doc_key=doc_key,
        query_terms={str(q): list(ts) for q, ts in meta["query_terms"].items()},
        floors=np.asarray(floors, dtype=np.float64),
        impact_depth=meta.get("impact_depth"),
        build_seconds=float(meta.get("build_seconds") or 0.0),
        file_bytes=matrix_path.stat().st_size + meta_path.stat().st_size,
    )


def _read_meta(meta_path: Path) -> dict:
    """``impact.json``, checked: this format, its lists and query terms, each term once."""
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise InputError(f"impact index: {meta_path} is not valid JSON ({err})") from None
    found = meta.get("format") if isinstance(meta, dict) else None
    if found != FORMAT:
        raise InputError(f"impact index: {meta_path} has format {found!r}; expected {FORMAT!r}")
    expected = {"terms": list, "doc_ids": list, "query_terms": dict}
    missing = [k for k, kind in expected.items() if not isinstance(meta.get(k), kind)]
    if missing:
        raise InputError(
            f"impact index: {meta_path} lacks {missing} or has them of the wrong type (format {FORMAT}: "
            "terms and doc_ids lists, query_terms an object)"
        )
    terms = list(meta["terms"])
    if len(set(terms)) != len(terms):
        raise InputError(f"impact index: {meta_path} lists a term twice; each term has one row")
    return meta


def _read_matrix(matrix_path: Path, meta_path: Path, n_terms: int, n_docs: int):
    """``impact.npz`` as saved by ``save_npz``, of the shape ``impact.json`` names."""
    import scipy.sparse

    try:
        matrix = scipy.sparse.load_npz(matrix_path)
    except (ValueError, KeyError, OSError, zipfile.BadZipFile) as err:
        raise InputError(
            f"impact index: {matrix_path} is not a scipy.sparse matrix saved with save_npz ({err})"
        ) from None
    if matrix.shape != (n_terms, n_docs):
        raise InputError(
            f"impact index: {matrix_path} has shape {matrix.shape}; {meta_path} names {n_terms} terms "
            f"x {n_docs} documents (the two files belong to different indexes)"
        )
    return matrix


def fold_of_queries(folds: list[dict], queries) -> dict[str, int]:
    """Query id -> the fold whose model ranks it: the fold that tests it, so no evaluated query is ranked by a model
    trained on it. A query no fold tests (holdout's training and dev queries) still needs candidates, for the
    rerankers that train on this first stage, and gets fold 0's model (under k-fold every query is tested by one)."""
    tested = {q: k for k, fold in enumerate(folds) for q in fold.get("test", [])}
    return {q: tested.get(q, 0) for q in queries}


def impact_run(index_dirs: Sequence[Path], folds: list[dict], queries, top_k: int) -> tuple[Run, dict]:
    """Rank every query of ``queries`` (ids; a mapping's keys) with the impact index of the fold that tests it and
    keep its ``top_k`` documents. ``index_dirs[k]`` is fold k's index directory (``artifacts/{model}/fold{k}``).

    Returns the run and what it cost: ``query_seconds_mean`` / ``query_ms_per_query`` (per query, scoring and
    top-k only; loading the indexes is ``load_seconds``), ``query_seconds`` (all queries), ``index_bytes`` (one
    fold's index in memory, CSR arrays, mean over folds; ``index_file_bytes`` on disk), ``build_seconds`` (one
    fold's build, mean over folds; ``build_seconds_total`` all folds), ``terms`` and ``nonzeros`` (mean over
    folds), ``impact_depth``, ``folds``, and the same per fold under ``per_fold``."""
    index_dirs = [Path(p) for p in index_dirs]
    if len(index_dirs) != len(folds):
        raise InputError(
            f"impact index: {len(index_dirs)} index directories for {len(folds)} folds; the model's "
            f"artifacts must give one per fold, in fold order ({[str(p) for p in index_dirs]})"
        )
    fold_of = fold_of_queries(folds, queries)
    by_fold: dict[int, list[str]] = {}
    for q in sorted(fold_of):
        by_fold.setdefault(fold_of[q], []).append(q)

    run: Run = {}
    per_fold: list[dict] = []
    latencies: list[float] = []
    empty: list[str] = []
    load_seconds = 0.0
    for k, directory in enumerate(index_dirs):
        started = time.perf_counter()
        index = load_index(directory)
        load_seconds += time.perf_counter() - started
        qids = by_fold.get(k, [])
        _rank_queries(index, qids, top_k, run, latencies, empty)
        per_fold.append(_fold_stats(k, index, len(qids)))
        log.info(
            "fold %d: %d queries from %s (%d terms, %d nonzeros, %.1f MB)",
            k,
            len(qids),
            directory,
            len(index.term_row),
            index.nonzeros,
            index.nbytes / 1e6,
        )
        del index
    if empty:
        log.warning(
            "impact index: %d queries have no stored score for any of their terms and get no candidates (e.g. %s)",
            len(empty),
            empty[:5],
        )
    return run, _cost_stats(per_fold, latencies, load_seconds)


def _rank_queries(
    index: ImpactIndex, qids: list[str], top_k: int, run: Run, latencies: list[float], empty: list[str]
) -> None:
    """Add each of ``qids``' top ``top_k`` to ``run`` and its time to ``latencies``; a query with nothing stored for
    its terms goes to ``empty``."""
    unknown = [q for q in qids if q not in index.query_terms]
    if unknown:
        raise InputError(
            f"impact index: {index.directory / META_FILE} has no query_terms for {len(unknown)} of the "
            f"collection's queries (e.g. {unknown[:3]}); it was built for other queries: rebuild it"
        )
    for q in qids:
        t0 = time.perf_counter()
        ranked = index.top(index.query_terms[q], top_k)
        latencies.append(time.perf_counter() - t0)
        if ranked:
            run[q] = dict(ranked)
        else:
            empty.append(q)


def _fold_stats(k: int, index: ImpactIndex, n_queries: int) -> dict:
    return {
        "fold": k,
        "queries": n_queries,
        "terms": len(index.term_row),
        "nonzeros": index.nonzeros,
        "index_bytes": index.nbytes,
        "index_file_bytes": index.file_bytes,
        "build_seconds": index.build_seconds,
        "impact_depth": index.impact_depth,
    }


def _cost_stats(per_fold: list[dict], latencies: list[float], load_seconds: float) -> dict:
    """What the run cost (``impact_run``'s docstring)."""

    def mean(key):
        return float(np.mean([f[key] for f in per_fold]))

    query_seconds = float(np.sum(latencies)) if latencies else 0.0
    per_query = query_seconds / max(1, len(latencies))
    return {
        "query_seconds_mean": per_query,
        "query_ms_per_query": 1000.0 * per_query,
        "query_seconds": query_seconds,
        "queries": len(latencies),
        "load_seconds": load_seconds,
        "index_bytes": int(round(mean("index_bytes"))),
        "index_file_bytes": int(round(mean("index_file_bytes"))),
        "build_seconds": mean("build_seconds"),
        "build_seconds_total": float(sum(f["build_seconds"] for f in per_fold)),
        "terms": int(round(mean("terms"))),
        "nonzeros": int(round(mean("nonzeros"))),
        "impact_depth": per_fold[0]["impact_depth"] if per_fold else None,
        "folds": len(per_fold),
        "per_fold": per_fold,
    }
