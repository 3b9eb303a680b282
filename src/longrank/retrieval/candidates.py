"""Stage ``candidates``: one first stage's ranked candidates of every query, ``candidates/{name}.run``.

Methods (``first_stages[].method``):

- ``bm25``: bm25s over the prepared collection (:mod:`longrank.retrieval.bm25`), in memory;
- ``pisa``: BM25 through PISA from the index the ``pisa_index`` stage built once for the collection and its index
  settings (:mod:`longrank.retrieval.pisa`): a collection larger than memory;
- ``scoreddocs``: the collection's own ranked lists from ir_datasets (TREC DL ships the official top 100 for
  its test queries and for MS MARCO's training queries): the papers' candidates without indexing 3.2M documents;
- ``run_file``: a TREC run the user brings (another system's output, a dense retriever's, ...);
- ``model``: a trained model ranks the whole collection through its per-fold impact index (a query-term-
  independent model such as NDRM: :mod:`longrank.retrieval.impact`); each query is ranked by the model of the
  fold that tests it;
- ``hdct``: BM25 over the term weights HDCT predicts (:mod:`longrank.retrieval.hdct_index`), from the index the ``hdct``
  stage built once for the collection (it never saw a query).

Beside the run, ``candidates/{name}.stats.json`` keeps what the first stage cost (index and query time,
index size) for the report.

Every method keeps each query's top ``top_k`` after taking out the documents excluded for it
(``dataset.exclude_grades``), so reranking and evaluation see the same candidates whatever produced them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from longrank.data.collections import ir_datasets_downloads
from longrank.data.corpus import Corpus
from longrank.errors import InputError
from longrank.io.json_yaml import write_json
from longrank.io.trec_files import Run, read_ranked_run, write_run
from longrank.results.run_metadata import write_run_metadata
from longrank.retrieval import bm25, hdct_index, pisa
from longrank.retrieval.first_stage import FirstStage, RunFileSettings, parse_first_stage
from longrank.retrieval.impact import impact_run

log = logging.getLogger(__name__)


def add_arguments(parser):
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--first-stage", required=True, help="one entry of the config's first_stages as JSON")
    parser.add_argument(
        "--dataset", default="{}", help="the config's dataset block as JSON (scoreddocs reads its ir_datasets ids)"
    )
    parser.add_argument(
        "--artifacts",
        nargs="*",
        default=[],
        help="method model: the model's per-fold artifact directories, in fold order; hdct / pisa: the index",
    )
    parser.add_argument(
        "--out", required=True, help="candidates/{name}.run; the stats go beside it as {name}.stats.json"
    )


def run(args):
    stage = parse_first_stage(json.loads(args.first_stage))
    corpus = Corpus(args.data)
    excluded = corpus.excluded
    ranked, stats = retrieve(
        stage,
        corpus,
        json.loads(args.dataset),
        depth=stage.top_k + max((len(v) for v in excluded.values()), default=0),
        artifacts=[Path(p) for p in args.artifacts],
    )
    write_run(Path(args.out), without_excluded(ranked, excluded, stage.top_k), tag=stage.name)
    write_run_metadata(args.out, stage.entry, data_dir=args.data, pipeline={"retrieves": stage.entry.get("method")})
    write_json(Path(args.out).with_suffix(".stats.json"), {"method": stage.method, **stats})


def retrieve(
    stage: FirstStage | dict, corpus: Corpus, dataset: dict, depth: int, artifacts: Sequence[Path] = ()
) -> tuple[Run, dict]:
    """The first stage's ranking of every query (at least ``depth`` documents each where the method allows) and
    what it cost (timings, index size; empty where the ranking came ready-made). ``stage``: parsed, or an entry."""
    if isinstance(stage, dict):
        stage = parse_first_stage(stage)
    methods = {
        bm25.METHOD: lambda: bm25.candidates(stage.settings, corpus, depth),
        pisa.METHOD: lambda: pisa.candidates(stage, corpus, depth, artifacts),
        "scoreddocs": lambda: scoreddocs_run(
            _scoreddocs_datasets(dataset), corpus.queries, corpus.docs, f"first stage {stage.name!r}"
        ),
        "run_file": lambda: run_file(stage, corpus),
        "model": lambda: impact_run(artifacts, corpus.folds, corpus.queries, depth),
        "hdct": lambda: _hdct_run(artifacts, corpus.queries, depth),
    }
    return methods[stage.method]()


def _hdct_run(artifacts: Sequence[Path], queries: dict, depth: int) -> tuple[Run, dict]:
    if len(artifacts) != 1:
        raise InputError(
            "first stage method hdct: give its index directory (--artifacts results/{dataset}/hdct/{name})"
        )
    return hdct_index.retrieve(artifacts[0], queries, depth)


def run_file(stage: FirstStage, corpus: Corpus) -> tuple[Run, dict]:
    settings = stage.settings
    assert isinstance(settings, RunFileSettings), "a run_file first stage's settings (parse_first_stage)"
    path = Path(settings.path)
    if not path.exists():
        raise InputError(
            f"config key first_stages.{stage.name}.path: run file {path} not found (relative to the working directory, {Path.cwd()})"
        )
    if path.is_dir():
        raise InputError(f"config key first_stages.{stage.name}.path: {path} is a directory; expected a TREC run file")
    ranked, ties = read_ranked_run(path, settings.scores, key=f"first_stages.{stage.name}.scores")
    if ties:
        log.warning(
            "%s: %d documents have the score of the document ranked above them; kept in the file's rank order "
            "(their scores made distinct in that order). trec_eval orders tied scores by document id, so it would "
            "evaluate this file as another ranking",
            path,
            ties,
        )
    return within_collection(ranked, corpus.queries, corpus.docs, source=str(path))


def _scoreddocs_datasets(dataset: dict) -> list:
    import ir_datasets

    ids = [
        dataset[k] for k in ("id", "train_id", "dev_id") if dataset.get(k)
    ]  # the dev and training queries' lists too
    if dataset.get("source") == "local" or not ids:
        raise InputError(
            "first stage method scoreddocs: needs dataset.source ir_datasets (a local collection has no scored documents; use run_file)"
        )
    loaded = []
    for dataset_id in ids:
        ds = ir_datasets.load(dataset_id)
        if not ds.has_scoreddocs():
            raise InputError(
                f"first stage method scoreddocs: ir_datasets {dataset_id!r} provides no scoreddocs; use bm25 or run_file"
            )
        loaded.append(ds)
    return loaded


def scoreddocs_run(datasets, queries: dict, docs: Mapping[str, str], source: str) -> tuple[Run, dict]:
    """The ranked lists of ``datasets`` (ir_datasets objects: ``scoreddocs_iter()`` yields ``query_id, doc_id,
    score``) restricted to the prepared queries and documents, and what was dropped (``within_collection``)."""
    ranked: Run = {}
    for ds in datasets:
        with ir_datasets_downloads(ds.dataset_id()):
            for sd in ds.scoreddocs_iter():
                if sd.query_id in queries:
                    ranked.setdefault(sd.query_id, {})[sd.doc_id] = float(sd.score)
    return within_collection(ranked, queries, docs, source)


def within_collection(ranked: Run, queries: dict, docs: Mapping[str, str], source: str) -> tuple[Run, dict]:
    """Keep what the prepared collection knows: queries it has, documents it has (empty documents were dropped),
    and count what was dropped (the candidates' stats.json): the ranked entries naming a document the collection
    lacks, those documents, the queries it does not have. A ranking that shares no query or no document with the
    collection is an error, not an empty run."""
    known_queries = {q: scores for q, scores in ranked.items() if q in queries}
    if not known_queries:
        raise InputError(
            f"{source}: none of its {len(ranked)} query ids is a query of the collection "
            f"(e.g. {sorted(ranked)[:3]}; the collection has e.g. {sorted(queries)[:3]})"
        )
    out: Run = {}
    unknown_docs: set[str] = set()
    dropped_entries = 0
    for q, scores in known_queries.items():
        unknown = [d for d in scores if d not in docs]
        unknown_docs.update(unknown)
        dropped_entries += len(unknown)
        kept = {d: s for d, s in scores.items() if d in docs}
        if kept:
            out[q] = kept
    if not out:
        raise InputError(
            f"{source}: none of its document ids is a document of the collection (e.g. {sorted(unknown_docs)[:3]})"
        )
    if unknown_docs:
        log.warning(
            "%s: %d document ids not in the collection dropped (e.g. %s), %d ranked entries",
            source,
            len(unknown_docs),
            sorted(unknown_docs)[:3],
            dropped_entries,
        )
    if len(known_queries) < len(ranked):
        log.warning("%s: %d queries not in the collection ignored", source, len(ranked) - len(known_queries))
    missing = len(queries) - len(out)
    if missing:
        log.warning(
            "%s: %d of the collection's %d queries have no candidates (they score 0)", source, missing, len(queries)
        )
    dropped = {
        "unknown_documents_dropped": len(unknown_docs),
        "unknown_document_entries_dropped": dropped_entries,
        "unknown_queries_ignored": len(ranked) - len(known_queries),
    }
    return out, dropped


def without_excluded(run: dict, excluded: dict[str, set[str]], top_k: int) -> dict:
    """Each query's top ``top_k`` documents after taking out the ones excluded for it."""
    out = {}
    for qid, scores in run.items():
        kept = [
            (d, s) for d, s in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])) if d not in excluded.get(qid, ())
        ]
        out[qid] = dict(kept[:top_k])
    return out
