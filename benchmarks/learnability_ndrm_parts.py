"""Diagnostic of the learnability study (docs/studies/learnability.md): an NDRM3's test nDCG@10 from its whole score,
from its latent (Conformer-Kernel) part alone and from its explicit (BM25-like) part alone, scored directly from its
trained weights over BM25's top 20 (the whole score equals the workflow's run, which reads the impact index).

    PYTHONPATH=src python benchmarks/learnability_ndrm_parts.py <workdir>/results/learnability ndrm3_glove [overlay.yaml ...]

(the overlays: further config files the run was given after config/studies/learnability.yaml, for an entry of theirs)
"""

import sys
from pathlib import Path

import ir_measures
import torch
from ir_measures import nDCG

from longrank.validation.validate import resolve_likes, validate_config
from longrank.config.files import merged
from longrank.data.corpus import Corpus
from longrank.io.trec_files import read_run
from longrank.models.checkpoint import load_model
from longrank.models.ndrm import NDRM
from longrank.scoring import score_candidates


def main(results: Path, name: str, overlays: list[str]) -> None:
    models = validate_config(merged(("config/studies/learnability.yaml", *overlays)))["models"]
    resolve_likes(models)
    corpus = Corpus(results / "data")
    candidates = read_run(results / "candidates" / "bm25.run")
    checkpoint = str(results / "models" / name / "fold0" / "model.safetensors")
    model = load_model(checkpoint, models[name], corpus, torch.device("cpu"), require_manifest=True)
    test = corpus.folds[0]["test"]
    qrels = [q for q in ir_measures.read_trec_qrels(str(results / "data" / "qrels.txt")) if q.query_id in set(test)]
    whole = NDRM._combine
    parts = {
        "whole": whole,
        "latent": lambda self, latent, explicit, mask: latent,
        "explicit": lambda self, latent, explicit, mask: explicit,
    }
    for part, combine in parts.items():
        NDRM._combine = combine
        run = score_candidates(model, corpus, candidates, test, 20, 32, desc=part)
        scored = [ir_measures.ScoredDoc(q, d, s) for q, docs in run.items() for d, s in docs.items()]
        print(name, part, round(ir_measures.calc_aggregate([nDCG @ 10], qrels, scored)[nDCG @ 10], 4), flush=True)
    NDRM._combine = whole


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
