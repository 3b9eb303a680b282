"""Stage ``interpolate``: a reranked run mixed with the first stage it reranked, ``runs/{model}+{first_stage}.run``.

``w * model + (1 - w) * first_stage`` after min-max normalising both per query, over the documents the model
reranked. ``w`` is chosen per fold on that fold's *dev* queries, from the kept model's dev scores that
training saved (test queries are scored once and never choose anything); ties go to more weight on the
model. ``runs/{model}+{first_stage}.interpolation.json`` keeps the chosen weights and the dev curves
(``longrank.results.stage_outputs.Interpolation``, the shape the report reads).
Candidates below the rerank depth keep their first-stage order underneath, as in the model's own run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from longrank.data.corpus import Corpus
from longrank.io.trec_files import Run, read_run, write_run
from longrank.results.stage_outputs import FoldWeight, Interpolation
from longrank.results.run_metadata import write_run_metadata
from longrank.runs import mean_measure, top_candidates, with_tail

WEIGHTS = [round(w, 2) for w in np.linspace(0.0, 1.0, 11)]


def add_arguments(parser):
    parser.add_argument(
        "--model-run", required=True, help="runs/{model}.run: the test queries reranked by the model alone"
    )
    parser.add_argument(
        "--dev-runs", nargs="+", required=True, help="per fold, the kept model's dev scores written by training"
    )
    parser.add_argument("--candidates", required=True, help="the first stage the model reranked")
    parser.add_argument(
        "--rerank-depth", type=int, required=True, help="how many candidates per query the model scored"
    )
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True, help="runs/{model}+{first_stage}.run; the weights go beside it")


def run(args):
    corpus = Corpus(args.data)
    name = args.out.rsplit("/", 1)[-1].removesuffix(".run")
    candidates = read_run(args.candidates)
    mixed, folds = interpolate_folds(
        read_run(args.model_run),
        [read_run(p) for p in args.dev_runs],
        candidates,
        args.rerank_depth,
        corpus,
    )
    write_run(args.out, mixed, tag=name, first_stage=candidates)
    write_run_metadata(
        args.out,
        {
            "method": "interpolate",
            "model_run": args.model_run,
            "candidates": args.candidates,
            "rerank_depth": args.rerank_depth,
            "weights": [f.weight for f in folds],
            "weights_chosen_on": "each fold's dev queries",
        },
        data_dir=args.data,
        pipeline={
            "interpolates": [
                Path(args.model_run).name.removesuffix(".run"),
                Path(args.candidates).name.removesuffix(".run"),
            ]
        },
        upstream=[args.model_run, args.candidates],
        checkpoints=[str(Path(run).with_name("model.safetensors")) for run in args.dev_runs],
    )
    weight = float(np.mean([f.weight for f in folds]))
    Interpolation(system=name, weight=weight, folds=folds).write(args.out.removesuffix(".run") + ".interpolation.json")


def minmax(scores: dict[str, float]) -> dict[str, float]:
    lo, hi = min(scores.values()), max(scores.values())
    return {d: (s - lo) / (hi - lo) if hi > lo else 0.0 for d, s in scores.items()}


def interpolate(model_run: Run, first_stage: Run, weight: float) -> Run:
    out = {}
    for qid, scores in model_run.items():
        if not scores:
            continue
        m, f = minmax(scores), minmax({d: first_stage[qid][d] for d in scores})
        out[qid] = {d: weight * m[d] + (1 - weight) * f[d] for d in scores}
    return out


def interpolate_folds(
    model_run: Run, dev_runs: list[Run], candidates: Run, depth: int, corpus: Corpus
) -> tuple[Run, list[FoldWeight]]:
    """The interpolated test run of all folds and, per fold, the weight chosen on its dev queries."""
    # the documents the model scored: its top `depth`, above the first-stage tail that rerank appended
    reranked = {q: {d: model_run[q][d] for d in top_candidates(model_run, q, depth)} for q in model_run}
    mixed: Run = {}
    folds = []
    for fold_index, dev in enumerate(dev_runs):
        fold = corpus.folds[fold_index]
        curve = {w: mean_measure(interpolate(dev, candidates, w), corpus.qrels, fold["dev"]) for w in WEIGHTS}
        best = max(WEIGHTS, key=lambda w: (curve[w], w))  # ties: more weight on the model
        folds.append(
            FoldWeight(fold=fold_index, weight=best, dev_ndcg10_by_weight={str(w): v for w, v in curve.items()})
        )
        mixed.update(interpolate({q: reranked[q] for q in fold["test"] if q in reranked}, candidates, best))
    return with_tail(mixed, candidates, corpus.test_queries()), folds
