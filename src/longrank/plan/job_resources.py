"""Each GPU job's request to the cluster (time, host memory, a large-GPU constraint), estimated from the GPU bill
(docs/gpu-bill.md) and the job's resolved settings.

A profile's resource expressions cannot tell one model from another, so one value per rule would have to cover its
slowest model (MIR trains for 16.8 h on an H100, KNRM for 5 minutes). The rules train, train_pretrain and rerank
(workflow/rules/) ask this module per job instead:

- a training job's estimate: its steps x the bill's step time of its model, scaled by the documents each GPU takes
  per step (batch_size x (1 + negatives) / processes) relative to the bill's; its dev evaluations
  (ceil(steps / eval_every) x dev queries x rerank depth x the bill's time per candidate x FP32_SLOWDOWN: the dev
  evaluation scores in fp32, the bill's rerank column is bf16); and LOAD_OVERHEAD_S;
- a rerank job's: the test queries x rerank depth x the time per candidate (x FP32_SLOWDOWN under rerank.precision
  fp32), and LOAD_OVERHEAD_S;
- the request: the estimate x MARGIN, at least FLOOR_MINUTES, in whole minutes, x RETRY_GROWTH per retry; host
  memory HOST_MEMORY_MB, x RETRY_GROWTH per retry; the config's ``large_gpu_constraint`` when the job's GPU memory
  (the bill's peak) is over LARGE_GPU_MIB.

The bill's figures are in gpu_bill.yaml beside this module (package data), copied from benchmarks/gpu-h100/. An entry
the bill measured (its name and type) takes its own row; another entry of a measured type takes that type's
slowest-training row; an unmeasured type takes the file's ``unmeasured`` bound. Torch-free, as the parse is."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from longrank.config.user_models import kind_of
from longrank.config.train_settings import TrainSettings
from longrank.io.json_yaml import load_yaml
from longrank.plan.seeds import SEED_MARK
from longrank.plan.targets import Plan

BILL = "gpu_bill.yaml"
# Not measured at full scale: the model built (or its weights read), the data stage's files and the candidates'
# texts read, a checkpoint written at each dev evaluation.
LOAD_OVERHEAD_S = 15 * 60
# fp32 against the bill's bf16 scoring: the MORES bench's 2.23 s against 0.357 s per 1,000 candidates at 512 tokens
# (6.2x, docs/gpu-bill.md), rounded up. fp32 activations take twice bf16's bytes, the weights stay fp32 in both.
FP32_SLOWDOWN = 6.5
FP32_MEMORY = 2.0
# The request over the estimate on the first submission, and its growth on each retry (SLURM's TIMEOUT or
# OUT_OF_MEMORY, resubmitted with Snakemake's attempt 2, 3, ...).
MARGIN = 1.5
RETRY_GROWTH = 2
FLOOR_MINUTES = 30  # a short job still has to queue, start Python and import torch
# The bill measures GPU memory only. benchmarks/scaling measured the train and rerank processes' peak RSS at 1.9 and
# 1.2 GB with the TREC DL configs' 1M-word vocabulary cap (docs/studies/scaling.md); 32 GB also holds a BERT model's
# weights and the DataLoader workers' batches.
HOST_MEMORY_MB = 32_000
# A 40 GB card (40,960 MiB) less 2 GiB for the CUDA context and the allocator's reserve beside the allocated peak
# the bill measures: BERT-FirstP's 40,681 MiB does not fit one.
LARGE_GPU_MIB = 40_960 - 2_048
# Test queries of the shipped collections by dataset.name (their config/datasets/*.yaml say so); any other
# collection counts as UNCOUNTED_QUERIES, more than the largest of them (MS MARCO Dev's 5,193).
TEST_QUERIES = {
    "trec-dl-2019": 43,
    "trec-dl-2020": 45,
    "trec-dl-2019-passage": 43,
    "msmarco-dev": 5_193,
    "cranfield": 225,
}
UNCOUNTED_QUERIES = 6_000


@dataclass(frozen=True)
class Measured:
    """One model's row of the bill (gpu_bill.yaml describes each field)."""

    type: str
    batch_size: int
    negatives: int
    step_s: float
    train_peak_mib: int
    rerank_per_1000_s: float
    rerank_peak_mib: int

    @property
    def documents_per_step(self) -> int:
        return self.batch_size * (1 + self.negatives)

    @property
    def seconds_per_document(self) -> float:
        return self.step_s / self.documents_per_step


