"""Gradient accumulation (``train.accumulation: N``): one optimiser step's gradient from a process's share of the batch
taken in N micro-batches, so a batch larger than one GPU's memory still takes one step of the whole batch's gradient.

Every training loss is a mean over the groups of its batch, with the same number of documents in every group, and the
micro-batches are N equal parts of whole groups (``TrainingBatches``), so the share's loss is the mean of the
micro-batches' losses: each backward takes its micro-batch's loss divided by N, and the gradients that sum up in the
parameters' ``.grad`` are the share's, float summation order aside. Dropout draws its noise from the step's seed as
the micro-batches run one after another: other masks than one pass over the share, from the same distribution (as
between processes). Batch norm cannot be split so: in training mode it normalises by its batch's statistics, which
become each micro-batch's; a model with it is refused (``check_batch_independent``)."""

from __future__ import annotations

import contextlib

import torch
from torch.nn.parallel import DistributedDataParallel

from longrank.errors import InputError
from longrank.config.train_settings import TrainSettings


def check_batch_independent(model: torch.nn.Module, settings: TrainSettings, name: str) -> None:
    """Refuse accumulation for a model with batch norm (the config check refuses its entry from the model types'
    table, before any job runs; this reads the built model's modules)."""
    if settings.accumulation > 1 and any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        raise InputError(
            f"models.{name}.train.accumulation: {settings.accumulation} micro-batches, but the model has batch norm, "
            "whose training statistics would be each micro-batch's, not the batch's: expected 1"
        )


def accumulate_gradients(forward, micro_batches, loss_fn, scaler, device: torch.device, amp_dtype) -> torch.Tensor:
    """Forward and backward over each micro-batch ``(groups, encoded batch)`` in order, the gradients summing up in
    the parameters' ``.grad`` (the caller zeroes them first and steps after); returns the share's loss (detached).
    Under DistributedDataParallel the micro-batches before the last keep their gradients local (``no_sync``): the
    processes exchange the summed gradient once, in the last backward."""
    parts = len(micro_batches)
    total = torch.zeros((), device=device)  # float32, as the loss of an fp32 model
    for i, (n_groups, encoded) in enumerate(micro_batches):
        batch = {k: v.to(device) for k, v in encoded.items()}
        distributed = isinstance(forward, DistributedDataParallel)
        with forward.no_sync() if distributed and i < parts - 1 else contextlib.nullcontext():
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                scores = forward(**batch).view(n_groups, -1)
            # the loss in float32 at least: autocast's fp16 / bf16 scores upcast, float64 ones kept
            loss = loss_fn(scores.to(torch.promote_types(scores.dtype, torch.float32))) / parts  # its part of the mean
            scaler.scale(loss).backward()  # fp16: scaled gradients sum up; the trainer unscales them once
        total += loss.detach()
    return total
