"""Stage ``train``: train one model on one fold's training queries.

Pairwise (or the model's) loss on a positive and ``negatives`` candidates per query; AdamW with linear
warm-up and linear decay; every ``eval_every`` steps the dev queries' candidates are reranked and the
weights with the best dev nDCG@10 are kept (test queries are never looked at here); training stops after
``patience`` evaluations without improvement. The full state is checkpointed at every evaluation into a
checkpoint set under ``train_state/`` (written whole, verified by its manifest: ``train/checkpoint.py``) so a killed
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

import functools
import hashlib
import json
import logging
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from longrank.progress import progress

from longrank.data.corpus import Corpus, PseudoQueryCorpus
from longrank.io import InputError, read_run, write_run, write_text
from longrank.outputs import TrainSummary
from longrank.models.checkpoint import load_weights, save_weights, sha256_of
from longrank.models.registry import artifact_scopes, build_model, constructor_defaults, model_class
from longrank.runs import mean_measure
from longrank.runtime import (
    distributed_env,
    init_process_group,
    launch_processes,
    process_device,
    resolve_device,
    seed_everything,
)
from longrank.scoring import score_candidates
from longrank.train.checkpoint import (
    clear_state,
    export_best,
    load_training_state,
    newest_good_set,
    read_position,
    save_training_state,
    sets_newest_first,
)
from longrank.train.losses import PAIRWISE, get_loss, with_negative_pairs
from longrank.train.sampling import PairSampler

log = logging.getLogger(__name__)

TRAIN_DEFAULTS = {
    "steps": 300,
    "batch_size": 8,
    "negatives": 1,
    "lr": 1e-3,
    "weight_decay": 0.0,
    "warmup_steps": 0,
    "loss": None,
    "eval_every": 50,
    "patience": 3,
    "grad_clip": 1.0,
    "seed": 0,
    "eval_batch_size": 32,
    "embedding_lr": None,
    "scoring_lr": None,
    "positives": "candidates",
    "negatives_from": "candidates",
    "negative_pairs": False,
    "num_workers": 0,
    "processes": 1,
    "pretrain": None,
    "precision": "fp32",
}
# train.precision: the forward and loss under torch.autocast on a GPU (fp16 with a gradient scaler, as the MIR paper
# trained); the weights, the optimiser and the dev evaluation stay fp32. On the CPU training is fp32 whatever it says.
AUTOCAST_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
# Training keys that set the learning rate of one of a model's declared parameter groups (Ranker.parameter_groups).
GROUP_LR_KEYS = {"embedding_lr": "embeddings", "scoring_lr": "scoring"}
# How long a collective may wait: the other ranks wait in one while rank 0 alone evaluates on dev and writes the
# checkpoints, which on a large dev set with a long-document model takes many minutes (NCCL's default is 10).
PROCESS_GROUP_TIMEOUT_S = 2 * 3600


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="the model's name in the config")
    parser.add_argument("--model-config", required=True, help="the model's config entry as JSON")
    parser.add_argument("--data", required=True, help="results/{dataset}/data")
    parser.add_argument("--candidates", required=True, help="first-stage run")
    parser.add_argument("--fold", type=int, default=0)
    parser.add_argument("--rerank-depth", type=int, default=100)
    parser.add_argument("--device", default="auto")
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


def run(args):
    model_cfg = json.loads(args.model_config)
    hp = _hyperparameters(args.model, model_cfg)
    device = resolve_device(args.device)
    if hp["steps"] and hp["processes"] > 1 and distributed_env() is None:
        # train.processes: this command becomes torchrun for itself (the Snakemake rule's command line is the same
        # for any number of processes); the workers are this same command, each seeing RANK / WORLD_SIZE.
        _check_processes(args.model, hp, None)
        if device.type == "cuda" and torch.cuda.device_count() < hp["processes"]:
            raise InputError(
                f"models.{args.model}.train.processes: {hp['processes']} processes need a GPU each; "
                f"{torch.cuda.device_count()} visible"
            )
        log.info("launching %d training processes (train.processes)", hp["processes"])
        launch_processes(hp["processes"], "longrank", ["train", *_cli_arguments(args)])
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
    )


def pretraining_config(name: str, model_cfg: dict) -> dict:
    """The model's entry for pre-training on pseudo-queries: its ``train`` keys overridden by ``train.pretrain``'s
    (steps, lr, ...; ``queries`` names the set). The positive is the document a pseudo-query came from, which
    its BM25 candidates may miss, so positives are the judged ones."""
    settings = dict(_hyperparameters(name, model_cfg)["pretrain"] or {})
    settings.pop("queries", None)
    own = {k: v for k, v in model_cfg.get("train", {}).items() if k != "pretrain"}
    return {**model_cfg, "train": {**own, "positives": "judged", **settings}}


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
    ]
    if args.collection_artifacts is not None:
        argv += ["--collection-artifacts", str(args.collection_artifacts)]
    for flag, value in (("--pretrain-queries", args.pretrain_queries), ("--init", args.init)):
        if value:
            argv += [flag, str(value)]
    return argv


def _clock(seconds: float) -> str:
    """h:mm:ss for the console's progress lines."""
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _hyperparameters(name: str, model_cfg: dict) -> dict:
    unknown = set(model_cfg.get("train", {})) - set(TRAIN_DEFAULTS)
    if unknown:
        raise InputError(f"models.{name}.train: unknown keys {sorted(unknown)}; expected {sorted(TRAIN_DEFAULTS)}")
    hp = {**TRAIN_DEFAULTS, **model_cfg.get("train", {})}
    pretrain = hp["pretrain"]
    if pretrain is not None:
        if not isinstance(pretrain, dict) or not isinstance(pretrain.get("queries"), str):
            raise InputError(
                f"models.{name}.train.pretrain: expected a mapping with `queries` (a set under pseudo_queries) "
                f"and training keys to override, got {pretrain!r}"
            )
        unknown = set(pretrain) - set(TRAIN_DEFAULTS) - {"queries"} | ({"pretrain"} & set(pretrain))
        if unknown:
            raise InputError(
                f"models.{name}.train.pretrain: unknown keys {sorted(unknown)}; expected `queries` and training "
                f"keys {sorted(set(TRAIN_DEFAULTS) - {'pretrain'})}"
            )
    return hp