@dataclass(frozen=True)
class GpuBill:
    device: str
    models: dict[str, Measured]  # by the full-scale entry's name
    unmeasured: Measured  # the bound for a type the bill has no row of

    def row_of(self, name: str, model_type: str) -> Measured:
        """Entry ``name``'s own row when the bill measured an entry of that name and type, else the slowest-training
        row of its type, else the bound for an unmeasured type."""
        own = self.models.get(name)
        if own is not None and own.type == model_type:
            return own
        alike = [row for row in self.models.values() if row.type == model_type]
        return max(alike, key=lambda row: row.seconds_per_document, default=self.unmeasured)


@cache
def gpu_bill() -> GpuBill:
    doc = load_yaml(resources.files("longrank.plan").joinpath(BILL).read_text("utf-8"))
    rows = {name: Measured(**row) for name, row in doc["models"].items()}
    return GpuBill(doc["device"], rows, Measured(**doc["unmeasured"]))


@dataclass(frozen=True)
class Estimate:
    """A job's expected time on the bill's GPU, in parts, and its GPU memory."""

    compute_s: float  # the training steps, or the test queries' scoring
    evaluation_s: float  # the dev evaluations of a training job
    gpu_mib: float

    @property
    def seconds(self) -> float:
        return self.compute_s + self.evaluation_s + LOAD_OVERHEAD_S


@dataclass(frozen=True)
class Request:
    """What a job asks the cluster for: Snakemake's runtime (minutes) and mem_mb, and the SLURM plugin's constraint
    (None: no constraint)."""

    runtime: int
    mem_mb: int
    constraint: str | None


