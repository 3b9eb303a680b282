"""Stage ``rerank_run``: rerank any TREC run with an exported model (``longrank export``), outside the workflow.
``longrank rerank --ranker DIR ...`` is the same command (an alias, ``longrank.cli.ALIASES``: ``--ranker`` tells it
from the workflow's own ``rerank`` stage, ``--model ... --checkpoints ...``, :mod:`longrank.rerank`).

    longrank rerank --ranker exported/tk --run any.trec --queries q.tsv --docs docs.jsonl.gz --out new.trec

Queries: ``.tsv`` (``id<TAB>text``, an optional ``query_id<TAB>text`` header) or ``.jsonl[.gz]``; documents:
``.jsonl[.gz]``, ``.tsv`` or TREC SGML, read as the workflow reads a local collection (errors name the file and line).
The top ``--depth`` candidates of each query (default: the model's rerank depth) are reranked; the rest keep their
first-stage order below them, as in the workflow."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from longrank.errors import InputError
from longrank.io.ids import id_problem
from longrank.io.trec_files import write_run
from longrank.results.run_metadata import write_run_metadata
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ranker", required=True, help="a directory `longrank export` wrote")
    parser.add_argument("--run", required=True, help="the TREC run to rerank (qid Q0 docno rank score tag)")
    parser.add_argument("--queries", required=True, help="query texts: .tsv (id<TAB>text) or .jsonl[.gz]")
    parser.add_argument("--docs", required=True, help="document texts: .jsonl[.gz] ({doc_id, text}), .tsv or TREC SGML")
    parser.add_argument("--out", required=True, help="the reranked TREC run to write")
    parser.add_argument(
        "--depth", type=int, help="rerank each query's top DEPTH candidates (default: the model's rerank depth)"
    )
    parser.add_argument("--batch-size", type=int, default=schema_default("rerank.batch_size"))
    parser.add_argument("--device", default=schema_default("device"))
    parser.add_argument("--tag", help="the run's tag column (default: the model's name)")
    parser.add_argument(
        "--trust-code",
        action="store_true",
        help="load an export of your own model class (class: in its config entry), which imports and runs that code",
    )
    parser.add_argument(
        "--interpolate",
        nargs="?",
        const=True,
        default=False,
        metavar="FIRST_STAGE",
        help="mix the model's scores with --run's at the weight the export holds for that first stage (the model "
        "card's {model}+{first stage} row); --run must be that first stage's run",
    )


def run(args) -> None:
    from longrank.api.exported_ranker import load_ranker, read_docs, read_queries, read_ranking, read_scores
    from longrank.runs import top_candidates

    if args.batch_size < 1 or (args.depth is not None and args.depth < 1):
        raise InputError("--batch-size and --depth must be positive integers")
    if args.tag is not None and id_problem(args.tag) is not None:  # before the model loads: the run's 6th column
        raise InputError(f"--tag {args.tag!r} {id_problem(args.tag)}; a tag is one column of a TREC run line")
    for flag in ("run", "queries", "docs"):
        if Path(getattr(args, flag)).is_dir():
            raise InputError(f"--{flag}: {getattr(args, flag)} is a directory; expected a file")
    ranker = load_ranker(args.ranker, args.device, args.batch_size, trust_code=args.trust_code)
    candidates, where = read_ranking(args.run)
    depth = ranker.depth_for(candidates, args.depth)
    wanted = {d for q in candidates for d in top_candidates(candidates, q, depth)}
    weight = (
        ranker.interpolation_weight(None if args.interpolate is True else args.interpolate)
        if args.interpolate
        else None
    )
    reranked = ranker.rerank_run(
        candidates,
        read_queries(args.queries),
        read_docs(args.docs, wanted),
        depth,
        where,
        args.queries,
        args.docs,
        args.interpolate,
        read_scores(args.run) if args.interpolate else None,
    )
    write_run(args.out, reranked, tag=args.tag or ranker.name, first_stage=candidates)
    # provenance beside the run, as the workflow's stages write it (longrank/results/run_metadata.py)
    pipeline = {"reranks": Path(args.run).name, "depth": depth}
    if weight is not None:
        pipeline["interpolation_weight"] = weight
    write_run_metadata(
        args.out,
        {"ranker": str(args.ranker), "type": ranker.type, "depth": depth, "batch_size": args.batch_size},
        name=args.tag or ranker.name,
        pipeline=pipeline,
        upstream=[args.run],
        checkpoints=[Path(args.ranker) / "model.safetensors"],
        data_files={"collection": args.docs, "topics": args.queries, "candidates": args.run},
    )
    log.info(
        "reranked %d queries (top %d each) of %s with %s into %s", len(reranked), depth, args.run, args.ranker, args.out
    )
