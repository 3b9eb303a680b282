"""Stage ``rerank``: score every fold's dev and test candidates with that fold's trained model, and write

- ``runs/{model}.run``: the test queries of all folds, reranked by the model alone;
- ``runs/{model}+bm25.run``: the model score interpolated with the first-stage score,
  ``w * model + (1 - w) * first_stage`` after min-max normalising both per query, with ``w`` chosen per
  fold on that fold's *dev* queries (the kept model's dev scores, saved by training; test queries are
  scored once, never used to choose anything);
- ``runs/{model}.interpolation.json``: the chosen weights and the dev curve;
- ``runs/{model}.details.jsonl``: per (test query, doc) explanations when the model gives them (TKL's regions).

Candidates below the rerank depth keep their first-stage order underneath the reranked ones, so recall
at the candidate depth is the first stage's.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from longrank.data.corpus import Corpus
from longrank.io import Run, atomic_path, read_run, write_json, write_run
from longrank.runtime import resolve_device
from longrank.scoring import mean_measure, score_candidates, top_candidates
from longrank.train.checkpoint import load_model

WEIGHTS = [round(w, 2) for w in np.linspace(0.0, 1.0, 11)]


def add_arguments(parser):
    parser.add_argument("--model", required=True)
    parser.add_argument("--model-config", required=True, help="the model's config entry as JSON")
    parser.add_argument("--data", required=True)
    parser.add_argument("--candidates", required=True)
    parser.add_argument("--checkpoints", nargs="+", required=True, help="one model.safetensors per fold, in fold order")
    parser.add_argument("--dev-runs", nargs="+", required=True, help="per fold, the kept model's dev scores written by training")
    parser.add_argument("--stores", nargs="*", default=[], help="per fold, a precomputed document store (MORES Reuse-S1/S2)")
    parser.add_argument("--rerank-depth", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out-dir", required=True, help="results/{dataset}/runs")


def run(args):
    corpus = Corpus(args.data)
    rerank(args.model, json.loads(args.model_config), corpus, read_run(args.candidates), args.checkpoints,
           [read_run(p) for p in args.dev_runs], args.rerank_depth, args.batch_size, resolve_device(args.device), Path(args.out_dir),
           args.stores)


def _minmax(scores: dict[str, float]) -> dict[str, float]:
    lo, hi = min(scores.values()), max(scores.values())
    return {d: (s - lo) / (hi - lo) if hi > lo else 0.0 for d, s in scores.items()}


def interpolate(model_run: Run, first_stage: Run, weight: float) -> Run:
    out = {}
    for qid, scores in model_run.items():
        if not scores:
            continue
        m, f = _minmax(scores), _minmax({d: first_stage[qid][d] for d in scores})
        out[qid] = {d: weight * m[d] + (1 - weight) * f[d] for d in scores}
    return out


def with_tail(reranked: Run, first_stage: Run, qids: list[str]) -> Run:
    """Append the candidates below the rerank depth, in first-stage order, below every reranked document."""
    out = {}
    for qid in qids:
        head = dict(reranked.get(qid, {}))
        tail = [d for d in top_candidates(first_stage, qid, len(first_stage.get(qid, {}))) if d not in head]
        floor = min(head.values(), default=0.0)
        for rank, d in enumerate(tail, start=1):
            head[d] = floor - rank
        if head:
            out[qid] = head
    return out


def rerank(name: str, model_cfg: dict, corpus: Corpus, candidates: Run, checkpoints: list[str], dev_runs: list[Run], depth: int, batch_size: int, device, out_dir: Path,
           stores: list[str] = ()) -> None:
    depth = model_cfg.get("rerank_depth", depth)
    model_run: Run = {}
    interpolated: Run = {}
    choice = {"model": name, "folds": []}
    details: list[dict] = []
    for fold_index, (checkpoint, dev) in enumerate(zip(checkpoints, dev_runs, strict=True)):
        fold = corpus.folds[fold_index]
        model = load_model(checkpoint, model_cfg, corpus, device)
        if stores:  # documents come from the precomputed store instead of being encoded per query
            model.attach_store(stores[fold_index])
        test = score_candidates(model, corpus, candidates, fold["test"], depth, batch_size, desc=f"rerank test fold {fold_index}", details=details)
        curve = {w: mean_measure(interpolate(dev, candidates, w), corpus.qrels, fold["dev"]) for w in WEIGHTS}
        best = max(WEIGHTS, key=lambda w: (curve[w], w))  # ties: more weight on the model
        choice["folds"].append({"fold": fold_index, "weight": best, "dev_ndcg10_by_weight": {str(w): v for w, v in curve.items()}})
        model_run.update(test)
        interpolated.update(interpolate(test, candidates, best))
        del model
    test_qids = corpus.test_queries()
    choice["weight"] = float(np.mean([f["weight"] for f in choice["folds"]]))
    write_run(out_dir / f"{name}.run", with_tail(model_run, candidates, test_qids), tag=name)
    write_run(out_dir / f"{name}+bm25.run", with_tail(interpolated, candidates, test_qids), tag=f"{name}+bm25")
    write_json(out_dir / f"{name}.interpolation.json", choice)
    with atomic_path(out_dir / f"{name}.details.jsonl") as tmp:
        tmp.write_text("".join(json.dumps(d) + "\n" for d in details), encoding="utf-8")
