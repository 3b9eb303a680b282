"""Device choice and seeding shared by training, reranking and benchmarking."""

from __future__ import annotations

import os
import random
import sys

import numpy as np
import torch

from longrank.config.schema import schema_default
from longrank.errors import InputError


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks the GPU when there is one and the CPU otherwise; ``cpu`` / ``cuda`` / ``cuda:N`` force it."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"device: {name!r} was asked for but no CUDA GPU is visible; use 'auto' or 'cpu'")
    try:
        return torch.device(name)
    except RuntimeError:
        raise InputError(f"device: {name!r} is not a device; expected 'auto', 'cpu' or 'cuda[:N]'") from None


# cuBLAS's setting for reproducible GEMMs (its documentation: a fixed workspace per stream); read when cuBLAS starts
CUBLAS_WORKSPACE_CONFIG = ":4096:8"


def add_device_arguments(parser) -> None:
    """``--device`` and ``--deterministic``: where a stage that runs a model computes, and how."""
    parser.add_argument("--device", default=schema_default("device"), help="auto, cpu or cuda[:N]")
    parser.add_argument(
        "--deterministic",
        action="store_true",
        help="PyTorch's deterministic algorithms, cuBLAS's fixed workspace and cuDNN without autotuning (the config's "
        "`deterministic`): the same bytes on a GPU, at some speed; an operation without a deterministic version fails",
    )


def set_deterministic(on: bool) -> None:
    """``deterministic: true``: a GPU run repeats to the bit. On the CPU runs repeat without it (one thread a job, a
    seed a step); on a GPU atomics in scatter/index_add backward and cuBLAS's split reductions vary from run to run
    unless told not to. Called before the first CUDA operation, as cuBLAS reads its variable when it starts."""
    if not on:
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIG)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def stage_device(args) -> torch.device:
    """A stage's device from its ``add_device_arguments`` flags, deterministic algorithms set first when asked."""
    set_deterministic(args.deterministic)
    return resolve_device(args.device)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ---- several processes (torch.distributed) -----------------------------------------------------------------


def distributed_env() -> tuple[int, int, int] | None:
    """(rank, local rank, world size) when this process was started by torchrun (or ``train.processes``'s own
    launch, which is torchrun's code): the launcher sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR. None
    for a plain ``python -m longrank`` process."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    return int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", os.environ["RANK"])), int(os.environ["WORLD_SIZE"])


def process_device(
    device: torch.device, local_rank: int, world_size: int, key: str = "train.processes"
) -> torch.device:
    """The device of one of ``world_size`` processes: on CUDA each process its own GPU, ``cuda:LOCAL_RANK`` of the
    visible ones (a scheduler sets CUDA_VISIBLE_DEVICES; an index in ``--device cuda:N`` is not used); the CPU
    is shared."""
    if device.type != "cuda":
        return device
    visible = torch.cuda.device_count()
    if local_rank >= visible:
        raise InputError(f"{key}: {world_size} processes on this node need a GPU each; {visible} visible")
    return torch.device("cuda", local_rank)


def init_process_group(device: torch.device, timeout_s: float) -> None:
    """Join the process group the launcher describes in the environment: ``nccl`` on CUDA, ``gloo`` on the CPU.
    ``timeout_s`` bounds every collective, so it must exceed the longest time one rank works alone (rank 0's
    dev evaluation and checkpoints while the others wait)."""
    from datetime import timedelta

    import torch.distributed as dist

    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl" if cuda else "gloo", timeout=timedelta(seconds=timeout_s), device_id=device if cuda else None
    )


def launch_processes(n: int, module: str, argv: list[str]) -> None:
    """Run ``python -m module *argv`` as ``n`` processes on this node through torch's own launcher, exactly as
    ``torchrun --standalone --nproc-per-node n -m module *argv`` would (a rendezvous on localhost at a free
    port, no restarts, the workers' output in this process's stdout / stderr); returns when all have finished.
    When one fails the launcher stops the others and this process exits with the failed one's exit status (2 for
    an InputError, as one process would), its error being in the output above."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    try:
        run(parse_args(["--standalone", f"--nproc-per-node={n}", "--max-restarts=0", "--module", module, *argv]))
    except ChildFailedError as err:
        rank, failure = err.get_first_failure()
        print(
            f"{' '.join([module, *argv[:1]])}: process {rank} of {n} failed with exit status {failure.exitcode} (its error is above); "
            "the launcher stopped the others",
            file=sys.stderr,
        )
        raise SystemExit(failure.exitcode if failure.exitcode > 0 else 1) from None
