"""Stage ``data``: load the configured collection, map grades to gains, formulate queries, split them,
and write ``results/{dataset}/data/`` (the format ``data/corpus.py`` documents)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from longrank.data import query_sets
from longrank.data.collections import load_ir_datasets, load_local
from longrank.data.docstore import DocStore, write_docs
from longrank.data.grades import check_gain_order, integer_grades, relevance_record
from longrank.data.queries import formulate
from longrank.data.splits import make_folds
from longrank.data.words import tokenize, write_doc_freq
from longrank.errors import InputError
from longrank.io.atomic import names_full_disk, replace_directory, umask_mode, write_text
from longrank.io.json_yaml import write_json
from longrank.io.ids import ID_RULE, id_problem
from longrank.io.trec_files import write_qrels
from longrank.progress import progress
from longrank.config.schema import schema_default, schema_defaults

log = logging.getLogger(__name__)


def add_arguments(parser):
    parser.add_argument("--dataset", required=True, help="the config's dataset block as JSON")
    parser.add_argument("--query-formulation", required=True, help="the config's query_formulation block as JSON")
    parser.add_argument("--splits", required=True, help="the config's splits block as JSON")
    parser.add_argument("--out-dir", required=True)


def run(args):
    prepare(json.loads(args.dataset), json.loads(args.query_formulation), json.loads(args.splits), Path(args.out_dir))


def _examples(ids, limit=5) -> str:
    ids = sorted(ids)
    return ", ".join(map(repr, ids[:limit])) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _query_roles(dataset: dict, splits: dict, own_train: bool, own_dev: bool) -> dict[str, str]:
    """Which queries trained, chose (dev) and tested, in words: stats.json and the report's provenance."""
    part = f"of the collection's judged queries (splits: {splits['method']}, seed {splits['seed']})"
    train = [] if own_dev else [f"the train part {part}"]
    every = "every other" if query_sets.held_out(dataset, "dev") else "every"  # the dev sample is held out of them
    return {
        "train": " and ".join(train + ([query_sets.source_of(dataset, "train")] if own_train else [])),
        "dev": query_sets.source_of(dataset, "dev") if own_dev else f"the dev part {part}",
        "test": f"{every} judged query of the collection" if own_dev else f"the test part {part}",
    }


def prepare(dataset: dict, query_formulation: dict, splits: dict, out_dir: Path) -> None:
    """Write the data directory, or nothing: every file is made in a staging directory beside ``out_dir`` and
    moved in only when all checks passed. Documents stream from the source to ``docs.jsonl`` and its index
    (``data/docstore.py``); what stays in memory is per document an id and a length, not its text."""
    # the workflow's config has every default filled in; a hand call may leave some out, which the schema's fill
    query_formulation = {**schema_defaults("query_formulation"), **query_formulation}
    splits = {**schema_defaults("splits"), **splits}
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        with names_full_disk(out_dir, staging):  # a full disk names data/<file>, not the staging directory's
            _prepare(dataset, query_formulation, splits, staging)
            _keep_others(out_dir, staging)
            os.chmod(staging, umask_mode(0o777))  # mkdtemp makes it 0700
            replace_directory(staging, out_dir)  # whole: a kill while moving files one by one left old and new mixed
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _keep_others(out_dir: Path, staging: Path) -> None:
    """Files of the old directory that this stage does not write (word2vec.txt, its own stage's output) go into the
    new one too, as hard links (the old directory is removed only after the new one is in place)."""
    if not out_dir.is_dir():
        return
    for path in out_dir.iterdir():
        if path.is_file() and not (staging / path.name).exists():
            try:
                os.link(path, staging / path.name)
            except OSError:  # a file system without hard links
                shutil.copy2(path, staging / path.name)