@dataclass(frozen=True)
class JobResources:
    """The requests of ``plan``'s GPU jobs, by model and Snakemake's ``attempt`` (1 on the first submission).
    A model's training recipe is its entry's ``TrainSettings`` (defaults filled in)."""

    plan: Plan
    bill: GpuBill = field(default_factory=gpu_bill)

    def train(self, model: str, attempt: int) -> Request:
        return self.request(self.training_estimate(model), attempt)

    def pretrain(self, model: str, attempt: int) -> Request:
        return self.request(self.pretraining_estimate(model), attempt)

    def rerank(self, model: str, attempt: int) -> Request:
        return self.request(self.rerank_estimate(model), attempt)

    def request(self, estimate: Estimate, attempt: int) -> Request:
        growth = RETRY_GROWTH ** (attempt - 1)
        first = max(estimate.seconds * MARGIN, FLOOR_MINUTES * 60)
        large = estimate.gpu_mib > LARGE_GPU_MIB and self.plan.config["device"] != "cpu"
        return Request(
            runtime=math.ceil(first * growth / 60),
            mem_mb=HOST_MEMORY_MB * growth,
            constraint=self.plan.config["large_gpu_constraint"] if large else None,
        )

    def training_estimate(self, model: str) -> Estimate:
        """Training on the dataset's training queries, evaluated on its dev queries (dataset.dev_sample of them)."""
        recipe = TrainSettings.from_entry(model, self.plan.config["models"][model])
        dev_queries = self.plan.config["dataset"].get("dev_sample", UNCOUNTED_QUERIES)
        return self._training(model, recipe, dev_queries, self.plan.effective[model].rerank_depth)

    def pretraining_estimate(self, model: str) -> Estimate:
        """Pre-training on a pseudo-query set (train.pretrain's keys over train's), evaluated on its held-out share
        at the set's depth."""
        entry = self.plan.config["models"][model]
        pretrain = entry["train"]["pretrain"]  # a train_pretrain job is planned only with one
        own = {key: value for key, value in entry["train"].items() if key != "pretrain"}
        overrides = {key: value for key, value in pretrain.items() if key != "queries"}
        # the pre-training's recipe as the train stage merges it (longrank.train.train.pretraining_config)
        recipe = TrainSettings.from_entry(model, {**entry, "train": {**own, **overrides}})
        pseudo = self.plan.config["pseudo_queries"][pretrain["queries"]]
        depth = min(pseudo["depth"], self.plan.effective[model].rerank_depth)
        return self._training(model, recipe, math.ceil(pseudo["count"] * pseudo["dev"]), depth)

    def rerank_estimate(self, model: str) -> Estimate:
        """Scoring every test query's candidates at the model's rerank depth under rerank.precision."""
        row, fp32 = self._row(model), self.plan.config["rerank"]["precision"] == "fp32"
        queries = TEST_QUERIES.get(self.plan.config["dataset"]["name"], UNCOUNTED_QUERIES)
        candidates = queries * self.plan.effective[model].rerank_depth
        return Estimate(
            compute_s=candidates * row.rerank_per_1000_s / 1000 * (FP32_SLOWDOWN if fp32 else 1.0),
            evaluation_s=0.0,
            gpu_mib=row.rerank_peak_mib * (FP32_MEMORY if fp32 else 1.0),
        )

    def _training(self, model: str, settings: TrainSettings, dev_queries: int, depth: int) -> Estimate:
        row = self._row(model)
        # each of train.processes GPUs takes its share of the batch (train/trainer.py); the all-reduce is the margin's
        documents = settings.batch_size * (1 + settings.negatives) / settings.processes
        scale = documents / row.documents_per_step
        # steps: 0 (a zero-shot model) trains nothing and evaluates its initial weights once (train/job.py)
        evaluations = math.ceil(settings.steps / settings.eval_every) if settings.steps else 1
        scoring_mib = row.rerank_peak_mib * FP32_MEMORY
        return Estimate(
            compute_s=settings.steps * row.step_s * scale,
            evaluation_s=evaluations * dev_queries * depth * row.rerank_per_1000_s / 1000 * FP32_SLOWDOWN,
            # activations grow with the batch; the weights and the optimiser state do not shrink with it
            gpu_mib=max(row.train_peak_mib * max(1.0, scale), scoring_mib) if settings.steps else scoring_mib,
        )

    def _row(self, model: str) -> Measured:
        # a further training seed (longrank.plan.seeds) is its entry's model: the entry's row
        return self.bill.row_of(model.split(SEED_MARK)[0], kind_of(self.plan.config["models"][model]))


# The collection-wide stages a config may shard (annotations.shards, mir_graphs.<set>.shards, first_stages[].shards,
# impact_index.shards): the unsharded job's bound at MS MARCO's 3.2M documents (spaCy over every document: a day; the
# graph records: half of one; HDCT's encoder, weighting and index: a day; an impact index: 8 h), and the merge's, which
# copies the shards' records in order (HDCT's: a bm25s index over the shards' weights). One bound for both would hold
# a merge to the whole job's time, on the run's critical path (benchmarks/cluster_plan.py).
WHOLE_COLLECTION_MINUTES = {"annotate": 1440, "graphs": 720, "hdct": 1440, "artifacts": 480}
MERGE_MINUTES = {"annotate": 120, "graphs": 120, "hdct": 240, "artifacts": 120}


def collection_stage_minutes(stage: str, merges_shards: bool, attempt: int) -> int:
    """The runtime request of rule ``stage``'s job: a merge's when it merges shards, else the whole job's."""
    return (MERGE_MINUTES if merges_shards else WHOLE_COLLECTION_MINUTES)[stage] * attempt