def _check_processes(name: str, hp: dict, env: tuple[int, int, int] | None) -> int:
    """The number of training processes, checked against the launcher's WORLD_SIZE and the global batch."""
    processes = hp["processes"]
    if not isinstance(processes, int) or isinstance(processes, bool) or processes < 1:
        raise InputError(f"models.{name}.train.processes: {processes!r} is not a number of processes (an integer >= 1)")
    if env is not None and env[2] != processes:
        raise InputError(
            f"models.{name}.train.processes is {processes} but this process is one of WORLD_SIZE={env[2]} started by "
            f"torchrun; set train.processes: {env[2]} or start {processes} (torchrun --nproc-per-node {processes})"
        )
    if hp["batch_size"] % processes:
        raise InputError(
            f"models.{name}.train.batch_size: {hp['batch_size']} is the global batch, shared by train.processes: "
            f"{processes} processes; it must be divisible by {processes}"
        )
    return processes


def _lr_lambda(warmup: int, total: int):
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def training_inputs(
    model_cfg: dict,
    corpus: Corpus,
    fold: dict,
    depth: int,
    candidates,
    built: dict[str, str],
    init: str | Path | None = None,
    collection_artifacts: str | Path | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> dict[str, str]:
    """A digest of each input that changes what training produces, by name: a saved state resumes (or, finished, is
    copied out as the model) only if every one is unchanged, and a mismatch is logged by these names."""
    train_dev = fold["train"] + fold["dev"]
    # With the model's defaults resolved: a state left before a default changed must not resume under the new one.
    resolved = {**constructor_defaults(model_cfg["type"]), **model_cfg}
    # Not part of the recipe: the global batch and the update are the same on any number of processes (float
    # summation order aside, as the device, which is not fingerprinted either) and of DataLoader workers, so a
    # state left by a run on 4 GPUs resumes on 2 or 1, and a config that only changes them finds its finished state.
    resolved["train"] = {k: v for k, v in resolved.get("train", {}).items() if k not in ("processes", "num_workers")}
    # The weights' shapes and their optimiser groups: a state left by other code (a parameter added, a parameter
    # moved to another learning rate's group) cannot be loaded into this model, so it must not be resumed either.
    layout = (
        [[[list(p.shape) for p in g["params"]], g.get("initial_lr", g["lr"])] for g in optimizer.param_groups]
        if optimizer is not None
        else None
    )
    parts = {
        "model entry": resolved,
        "split": [fold["train"], fold["dev"]],
        "rerank depth": depth,
        "candidates": {q: sorted(candidates.get(q, {}).items()) for q in train_dev},
        # what the training and dev queries are judged (the sampler's positives, the dev score that picks the model)
        "judgments": {q: sorted(corpus.qrels.get(q, {}).items()) for q in train_dev},
        "query texts": {q: corpus.queries.get(q) for q in train_dev},
        "documents": _documents_digest(corpus),
        **built,  # the vocabulary and the initial weights (built_model_digests)
        # the starting weights by content: a state fine-tuned from an earlier pre-training must not resume from a new one
        "init checkpoint": sha256_of(init) if init is not None else None,
        "collection artifacts": _directory_digest(Path(collection_artifacts))
        if collection_artifacts is not None
        else None,
        "optimiser layout": layout,
    }
    return {name: value if isinstance(value, str) else _digest(value) for name, value in parts.items()}


def built_model_digests(model: torch.nn.Module) -> dict[str, str]:
    """What the freshly built model (before any training or ``--init``) carries from files outside the config: its
    word vocabularies (the words, so which word each embedding row stands for, and their document frequencies) and
    its initial weights (GloVe or word2vec rows, a pretrained encoder, the seeded initialisation)."""
    from longrank.data.words import Vocabulary

    vocabularies = [
        [v.words, v.doc_freq, v.num_docs]
        for m in model.modules()
        for v in vars(m).values()
        if isinstance(v, Vocabulary)
    ]
    weights = hashlib.sha256()
    for key, tensor in sorted(model.state_dict().items()):
        weights.update(key.encode())
        weights.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return {"vocabulary": _digest(vocabularies), "initial weights": weights.hexdigest()}


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _documents_digest(corpus: Corpus) -> str:
    """The collection's text by content (streamed: MS MARCO's docs.jsonl is ~22 GB, hashed in about half a minute),
    and under pre-training the positives' texts that stand in for their documents."""
    files = [corpus.dir / "docs.jsonl"]
    if isinstance(corpus, PseudoQueryCorpus):
        files.append(corpus.pseudo_dir / "overrides.jsonl")
    return _digest([sha256_of(path) for path in files])


def _directory_digest(directory: Path) -> str:
    """Every file under ``directory`` by relative path and content."""
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    return _digest([[str(p.relative_to(directory)), sha256_of(p)] for p in files])


def fingerprint_of(inputs: dict[str, str]) -> str:
    return _digest(inputs)


def changed_inputs(saved: dict, inputs: dict[str, str]) -> str:
    """Why a saved position does not fit this training, in a few words for the log."""
    if "inputs" not in saved:
        return "it was saved by a version that did not record its inputs"
    changed = [name for name in inputs if saved["inputs"].get(name) != inputs[name]]
    return "changed since it was saved: " + (", ".join(changed) or "the fingerprint")


def _keep_only_a_fitting_state(state_dir: Path, inputs: dict[str, str], fingerprint: str) -> None:
    """Leave in ``state_dir`` only checkpoint sets this training may resume from: corrupt sets are moved aside (the
    newest good one is kept), and a state made for other inputs, or in the layout before checkpoint sets (no
    checksums), is discarded with one line saying why."""
    if (state_dir / "position.json").exists():  # files directly in train_state/: written before checkpoint sets
        log.info(
            "discarding the training state in %s: it predates checksummed checkpoint sets; training afresh", state_dir
        )
        clear_state(state_dir)
        return
    newest = newest_good_set(state_dir)
    if newest is None:
        return
    saved = read_position(newest)
    if saved.get("fingerprint") != fingerprint:
        log.info("discarding the training state in %s: %s; training afresh", state_dir, changed_inputs(saved, inputs))
        clear_state(state_dir)


def parameter_groups(model, hp: dict, name: str = "model") -> list[dict]:
    """AdamW groups: the model's declared groups whose rate a training key sets (word embeddings learn slower
    than the rest in TK/TKL; scoring layers, a few dozen weights over large pooled features, need a far
    higher rate than a Transformer or a pretrained encoder), and everything else at ``lr``. A key that would
    reach no trainable parameter is an error: a silently ignored learning rate is how KNRM, TK and TKL once
    trained their scoring layers at the Transformer's rate."""
    if isinstance(
        model, DistributedDataParallel
    ):  # the wrapper names parameters "module.<name>" and declares no groups
        model = model.module
    declared = type(model).parameter_groups
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    taken: set[str] = set()
    groups = []
    for key, group in GROUP_LR_KEYS.items():
        if hp[key] is None:
            continue
        prefixes = declared.get(group, ())
        members = [(n, p) for n, p in trainable if n.startswith(prefixes) and n not in taken] if prefixes else []
        if not members:
            why = (
                f"declares no {group!r} parameters"
                if not prefixes
                else f"has no trainable parameter under {list(prefixes)} (frozen?)"
            )
            raise InputError(f"models.{name}.train.{key}: {type(model).__name__} {why}; remove the key")
        taken.update(n for n, _ in members)
        groups.append({"name": group, "params": [p for _, p in members], "lr": hp[key]})
    rest = [p for n, p in trainable if n not in taken]
    return [{"name": "rest", "params": rest}] + groups if rest else groups


def _on_rank0(work, rank: int, world: int):
    """``work()`` on rank 0 only, its result handed to every rank. A failure on rank 0 fails every rank at once,
    rather than leaving the others waiting in a collective until the process group times out."""
    result, error = None, None
    if rank == 0:
        try:
            result = work()
        except BaseException as err:
            if world == 1:
                raise
            error = err
    if world > 1:
        box = [(result, None if error is None else f"{type(error).__name__}: {error}")]
        dist.broadcast_object_list(box, src=0)
        result, notice = box[0]
        if error is not None:
            raise error
        if notice is not None:
            raise RuntimeError(f"rank 0 failed: {notice}")
    return result


class TrainingBatches(torch.utils.data.IterableDataset):
    """The training steps ``start .. stop - 1`` as ``(step, groups, encoded batch)``: the sampler's global batch
    of each step (a function of the seed and the step only), this rank's ``share`` of it from ``offset``, its
    queries and documents read and encoded by ``encode`` (the model's tokenisation: no weights involved).

    With ``num_workers`` W > 0, worker k prepares steps start + k, start + k + W, ... and the DataLoader hands
    them back in step order, so a GPU is not kept waiting on Python tokenisation. Workers are forked: the
    document store reopens its files per process."""

    def __init__(self, sampler, corpus, encode, start: int, stop: int, batch_size: int, offset: int, share: int):
        self.sampler, self.corpus, self.encode = sampler, corpus, encode
        self.start, self.stop, self.batch_size, self.offset, self.share = start, stop, batch_size, offset, share

    def __iter__(self):
        worker = torch.utils.data.get_worker_info()
        first, stride = (0, 1) if worker is None else (worker.id, worker.num_workers)
        for step in range(self.start + first, self.stop, stride):
            qids, groups = self.sampler.batch(step, self.batch_size)  # the global batch, the same on every rank
            qids, groups = qids[self.offset : self.offset + self.share], groups[self.offset : self.offset + self.share]
            queries = [self.corpus.queries[q] for q, g in zip(qids, groups) for _ in g]
            doc_ids = [d for g in groups for d in g]
            yield step, len(groups), self.encode(queries, doc_ids, [self.corpus.docs[d] for d in doc_ids])

    @staticmethod
    def loader(batches: "TrainingBatches", num_workers: int) -> torch.utils.data.DataLoader:
        if not num_workers:
            return torch.utils.data.DataLoader(batches, batch_size=None)
        return torch.utils.data.DataLoader(
            batches, batch_size=None, num_workers=num_workers, prefetch_factor=2, multiprocessing_context="fork"
        )


def _step_seed(seed: int, step: int, rank: int) -> int:
    """The seed of one step's dropout noise: rank 0's is a single process's (so one process trains as it always
    has), the other ranks' are independent of it (their shares hold other queries)."""
    base = seed * 1_000_003 + step
    if rank == 0:
        return base
    return int.from_bytes(hashlib.sha256(f"{base}/{rank}".encode()).digest()[:8], "little")


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
) -> None:
    """Train in this process, or as one of the processes torchrun (or ``run``'s own launch for ``train.processes``)
    started: then in the process group the launcher's environment describes, torn down at the end or on error."""
    hp = _hyperparameters(name, model_cfg)
    env = distributed_env()
    _check_processes(name, hp, env)
    if hp["steps"] and hp["processes"] > 1 and env is None:
        raise InputError(
            f"models.{name}.train.processes: {hp['processes']} processes are started by the train command "
            "(python -m longrank train) or by torchrun; train() in this process runs one of them"
        )
    train_as = functools.partial(
        _train, name, model_cfg, hp, corpus, candidates, fold_index, depth
    )  # the rest: device, out, collection_artifacts, init, rank, world
    if env is None or env[2] == 1 or not hp["steps"]:  # steps: 0 trains nothing: rank 0 alone writes the outputs
        if env is None or env[0] == 0:
            train_as(device, out, collection_artifacts, init, 0, 1)
        return
    rank, local_rank, world = env
    device = process_device(device, local_rank, world, f"models.{name}.train.processes")
    init_process_group(device, PROCESS_GROUP_TIMEOUT_S)
    try:
        train_as(device, out, collection_artifacts, init, rank, world)
    finally:
        dist.destroy_process_group()


