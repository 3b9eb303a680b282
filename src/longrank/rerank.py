"""Stage ``rerank``: score every fold's test candidates with that fold's trained model, and write

- ``runs/{model}.run``: the test queries of all folds, reranked by the model alone;
- ``runs/{model}.details.jsonl``: per (test query, doc) explanations when the model gives them (TKL's regions).

Candidates below the rerank depth keep their first-stage order underneath the reranked ones, so recall
at the candidate depth is the first stage's. Mixing the model's scores with the first stage's is the
``interpolate`` stage's (:mod:`longrank.interpolate`). A model that declares per-document artifacts
(``longrank.config.model_types``: ``artifacts``) gets them attached before it scores: ``--collection-artifacts`` (built once from the
data) and ``--fold-artifacts`` (one directory per fold, built from that fold's weights).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from longrank.data.corpus import Corpus
from longrank.errors import InputError
from longrank.io.atomic import atomic_path
from longrank.io.trec_files import Run, read_run, write_run
from longrank.models.checkpoint import load_model
from longrank.config.model_types import artifact_scopes
from longrank.precision import AUTOCAST_DTYPES
from longrank.results.run_metadata import write_run_metadata
from longrank.runs import with_tail
from longrank.runtime import add_device_arguments, stage_device
from longrank.scoring import score_candidates
from longrank.config.schema import schema_default


def add_arguments(parser):
    parser.add_argument("--model", required=True)
    parser.add_argument("--model-config", required=True, help="the model's config entry as JSON")
    parser.add_argument("--data", required=True)
    parser.add_argument("--candidates", required=True, help="the run of the first stage the model reranks")
    parser.add_argument("--checkpoints", nargs="+", required=True, help="one model.safetensors per fold, in fold order")
    parser.add_argument(
        "--collection-artifacts",
        nargs="?",
        help="the model's collection-scope artifacts (a directory), when it "
        "declares any (the flag without a value: none)",
    )
    parser.add_argument(
        "--fold-artifacts",
        nargs="*",
        default=[],
        help="the model's fold-scope artifacts, one directory per fold "
        "in fold order (e.g. MORES Reuse-S1/S2 stores), when it declares any",
    )
    parser.add_argument(
        "--rerank-depth",
        type=int,
        required=True,
        help="first-stage candidates scored per query (the model's effective depth)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=schema_default("rerank.batch_size"), help="candidates per forward"
    )
    parser.add_argument(
        "--precision",
        choices=sorted(AUTOCAST_DTYPES),
        default=schema_default("rerank.precision"),
        help="the forward under torch.autocast in bf16 / fp16 (weights stay fp32); fp16 is for GPUs",
    )
    add_device_arguments(parser)
    parser.add_argument("--out-dir", required=True, help="results/{dataset}/runs")


def run(args):
    rerank(
        RerankJob(
            name=args.model,
            entry=json.loads(args.model_config),
            corpus=Corpus(args.data),
            candidates=read_run(args.candidates),
            checkpoints=list(args.checkpoints),
            depth=args.rerank_depth,
            batch_size=args.batch_size,
            device=stage_device(args),
            out_dir=Path(args.out_dir),
            collection_artifacts=Path(args.collection_artifacts) if args.collection_artifacts is not None else None,
            fold_artifacts=[Path(p) for p in args.fold_artifacts],
            precision=args.precision,
            first_stage=Path(args.candidates).name.removesuffix(".run"),
            candidates_path=Path(args.candidates),
        )
    )


@dataclass(frozen=True)
class RerankJob:
    """What one rerank process scores: model ``name`` (its resolved config ``entry``) with one checkpoint per fold of
    ``corpus``, in fold order, on each fold's test queries' top ``depth`` ``candidates`` (the run of
    ``first_stage``), ``batch_size`` at a time under ``precision`` on ``device``; the run and its details go to
    ``out_dir``. The artifact directories are those the model declares: its collection's, and one per fold."""

    name: str
    entry: dict
    corpus: Corpus
    candidates: Run
    checkpoints: list[str]
    depth: int
    batch_size: int
    device: torch.device
    out_dir: Path
    collection_artifacts: Path | None = None
    fold_artifacts: list[Path] = field(default_factory=list)
    precision: str = schema_default("rerank.precision")
    first_stage: str | None = None
    #: the first stage's run file: its ir_metadata record gives the pipeline's earlier components
    candidates_path: Path | None = None

    @property
    def run_path(self) -> Path:
        return self.out_dir / f"{self.name}.run"

    def check(self) -> None:
        """The checkpoints and artifact directories fit the folds and what the model declares."""
        check_artifacts(self.name, self.entry, len(self.checkpoints), self.collection_artifacts, self.fold_artifacts)
        if len(self.checkpoints) != len(self.corpus.folds):
            raise InputError(
                f"models.{self.name}: {len(self.checkpoints)} checkpoints for {len(self.corpus.folds)} folds; give one "
                "per fold, in fold order"
            )


