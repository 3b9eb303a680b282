"""Per-query effectiveness measures through ir-measures, on exactly the evaluated query set.

The evaluated query set is the union of the folds' ``test`` lists. Two edge cases are handled the same
way for every system, so that all eval TSVs of a dataset cover the same queries:

- a test query with **no relevant document** in the qrels (no gain > 0) has no defined nDCG/AP/recall;
  it is omitted from evaluation (and logged), whatever the run contains;
- a test query that the run **does not contain** (no candidates) scores 0 for every measure (logged),
  never silently dropped: a system that returns nothing for a query is as bad as one that returns junk.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from collections.abc import Iterable, Mapping, Sequence

import ir_measures
import pandas as pd

from longrank.evaluate import ncg
from longrank.errors import InputError
from longrank.io.atomic import atomic_path
from longrank.io.json_yaml import read_json
from longrank.tables import read_table

log = logging.getLogger(__name__)

DEFAULT_MEASURES = ["nDCG@10", "RR@10", "AP@100", "nDCG@100", "R@100"]


def qid_sort_key(qid: str):
    """Ids of ASCII digits sort numerically (2 before 10), others lexically after them. Only ASCII digits ('²' and
    '٣' are digits to ``str.isdigit``), and the id itself breaks a tie: '001' and '1' are two queries, never one."""
    return (0, int(qid), qid) if qid.isascii() and qid.isdigit() else (1, 0, qid)


def sorted_qids(qids: Iterable[str]) -> list[str]:
    return sorted(set(qids), key=qid_sort_key)


def parse_measures(names: Sequence[str]) -> list:
    """ir-measures' measures of ``names`` (NCG@k, which it does not have, is computed by evaluate/ncg.py)."""
    measures = []
    for name in names:
        if ncg.cutoff(name):
            continue
        try:
            measures.append(ir_measures.parse_measure(name))
        except Exception as err:  # ir_measures raises several types for unknown names
            raise InputError(f"unknown measure {name!r} (ir_measures could not parse it: {err})") from None
    return measures


def read_folds(path: str | os.PathLike) -> list[dict]:
    folds = read_json(path)
    if isinstance(folds, dict):  # tolerate a single fold written as an object
        folds = [folds]
    if not isinstance(folds, list) or not folds:
        raise InputError(
            f"{path}: expected a non-empty JSON list of folds [{{'train':[...],'dev':[...],'test':[...]}}, ...]"
        )
    for i, fold in enumerate(folds):
        if not isinstance(fold, dict) or "test" not in fold:
            raise InputError(f"{path}: fold {i} has no 'test' list of query ids")
    return folds


def test_queries(folds: Sequence[Mapping]) -> list[str]:
    """Union of every fold's test queries, sorted."""
    return sorted_qids(str(q) for fold in folds for q in fold["test"])


def evaluable_queries(qrels: Mapping[str, Mapping[str, int]], qids: Iterable[str]) -> tuple[list[str], list[str]]:
    """Split ``qids`` into (with at least one relevant document, without any)."""
    kept: list[str] = []
    dropped: list[str] = []
    for q in sorted_qids(qids):
        (kept if any(g > 0 for g in qrels.get(q, {}).values()) else dropped).append(q)
    return kept, dropped


def per_query(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    qids: Iterable[str],
    measures: Sequence[str] = DEFAULT_MEASURES,
    name: str = "run",
) -> pd.DataFrame:
    """Per-query values: index ``query_id`` (sorted), one column per measure (ir_measures' name)."""
    parsed = parse_measures(measures)
    cutoffs = {name: ncg.cutoff(name) for name in measures}
    own = {name: k for name, k in cutoffs.items() if k}
    named = iter(str(m) for m in parsed)
    columns = [name if name in own else next(named) for name in measures]  # in the configured order
    kept, dropped = evaluable_queries(qrels, qids)
    if dropped:
        log.warning(
            "%s: %d test queries have no relevant document in the qrels and are omitted for every system: %s",
            name,
            len(dropped),
            " ".join(dropped),
        )
    missing = [q for q in kept if not run.get(q)]
    if missing:
        log.warning(
            "%s: %d test queries are absent from the run and score 0 on every measure: %s",
            name,
            len(missing),
            " ".join(missing),
        )
    keep = set(kept)
    sub_qrels = {q: dict(qrels[q]) for q in kept}
    sub_run = {q: dict(docs) for q, docs in run.items() if q in keep and docs}
    values = {q: dict.fromkeys(columns, 0.0) for q in kept}
    if sub_run and parsed:
        for metric in ir_measures.iter_calc(parsed, sub_qrels, sub_run):
            if metric.query_id in values:
                v = float(metric.value)
                values[metric.query_id][str(metric.measure)] = 0.0 if math.isnan(v) else v
    for name, k in own.items():
        for q, docs in sub_run.items():
            values[q][name] = ncg.ncg(docs, sub_qrels[q], k)
    frame = pd.DataFrame.from_dict(values, orient="index", columns=columns)
    frame.index.name = "query_id"
    return frame.loc[kept]


def write_eval_tsv(path: str | os.PathLike, frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, sep="\t", index=True, index_label="query_id", float_format="%.6f")


def read_eval_tsv(path: str | os.PathLike) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: per-query evaluation file not found")
    frame = read_table(path, sep="\t")
    if "query_id" not in frame.columns:
        raise InputError(f"{path}: expected a 'query_id' header column")
    frame = frame.set_index("query_id")
    if frame.index.has_duplicates:
        dup = frame.index[frame.index.duplicated()].unique().tolist()
        raise InputError(f"{path}: duplicated query ids {dup[:10]}")
    return frame