def _train(
    name: str,
    model_cfg: dict,
    hp: dict,
    corpus: Corpus,
    candidates,
    fold_index: int,
    depth: int,
    device: torch.device,
    out: Path,
    collection_artifacts: str | Path | None,
    init: str | Path | None,
    rank: int,
    world: int,
) -> None:
    lead, distributed = rank == 0, world > 1
    depth = model_cfg.get("rerank_depth", depth)
    if fold_index >= len(corpus.folds):
        raise InputError(f"fold {fold_index} does not exist; the data has {len(corpus.folds)} folds")
    fold = corpus.folds[fold_index]
    needs_artifacts = "collection" in artifact_scopes(model_cfg)
    if needs_artifacts != (collection_artifacts is not None):
        raise InputError(
            f"models.{name}: "
            + (
                "the model needs its collection artifacts (--collection-artifacts DIR)"
                if needs_artifacts
                else "the model declares no collection artifacts; drop --collection-artifacts"
            )
        )
    seed_everything(hp["seed"])
    model = build_model(model_cfg, corpus)
    built = built_model_digests(model) if hp["steps"] and lead else {}  # before --init and training change the weights
    if init is not None:  # fine-tuning a pre-trained model (train.pretrain): every rank loads the same file
        load_weights(model, init)
    model = model.to(device)
    if collection_artifacts is not None:
        model.attach_artifacts(Path(collection_artifacts))
    loss_name = hp["loss"] or model_class(model_cfg["type"]).default_loss
    loss_fn = get_loss(loss_name)
    if hp["negative_pairs"] and (hp["negatives_from"] != "both" or loss_name not in PAIRWISE):
        raise InputError(
            f"models.{name}.train.negative_pairs pairs candidate negatives with collection negatives: it needs "
            f"negatives_from: both (got {hp['negatives_from']!r}) and a pairwise loss {list(PAIRWISE)} (got {loss_name!r})"
        )
    out_dir = out.parent
    state_dir = out_dir / "train_state"
    log_path = out_dir / "training_log.tsv"

    dev_run_path = out_dir / "dev.run"  # the kept model's dev scores: rerank chooses the interpolation weight on them

    if hp["steps"] == 0:  # nothing to learn (zero-shot models): keep the initial weights
        dev_run = score_candidates(
            model, corpus, candidates, fold["dev"], depth, hp["eval_batch_size"], desc="dev rerank"
        )
        write_run(dev_run_path, dev_run, tag=name)
        TrainSummary(
            model=name,
            fold=fold_index,
            best_dev_ndcg10=mean_measure(dev_run, corpus.qrels, fold["dev"]),
            steps_run=0,
            best_step=0,
            note="no training (steps: 0)",
        ).write(out_dir / "train_summary.json")
        save_weights(model, out)
        return

    if distributed and any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        if device.type == "cuda":  # batch statistics of the global batch, as one process computes them
            model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        else:
            log.warning(
                "models.%s: batch norm statistics are each process's share's on the CPU (SyncBatchNorm needs "
                "CUDA): %d processes do not train exactly as one",
                name,
                world,
            )
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameter_groups(model, hp, name), lr=hp["lr"], weight_decay=hp["weight_decay"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda(hp["warmup_steps"], hp["steps"]))
    sampler = PairSampler(
        fold["train"],
        corpus.qrels,
        candidates,
        depth,
        hp["negatives"],
        hp["seed"],
        hp["positives"],
        hp["negatives_from"],
        list(corpus.docs) if hp["negatives_from"] != "candidates" else None,
    )
    if hp["negative_pairs"]:  # extra pairs in the loss only: the sampler draws exactly what it draws without them
        loss_fn = with_negative_pairs(loss_fn, sampler.from_candidates)

    # A state left by a killed run resumes only if its checkpoint set is intact and was made for exactly this training
    # problem. Rank 0 alone verifies (moving corrupt sets aside), judges and discards; then every rank loads the same
    # set (weights, optimiser moments, scheduler, position), which leaves them bit-identical without sending the
    # optimiser state around.
    inputs, fingerprint = {}, None  # rank 0's alone are saved (the other ranks take its position at each evaluation)
    if lead:
        inputs = training_inputs(
            model_cfg, corpus, fold, depth, candidates, built, init, collection_artifacts, optimizer
        )
        fingerprint = fingerprint_of(inputs)
        _keep_only_a_fitting_state(state_dir, inputs, fingerprint)
    if distributed:
        dist.barrier()
    newest = next(iter(sets_newest_first(state_dir)), None)
    position = load_training_state(newest, model, optimizer, scheduler) if newest is not None else None
    if distributed:
        found = [None] * world
        dist.all_gather_object(found, position and position["step"])
        if len(set(found)) > 1:
            raise RuntimeError(
                f"the training processes found different states in {state_dir} (steps by rank: {found}); "
                "the output directory must be one shared by all of them"
            )
    if position:
        if lead:
            log.info(
                "resuming %s fold %d at step %d (best dev nDCG@10 %.4f)",
                name,
                fold_index,
                position["step"],
                position["best_dev_ndcg10"],
            )
    else:
        position = {
            "step": 0,
            "best_dev_ndcg10": -1.0,
            "best_step": 0,
            "evals_without_improvement": 0,
            "history": [],
            "seconds": 0.0,
            "fingerprint": fingerprint,
            "inputs": inputs,
        }
        if lead:
            clear_state(state_dir)
    # DDP after the state is loaded: it starts every rank from rank 0's weights and averages gradients in backward.
    # Unused parameters are looked for (a model may leave some out of a forward pass), as one process skips them.
    forward = model
    if distributed:
        forward = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, find_unused_parameters=True
        )
    share = hp["batch_size"] // world  # this rank's contiguous share of the global batch

    def evaluate_dev() -> tuple[float, dict]:
        dev_run = score_candidates(
            model, corpus, candidates, fold["dev"], depth, hp["eval_batch_size"], desc="dev rerank"
        )
        return mean_measure(dev_run, corpus.qrels, fold["dev"]), dev_run

    # Sampling, reading the documents and tokenising run in train.num_workers DataLoader workers, ahead of the
    # steps that need them (0: in this process); the batches are the same either way, in step order.
    batches = iter(
        TrainingBatches.loader(
            TrainingBatches(
                sampler, corpus, model.encode, position["step"], hp["steps"], hp["batch_size"], rank * share, share
            ),
            hp["num_workers"],
        )
    )
    amp_dtype = AUTOCAST_DTYPES[hp["precision"]] if device.type == "cuda" else None
    scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype is torch.float16)  # fp16 gradients underflow unscaled
    model.train()
    started = time.time() - position["seconds"]
    losses: list[float] = []
    bar = progress(
        total=hp["steps"],
        initial=position["step"],
        desc=f"train {name} fold {fold_index}",
        unit="step",
        mininterval=5,
        disable=not lead,
    )
    while position["step"] < hp["steps"] and position["evals_without_improvement"] < hp["patience"]:
        step = position["step"]
        torch.manual_seed(_step_seed(hp["seed"], step, rank))  # dropout noise, reproducible across a resume
        prepared_step, n_groups, encoded = next(batches)
        assert prepared_step == step, f"the batches arrived out of order ({prepared_step} for step {step})"
        batch = {k: v.to(device) for k, v in encoded.items()}
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            scores = forward(**batch).view(n_groups, -1)
        loss = loss_fn(
            scores.float()
        )  # a mean over this share: DDP's mean over equal shares is the global batch's mean
        batch_loss = loss.detach()
        if distributed:  # the global batch's loss, for the log and for every rank to agree on stopping when not finite
            batch_loss = batch_loss.clone()
            dist.all_reduce(batch_loss)
            batch_loss /= world
        if not torch.isfinite(batch_loss):
            raise FloatingPointError(
                f"models.{name}: loss is {batch_loss.item()} at step {step}; the last good state is in {state_dir} "
                f"(lower train.lr or raise train.grad_clip)"
            )
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()  # without a scaler (fp32, bf16) these are plain backward and step
        if hp["grad_clip"]:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(params, hp["grad_clip"])
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        losses.append(batch_loss.item())
        position["step"] = step + 1
        bar.update(1)
        bar.set_postfix(loss=f"{sum(losses[-20:]) / len(losses[-20:]):.4f}", refresh=False)

        if position["step"] % hp["eval_every"] == 0 or position["step"] == hp["steps"]:
            mean_loss = sum(losses) / len(losses)
            losses.clear()

            def evaluate_and_checkpoint(position=position, mean_loss=mean_loss) -> dict:
                dev_ndcg, dev_run = evaluate_dev()
                improved = dev_ndcg > position["best_dev_ndcg10"]
                if improved:
                    position.update(best_dev_ndcg10=dev_ndcg, best_step=position["step"], evals_without_improvement=0)
                else:
                    position["evals_without_improvement"] += 1
                position["history"].append({"step": position["step"], "train_loss": mean_loss, "dev_ndcg10": dev_ndcg})
                position["seconds"] = time.time() - started
                # one line per dev evaluation on stderr (the console; the job's log under the workflow: tail -f it)
                per_step = position["seconds"] / max(position["step"], 1)
                log.info(
                    "%s fold %d step %d/%d: loss %.4f, dev nDCG@10 %.4f%s, elapsed %s, ETA %s",
                    name,
                    fold_index,
                    position["step"],
                    hp["steps"],
                    mean_loss,
                    dev_ndcg,
                    " (best)" if improved else "",
                    _clock(position["seconds"]),
                    _clock(per_step * (hp["steps"] - position["step"])),
                )
                best_run = (
                    (lambda path: write_run(path, dev_run, tag=name)) if improved else None
                )  # this step's weights are the best
                save_training_state(state_dir, model, optimizer, scheduler, position, best_run)
                return position

            position = _on_rank0(
                evaluate_and_checkpoint, rank, world
            )  # every rank continues (or stops) at rank 0's position
    bar.close()
    del batches  # stops the workers preparing steps that early stopping made unnecessary
    if not lead:
        return

    final_set = next(iter(sets_newest_first(state_dir)), None)
    if final_set is None or not (final_set / "best.safetensors").exists():
        raise InputError(
            f"models.{name}: training ended before any dev evaluation; set train.eval_every <= train.steps"
        )
    write_text(
        log_path,
        "step\ttrain_loss\tdev_ndcg10\n"
        + "".join(f"{h['step']}\t{h['train_loss']:.6f}\t{h['dev_ndcg10']:.6f}\n" for h in position["history"]),
    )
    TrainSummary(
        model=name,
        fold=fold_index,
        device=str(device),
        processes=world,
        steps_run=position["step"],
        best_step=position["best_step"],
        best_dev_ndcg10=position["best_dev_ndcg10"],
        stopped_early=position["step"] < hp["steps"],
        seconds=time.time() - started,
        parameters=sum(p.numel() for p in model.parameters()),
        trainable_parameters=sum(p.numel() for p in params),
        hyperparameters=hp,
    ).write(out_dir / "train_summary.json")
    export_best(final_set, out, dev_run_path)  # verified against the set's manifest; appears complete or not at all
