"""Stage ``evaluate``: per-query measures of one TREC run over the test queries of all folds."""

from __future__ import annotations

import argparse
import logging

from longrank.evaluate.satisfiable import check_satisfiable
from longrank.evaluate.metrics import DEFAULT_MEASURES, per_query, read_folds, test_queries, write_eval_tsv
from longrank.io.trec_files import read_qrels, read_run

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run",
        required=True,
        nargs="+",
        help="TREC run to evaluate; several (a model's training seeds): each query's mean over their measures",
    )
    parser.add_argument("--qrels", required=True, help="TREC qrels (gain > 0 = relevant)")
    parser.add_argument(
        "--folds", required=True, help="folds.json; the evaluated queries are the union of the folds' test lists"
    )
    parser.add_argument("--out", required=True, help="output TSV: query_id then one column per measure")
    parser.add_argument(
        "--measures", nargs="+", default=DEFAULT_MEASURES, help="ir_measures names (default: %(default)s)"
    )


def run(args: argparse.Namespace) -> None:
    qrels = read_qrels(args.qrels)
    check_satisfiable(args.measures, qrels, args.qrels)
    qids = test_queries(read_folds(args.folds))
    frames = [per_query(read_run(path), qrels, qids, args.measures, name=str(path)) for path in args.run]
    # a seeded model's system: the paired tests compare each query's mean over the seeds (every frame has the same
    # queries in the same order, per_query's rows being the test queries)
    frame = frames[0] if len(frames) == 1 else sum(frames[1:], frames[0]) / len(frames)
    write_eval_tsv(args.out, frame)
    means = ", ".join(f"{c}={frame[c].mean():.4f}" for c in frame.columns)
    over = f" (each query's mean over {len(frames)} runs)" if len(frames) > 1 else ""
    log.info("%s: %d queries evaluated%s: %s", " ".join(args.run), len(frame), over, means)