def _prepare(dataset: dict, query_formulation: dict, splits: dict, out_dir: Path) -> None:
    if dataset.get("source", schema_default("dataset.source")) == "ir_datasets":
        docs_iter, queries_iter, raw_qrels, qrels_defs, doc_count = load_ir_datasets(
            dataset["id"], dataset.get("doc_fields"), dataset.get("query_field")
        )
    else:
        docs_iter, queries_iter, raw_qrels, qrels_defs, doc_count = load_local(dataset)
    lengths, empty, word_doc_freq = _write_documents(docs_iter, doc_count, out_dir / "docs.jsonl")
    docs = DocStore(out_dir / "docs.jsonl")
    _check_documents(dataset, lengths, empty)
    queries = _read_queries(queries_iter)

    # Grades -> gains; grades not listed keep their value. Judgments with an ``exclude_grades`` grade are not
    # judgments of an answer but mark a document to take out of that query's rankings (Cranfield's -1: the
    # paper the question was written from; see config/config.yaml).
    dataset = {**dataset, "gains": integer_grades(dataset.get("gains") or {})}
    gain_map = {int(k): int(v) for k, v in dataset["gains"].items()}
    exclude_grades = {int(g) for g in dataset.get("exclude_grades") or ()}
    qrels, excluded, grades_seen, missing_test = _judgments(raw_qrels, queries, docs, empty, gain_map, exclude_grades)
    relevance = _relevance(dataset, grades_seen, exclude_grades, excluded)
    # Queries that only train, and queries that only choose (dev), over the same documents (data/query_sets.py).
    evaluated_ids = set(queries)
    train_only, missing_train = query_sets.add_query_set(
        dataset, "train", queries, qrels, docs, lambda g: gain_map.get(g, g)
    )
    dev_only, missing_dev = query_sets.add_query_set(dataset, "dev", queries, qrels, docs, lambda g: gain_map.get(g, g))
    if query_sets.held_out(dataset, "dev"):  # the collection's own queries: the sample chooses, the rest test
        evaluated_ids -= dev_only
    if dev_only and not train_only:
        raise InputError(
            "dataset.dev_id / dev_queries: a dev set of its own makes every judged query a test query, so the "
            "models need training queries of their own too (dataset.train_id or train_queries + train_qrels)"
        )
    formulated = _formulate(queries, docs, query_formulation)
    evaluable = _evaluable(formulated, evaluated_ids, qrels)
    folds = _folds(dataset, splits, train_only, dev_only, evaluable)
    stats = {
        "source": _source(dataset),
        "num_docs": len(lengths),
        "empty_docs_dropped": len(empty),
        "num_queries": len(formulated),
        "num_evaluable_queries": len(evaluable),
        "num_judgments": sum(len(j) for j in qrels.values()),
        "relevant_per_query": float(np.mean([sum(g > 0 for g in qrels[q].values()) for q in evaluable])),
        "doc_words": _summary(np.array(list(lengths.values()))),
        "query_words": {"mean": float(np.mean([len(t.split()) for t in formulated.values()]))},
        "relevance": relevance,
        # judgments naming a document the collection lacks: dropped and counted per query set (a query left without a
        # relevant document in the collection is not evaluated, trained or sampled for dev), the report says so
        "missing_judged_documents": {
            role: record
            for role, record in (("test", missing_test), ("train", missing_train), ("dev", missing_dev))
            if record["judgments"]
        },
        "query_sets": _query_roles(dataset, splits, bool(train_only), bool(dev_only)),
        "qrels_defs": {str(k): v for k, v in (qrels_defs or {}).items()},
        "folds": [{k: len(v) for k, v in f.items()} for f in folds],
    }
    _write_files(out_dir, formulated, qrels, excluded, lengths, word_doc_freq, folds, stats)


def _write_documents(docs_iter, doc_count, path: Path) -> tuple[dict[str, int], set[str], Counter[str]]:
    """Stream the non-empty documents to ``path``; each kept one's length in words, the ids of the empty ones
    (dropped), and the word-level models' vocabulary, counted here once for every job."""
    lengths: dict[str, int] = {}  # doc id -> words, of the documents kept
    empty: set[str] = set()  # ids of empty documents, dropped
    word_doc_freq: Counter[str] = Counter()

    def non_empty():
        for doc_id, text in progress(docs_iter, total=doc_count, desc="reading documents", unit="doc", mininterval=2):
            if doc_id in empty:
                raise InputError(f"duplicate document id {doc_id!r} in the collection")
            if text.strip():
                lengths[doc_id] = len(text.split())
                word_doc_freq.update(set(tokenize(text)))
                yield doc_id, text
            else:
                empty.add(doc_id)

    write_docs(path, non_empty())
    return lengths, empty, word_doc_freq


