"""Stage ``train``: train one model on one fold's training queries.

Pairwise (or the model's) loss on a positive and ``negatives`` candidates per query; AdamW with linear
warm-up and linear decay; every ``eval_every`` steps the dev queries' candidates are reranked and the
weights with the best dev nDCG@10 are kept (test queries are never looked at here); training stops after
``patience`` evaluations without improvement. The full state is checkpointed at every evaluation into a
checkpoint set under ``train_state/`` (written whole, verified by its manifest: ``train/state_sets.py``) so a killed
job resumes where it stopped, if every input it was made from is unchanged (``training_inputs``: judgments, query
texts, documents, vocabulary, initial weights, ...); the final ``model.safetensors`` and its
``model.manifest.json`` appear only when training has finished.

Pre-training (``train.pretrain``, ``--pretrain-queries``): the same loop on a pseudo-query set (stage
``pseudo_queries``) in place of the fold's queries, judgments and candidates, with the model's training keys
overridden by ``train.pretrain``'s and early stopping on held-out pseudo-queries; one run serves every fold.
The supervised training then starts from its weights (``--init``), which are part of the resume fingerprint.

Several processes (``train.processes``, or ``torchrun --nproc-per-node N -m longrank train ...``) train one
model with DistributedDataParallel, one GPU each (``gloo`` on the CPU). ``train.batch_size`` is the global
batch: every process draws the same batch from the seeded sampler and trains on its own contiguous share of
``batch_size / N`` queries; every loss is a mean over equal-size shares, so DDP's average of the processes'
gradients is the gradient of the whole batch and N processes take the steps one process would take (up to
float summation order; dropout noise differs, and batch norm statistics are the global batch's on CUDA only,
SyncBatchNorm having no CPU kernel). Rank 0 alone evaluates on dev and writes logs, checkpoints, the
training state and the outputs; it hands every rank the position (step, patience count), so all stop
together.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import torch
import torch.distributed as dist

from longrank.data.corpus import Corpus, PseudoQueryCorpus
from longrank.errors import InputError
from longrank.io.trec_files import read_run
from longrank.runtime import (
    add_device_arguments,
    distributed_env,
    init_process_group,
    launch_processes,
    process_device,
    stage_device,
)
from longrank.train.starter import Starter, stop_with_starter
from longrank.config.train_settings import TrainSettings
from longrank.train.trainer import TrainingJob, run_job

log = logging.getLogger(__name__)

# How long a collective may wait: the other ranks wait in one while rank 0 alone evaluates on dev and writes the
# checkpoints, which on a large dev set with a long-document model takes many minutes (NCCL's default is 10).
PROCESS_GROUP_TIMEOUT_S = 2 * 3600


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="the model's name in the config")
    parser.add_argument("--model-config", required=True, help="the model's config entry as JSON")
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--candidates", required=True, help="first-stage run")
    parser.add_argument("--fold", type=int, default=0)
    parser.add_argument(
        "--rerank-depth", type=int, required=True, help="dev candidates scored per query (the model's effective depth)"
    )
    add_device_arguments(parser)
    parser.add_argument(
        "--collection-artifacts",
        nargs="?",
        help="the model's collection-scope artifacts (a directory the "
        "artifacts stage wrote), when the model declares any (the flag without a value: none)",
    )
    parser.add_argument(
        "--pretrain-queries",
        help="pre-train: train on this pseudo-query set (a directory the pseudo_queries "
        "stage wrote; its candidates.run replaces --candidates) with the model's train.pretrain settings",
    )
    parser.add_argument(
        "--init",
        help="start from these weights (the model's pre-trained model.safetensors) rather than its initialisation",
    )
    parser.add_argument(
        "--out", required=True, help="the trained weights (model.safetensors); its folder holds logs and state"
    )
    parser.add_argument(
        "--reuse-from",
        help="a results folder (results/<name>), or the folder of them (results): a finished training of exactly "
        "these inputs kept there (the model's state, its history, another collection's) is copied, not trained again",
    )


def run(args):
    starter = stop_with_starter()  # first: a Snakemake killed while this stage starts up is seen too
    model_cfg = json.loads(args.model_config)
    settings = TrainSettings.from_entry(args.model, model_cfg)
    device = stage_device(args)
    if settings.steps and settings.processes > 1 and distributed_env() is None:
        # train.processes: this command becomes torchrun for itself (the Snakemake rule's command line is the same
        # for any number of processes); the workers are this same command, each seeing RANK / WORLD_SIZE.
        check_processes(args.model, settings, None)
        if device.type == "cuda" and torch.cuda.device_count() < settings.processes:
            raise InputError(
                f"models.{args.model}.train.processes: {settings.processes} processes need a GPU each; "
                f"{torch.cuda.device_count()} visible"
            )
        log.info("launching %d training processes (train.processes)", settings.processes)
        launch_processes(settings.processes, "longrank", ["train", *_cli_arguments(args)])
        return
    corpus, candidates = Corpus(args.data), args.candidates
    if args.pretrain_queries:
        model_cfg = pretraining_config(args.model, model_cfg)
        corpus, candidates = (
            PseudoQueryCorpus(args.data, args.pretrain_queries),
            Path(args.pretrain_queries) / "candidates.run",
        )
    train(
        args.model,
        model_cfg,
        corpus,
        read_run(candidates),
        args.fold,
        args.rerank_depth,
        device,
        Path(args.out),
        args.collection_artifacts,
        args.init,
        args.reuse_from,
        starter,
    )


def pretraining_config(name: str, model_cfg: dict) -> dict:
    """The model's entry for pre-training on pseudo-queries: its ``train`` keys overridden by ``train.pretrain``'s
    (steps, lr, ...; ``queries`` names the set). The positive is the document a pseudo-query came from, which
    its BM25 candidates may miss, so positives are the judged ones."""
    pretrain = TrainSettings.from_entry(name, model_cfg).pretrain
    overrides = dict(pretrain.overrides) if pretrain is not None else {}
    own = {k: v for k, v in model_cfg.get("train", {}).items() if k != "pretrain"}
    return {**model_cfg, "train": {**own, "positives": "judged", **overrides}}


def _cli_arguments(args) -> list[str]:
    """The train command's arguments, as ``add_arguments`` parsed them, for the processes it launches."""
    argv = [
        "--model",
        args.model,
        "--model-config",
        args.model_config,
        "--data",
        str(args.data),
        "--candidates",
        str(args.candidates),
        "--fold",
        str(args.fold),
        "--rerank-depth",
        str(args.rerank_depth),
        "--device",
        args.device,
        "--out",
        str(args.out),
        *(["--deterministic"] if args.deterministic else []),
    ]
    if args.collection_artifacts is not None:
        argv += ["--collection-artifacts", str(args.collection_artifacts)]
    for flag, value in (
        ("--pretrain-queries", args.pretrain_queries),
        ("--init", args.init),
        ("--reuse-from", args.reuse_from),
    ):
        if value:
            argv += [flag, str(value)]
    return argv