def check_artifacts(name: str, model_cfg: dict, n_folds: int, collection_artifacts, fold_artifacts) -> None:
    """The artifact directories given are exactly those the model declares: a missing one would fail later and
    less clearly, an extra one would be silently ignored."""
    scopes = artifact_scopes(model_cfg)
    if ("collection" in scopes) != (collection_artifacts is not None):
        raise InputError(
            f"models.{name}: "
            + (
                "the model needs its collection artifacts (--collection-artifacts DIR)"
                if "collection" in scopes
                else "the model declares no collection artifacts; drop --collection-artifacts"
            )
        )
    if "fold" in scopes and len(fold_artifacts) != n_folds:
        raise InputError(
            f"models.{name}: the model needs one fold-artifact directory per fold (--fold-artifacts), "
            f"got {len(fold_artifacts)} for {n_folds} checkpoints"
        )
    if "fold" not in scopes and fold_artifacts:
        raise InputError(f"models.{name}: the model declares no fold artifacts; drop --fold-artifacts")


def rerank(job: RerankJob) -> None:
    job.check()
    model_run: Run = {}
    details: list[dict] = []
    for fold_index, checkpoint in enumerate(job.checkpoints):
        # only weights whose manifest vouches for them are scored with (a truncated or changed file is refused)
        model = load_model(checkpoint, job.entry, job.corpus, job.device, require_manifest=True, name=job.name)
        if job.collection_artifacts is not None:
            model.attach_artifacts(Path(job.collection_artifacts))
        if job.fold_artifacts:
            model.attach_artifacts(Path(job.fold_artifacts[fold_index]))
        model_run.update(
            score_candidates(
                model,
                job.corpus,
                job.candidates,
                job.corpus.folds[fold_index]["test"],
                job.depth,
                job.batch_size,
                desc=f"rerank test fold {fold_index}",
                details=details,
                precision=job.precision,
            )
        )
        del model
    write_outputs(job, model_run, details)


def write_outputs(job: RerankJob, model_run: Run, details: list[dict]) -> None:
    """The run (the first stage's tail below the reranked candidates), its metadata and the details."""
    test_queries = job.corpus.test_queries()
    write_run(
        job.run_path, with_tail(model_run, job.candidates, test_queries), tag=job.name, first_stage=job.candidates
    )
    # how it was scored belongs to the run too: a bf16 run differs from an fp32 one in its last digits
    scoring = {"rerank_depth": job.depth, "rerank_precision": job.precision, "rerank_batch_size": job.batch_size}
    write_run_metadata(
        job.run_path,
        {**job.entry, **scoring},
        data_dir=job.corpus.dir,
        pipeline={"reranks": job.first_stage or "the given candidates", "depth": job.depth},
        upstream=[job.candidates_path] if job.candidates_path is not None else [],
        checkpoints=job.checkpoints,
    )
    with atomic_path(job.out_dir / f"{job.name}.details.jsonl") as tmp:
        tmp.write_text("".join(json.dumps(d) + "\n" for d in details), encoding="utf-8")