def _check_documents(dataset: dict, lengths: dict[str, int], empty: set[str]) -> None:
    """No id both empty and not, empty documents only where ``dataset.empty_documents`` allows, and at least one
    document left."""
    if empty & lengths.keys():
        raise InputError(f"duplicate document id {_examples(empty & lengths.keys())} in the collection")
    if empty:
        if dataset.get("empty_documents", schema_default("dataset.empty_documents")) == "error":
            raise InputError(
                f"{len(empty)} empty documents: {_examples(empty)} (set dataset.empty_documents: drop to skip them)"
            )
        log.warning("dropping %d empty documents: %s", len(empty), _examples(empty))
    if not lengths:
        raise InputError("the collection has no non-empty documents")


def _read_queries(queries_iter) -> dict[str, str]:
    queries: dict[str, str] = {}
    for qid, text in queries_iter:
        problem = id_problem(qid)  # the readers of io.py checked a local file's; an ir_datasets id arrives unchecked
        if problem is not None:
            raise InputError(f"query id {qid!r} {problem}; {ID_RULE}")
        if qid in queries:
            raise InputError(
                f"duplicate query id {qid!r} in the queries (texts {queries[qid][:40]!r} and {text[:40]!r})"
            )
        queries[qid] = text
    return queries


def _judgments(
    raw_qrels: dict, queries: dict[str, str], docs, empty: set[str], gain_map: dict[int, int], exclude_grades: set[int]
) -> tuple[dict[str, dict[str, int]], dict[str, set[str]], Counter[int], dict]:
    """The qrels as gains, the documents excluded per query (an ``exclude_grades`` grade), how many judgments each
    grade had, and the judgments of documents the collection lacks (``query_sets.missing_documents``: dropped,
    counted and logged; a document dropped as empty is not one of them). A judgment naming an unknown query is an
    error (the qrels of another collection, or a wrong query file)."""
    grades_seen: Counter[int] = Counter()
    excluded: dict[str, set[str]] = {}
    qrels: dict[str, dict[str, int]] = {}
    unknown_queries = set()
    missing: dict[str, dict[str, int]] = {}  # query -> judged document the collection lacks -> grade
    for qid, judged in raw_qrels.items():
        if qid not in queries:
            unknown_queries.add(qid)
            continue
        for doc_id, grade in judged.items():
            if doc_id not in docs:
                if doc_id not in empty:
                    missing.setdefault(qid, {})[doc_id] = gain_map.get(grade, grade)
                continue
            grades_seen[grade] += 1
            if grade in exclude_grades:
                excluded.setdefault(qid, set()).add(doc_id)
                continue
            qrels.setdefault(qid, {})[doc_id] = gain_map.get(grade, grade)
    if unknown_queries:
        raise InputError(
            f"qrels name {len(unknown_queries)} queries that are not in the query file: {_examples(unknown_queries)}"
        )
    return qrels, excluded, grades_seen, query_sets.missing_documents("dataset.qrels", missing, qrels)


def _relevance(dataset: dict, grades_seen: Counter[int], exclude_grades: set[int], excluded: dict) -> dict:
    """stats.json's ``relevance``: the map over the grades the qrels really hold (unlisted ones at their own value);
    one that reverses their order is applied only where the description says so on purpose (data/grades.py)."""
    check_gain_order(
        dataset, [g for g in grades_seen if g not in exclude_grades], where="dataset.gains over the qrels' grades"
    )
    relevance = relevance_record(dataset, grades_seen, sum(len(v) for v in excluded.values()))
    log.info(
        "grades -> gains applied: %s (configured: %s%s); excluded grades %s (%d judgments); judgments by grade %s",
        relevance["gains"],
        relevance["configured_gains"] or "none, every grade its own gain",
        ", reversing the grades' order on purpose" if relevance["reverses_grades"] else "",
        relevance["exclude_grades"],
        relevance["excluded_judgments"],
        relevance["judgments_by_grade"],
    )
    return relevance