def check_processes(name: str, settings: TrainSettings, env: tuple[int, int, int] | None) -> int:
    """The number of training processes, checked against the launcher's WORLD_SIZE, and the global batch's split into
    the processes' shares and their micro-batches (``train.accumulation``)."""
    processes = settings.processes
    if env is not None and env[2] != processes:
        raise InputError(
            f"models.{name}.train.processes is {processes} but this process is one of WORLD_SIZE={env[2]} started by "
            f"torchrun; set train.processes: {env[2]} or start {processes} (torchrun --nproc-per-node {processes})"
        )
    settings.check_batch_split(f"models.{name}.train")
    return processes


def train(
    name: str,
    model_cfg: dict,
    corpus: Corpus,
    candidates,
    fold_index: int,
    depth: int,
    device: torch.device,
    out: Path,
    collection_artifacts: str | Path | None = None,
    init: str | Path | None = None,
    reuse_from: str | Path | None = None,
    starter: Starter | None = None,
) -> None:
    """Train in this process, or as one of the processes torchrun (or ``run``'s own launch for ``train.processes``)
    started: then in the process group the launcher's environment describes, torn down at the end or on error.
    Training stops when ``starter`` (the Snakemake process that started it) has ended."""
    settings = TrainSettings.from_entry(name, model_cfg)
    env = distributed_env()
    check_processes(name, settings, env)
    if settings.steps and settings.processes > 1 and env is None:
        raise InputError(
            f"models.{name}.train.processes: {settings.processes} processes are started by the train command "
            "(python -m longrank train) or by torchrun; train() in this process runs one of them"
        )
    job = TrainingJob(
        name,
        model_cfg,
        settings,
        corpus,
        candidates,
        fold_index,
        depth,
        device,
        out,
        Path(collection_artifacts) if collection_artifacts is not None else None,
        Path(init) if init is not None else None,
        reuse_from=Path(reuse_from) if reuse_from else None,
        starter=starter,
    )
    if env is None or env[2] == 1 or not settings.steps:  # steps: 0 trains nothing: rank 0 alone writes the outputs
        if env is None or env[0] == 0:
            run_job(job)
        return
    rank, local_rank, world = env
    device = process_device(device, local_rank, world, f"models.{name}.train.processes")
    init_process_group(device, PROCESS_GROUP_TIMEOUT_S)
    try:
        run_job(dataclasses.replace(job, device=device, rank=rank, world=world))
    finally:
        dist.destroy_process_group()
