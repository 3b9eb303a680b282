"""What one training process trains (``TrainingJob``), and its first steps: checking the job, building the model and
choosing the loss (``prepare``), and, for a model that is not trained (``steps: 0``), keeping it as it is."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from longrank.data.corpus import Corpus
from longrank.errors import InputError
from longrank.io.trec_files import write_run
from longrank.models.checkpoint import load_weights, save_weights
from longrank.config.model_types import artifact_scopes
from longrank.models.registry import build_model, entry_class
from longrank.results.stage_outputs import TrainSummary
from longrank.runs import mean_measure
from longrank.runtime import seed_everything
from longrank.scoring import score_candidates
from longrank.train.fingerprint import built_model_digests
from longrank.train.losses import PAIRWISE, get_loss
from longrank.train.starter import Starter
from longrank.config.train_settings import TrainSettings


@dataclass(frozen=True)
class TrainingJob:
    """What one process trains: model ``name`` (its config ``entry``, built and fingerprinted as given, and its
    ``settings``) on ``fold_index``'s training queries of ``corpus``, reranking ``depth`` ``candidates``; the kept
    model goes to ``out`` and everything else beside it. ``rank`` of ``world`` processes (rank 0 alone writes)."""

    name: str
    entry: dict
    settings: TrainSettings
    corpus: Corpus
    candidates: dict
    fold_index: int
    depth: int
    device: torch.device
    out: Path
    collection_artifacts: Path | None = None
    init: Path | None = None
    # where finished trainings of the same inputs are looked for (train.state_sets.kept_finished_sets): a results
    # folder (its models and history) or the folder of results folders; None: nowhere
    reuse_from: Path | None = None
    # the Snakemake process that started the training (train.starter): training stops when it has ended
    starter: Starter | None = None
    rank: int = 0
    world: int = 1

    @property
    def lead(self) -> bool:
        return self.rank == 0

    @property
    def fold(self) -> dict:
        return self.corpus.folds[self.fold_index]

    @property
    def state_dir(self) -> Path:
        return self.out.parent / "train_state"

    def dev_rerank(self, model) -> tuple[float, dict]:
        """The dev queries' candidates reranked by ``model``: their mean nDCG@10 and the run."""
        dev = self.fold["dev"]
        dev_run = score_candidates(
            model, self.corpus, self.candidates, dev, self.depth, self.settings.eval_batch_size, desc="dev rerank"
        )
        return mean_measure(dev_run, self.corpus.qrels, dev), dev_run


def prepare(job: TrainingJob):
    """Check the job, then build its model (seeded; ``--init``'s weights and the collection artifacts attached) and
    its loss. Returns the model, the built model's digests (rank 0, before any weight changes; for the fingerprint)
    and the loss's name and function."""
    if job.fold_index >= len(job.corpus.folds):
        raise InputError(f"fold {job.fold_index} does not exist; the data has {len(job.corpus.folds)} folds")
    needs_artifacts = "collection" in artifact_scopes(job.entry)
    if needs_artifacts != (job.collection_artifacts is not None):
        raise InputError(
            f"models.{job.name}: "
            + (
                "the model needs its collection artifacts (--collection-artifacts DIR)"
                if needs_artifacts
                else "the model declares no collection artifacts; drop --collection-artifacts"
            )
        )
    settings = job.settings
    seed_everything(settings.seed)
    model = build_model(job.entry, job.corpus, job.name)
    built = built_model_digests(model) if settings.steps and job.lead else {}  # before --init and training
    if job.init is not None:  # fine-tuning a pre-trained model (train.pretrain): every rank loads the same file
        load_weights(model, job.init)
    model = model.to(job.device)
    if job.collection_artifacts is not None:
        model.attach_artifacts(Path(job.collection_artifacts))
    loss_name = settings.loss or entry_class(job.entry).default_loss
    if settings.negative_pairs and (settings.negatives_from != "both" or loss_name not in PAIRWISE):
        raise InputError(
            f"models.{job.name}.train.negative_pairs pairs candidate negatives with collection negatives: it needs "
            f"negatives_from: both (got {settings.negatives_from!r}) and a pairwise loss {list(PAIRWISE)} "
            f"(got {loss_name!r})"
        )
    return model, built, get_loss(loss_name)


def keep_untrained(job: TrainingJob, model) -> None:
    """``steps: 0`` (zero-shot models): the initial weights are the model, with their dev run and a summary."""
    dev_ndcg, dev_run = job.dev_rerank(model)
    out_dir = job.out.parent
    write_run(out_dir / "dev.run", dev_run, tag=job.name)
    TrainSummary(
        model=job.name,
        fold=job.fold_index,
        best_dev_ndcg10=dev_ndcg,
        steps_run=0,
        best_step=0,
        note="no training (steps: 0)",
    ).write(out_dir / "train_summary.json")
    save_weights(model, job.out)