def _formulate(queries: dict[str, str], docs, query_formulation: dict) -> dict[str, str]:
    """The queries as ``query_formulation`` words them; none may come out empty."""
    formulated = formulate(queries, docs, query_formulation["method"], query_formulation["n"])
    empty_queries = [q for q, t in formulated.items() if not t.strip()]
    if empty_queries:
        method = query_formulation["method"]
        raise InputError(
            f"{len(empty_queries)} queries are empty after query formulation ({method}): {_examples(empty_queries)}; "
            "their text has no term it keeps (tfidf_terms drops stop words and tokens without a letter). "
            "Fix or remove these queries, or set query_formulation.method: full"
        )
    return formulated


def _evaluable(formulated: dict[str, str], evaluated_ids: set[str], qrels: dict) -> list[str]:
    """The collection's queries with a relevant judged document: the ones the splits share out."""
    evaluable = [q for q in formulated if q in evaluated_ids and any(g > 0 for g in qrels.get(q, {}).values())]
    if not evaluable:  # before the splits, which would only say that 0 queries are too few
        raise InputError(
            f"dataset.qrels: no query of the collection has a relevant judged document ({len(qrels)} of its "
            f"{len(evaluated_ids)} queries judged, every judgment grade <= 0 after dataset.gains), so none can be "
            "tested; check that the qrels are this collection's and the grade column (4th)"
        )
    if len(evaluated_ids) > len(evaluable):
        log.info(
            "%d of %d queries have no relevant document and are left out of the splits",
            len(evaluated_ids) - len(evaluable),
            len(evaluated_ids),
        )
    return evaluable


def _folds(dataset: dict, splits: dict, train_only, dev_only, evaluable: list[str]) -> list[dict]:
    """The folds: the dataset's own training and dev queries with every judged query a test query, or the splits'
    parts of the judged queries (plus any training queries of the dataset's own)."""
    if dev_only:
        log.info(
            "the splits are the dataset's own: %d training, %d dev (%s), every one of the %d judged queries a test query",
            len(train_only),
            len(dev_only),
            query_sets.source_of(dataset, "dev"),
            len(evaluable),
        )
        return query_sets.folds_with([], train_only, dev_only, evaluable)
    folds = make_folds(
        evaluable,
        splits["method"],
        splits["dev"],
        splits["test"],
        splits["k"],
        splits["seed"],
    )
    return query_sets.folds_with(folds, train_only, set(), evaluable)


def _source(dataset: dict) -> dict:
    """Where the collection came from, for each run's ir_metadata record (``data.test collection``): its ir_datasets
    ids, or the local files' paths as configured."""
    source = dataset.get("source", schema_default("dataset.source"))
    if source == "ir_datasets":
        keys: tuple[str, ...] = ("id", "train_id", "dev_id")
    else:
        keys = ("docs", "queries", "qrels", "train_queries", "train_qrels", "dev_queries", "dev_qrels")
    return {"source": source, **{key: str(dataset[key]) for key in keys if dataset.get(key)}}


def _summary(words: np.ndarray) -> dict:
    return {
        "mean": float(words.mean()),
        "median": float(np.median(words)),
        "p90": float(np.percentile(words, 90)),
        "max": int(words.max()),
    }


def _write_files(
    out_dir: Path,
    formulated: dict[str, str],
    qrels: dict,
    excluded: dict[str, set[str]],
    lengths: dict[str, int],
    word_doc_freq: Counter[str],
    folds: list[dict],
    stats: dict,
) -> None:
    write_text(
        out_dir / "queries.tsv",
        "query_id\ttext\n" + "".join(f"{q}\t{' '.join(t.split())}\n" for q, t in sorted(formulated.items())),
    )
    write_qrels(out_dir / "qrels.txt", qrels)
    write_text(
        out_dir / "excluded.tsv",
        "query_id\tdoc_id\n" + "".join(f"{q}\t{d}\n" for q in sorted(excluded) for d in sorted(excluded[q])),
    )
    write_text(out_dir / "doc_lengths.tsv", "doc_id\twords\n" + "".join(f"{d}\t{n}\n" for d, n in lengths.items()))
    write_doc_freq(out_dir / "word_doc_freq.tsv", word_doc_freq)
    write_json(out_dir / "folds.json", folds)
    write_json(out_dir / "stats.json", stats)
    log.info(
        "%d documents (median %d words), %d queries, %d evaluable, folds %s",
        len(lengths),
        stats["doc_words"]["median"],
        len(formulated),
        stats["num_evaluable_queries"],
        stats["folds"],
    )
