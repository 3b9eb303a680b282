"""Gradient accumulation (``train.accumulation``): the trainer's step in 2 and 4 micro-batches gives the gradient, the
loss and the updated weights of the same step on the whole batch, for word models of three architectures (KNRM; TK's
Transformer, whose micro-batches are padded to their own longest document; NDRM1's Conformer); the micro-batches are
the whole batch's groups, in order; a split that does not divide the batch and a model with batch norm are refused
at config load, naming the key, and by the trainer.

The models run in float64, so the only difference left between the two is float summation order (the score
gradients' 1/N factors are powers of two, exact in the loss's float32), and in eval mode: dropout (NDRM1's) draws
other masks when the step's noise is spent over several forward passes, from the same distribution, so in training
mode the two runs are two samples of one step rather than one step. Eval mode leaves the gradient a function of the
weights and the batch alone, which is what accumulation must preserve."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from longrank.data.corpus import Corpus
from longrank.errors import InputError
from longrank.io.trec_files import read_run
from longrank.train.accumulation import accumulate_gradients
from longrank.train.batches import TrainingBatches
from longrank.train.job import TrainingJob, prepare
from longrank.train.losses import listwise_ce
from longrank.config.train_settings import TrainSettings
from longrank.train.trainer import Trainer
from longrank.validation.checks import check_batch_splits
from longrank.validation.validate import validate_config

TRAIN = {"steps": 4, "batch_size": 8, "negatives": 2, "lr": 0.01, "eval_every": 4}
KNRM = {"type": "knrm", "max_doc_len": 40}
TK = {"type": "tk", "n_layers": 1, "n_heads": 2, "ff_dim": 16, "max_query_len": 8, "max_doc_len": 40}
NDRM1 = {"type": "ndrm", "variant": "ndrm1", "hidden_dim": 8, "n_heads": 2, "conv_groups": 2, "conv_window": 3,
         "n_layers": 1, "max_doc_len": 40, "pool_window": 16, "pool_stride": 8, "max_query_len": 8}  # fmt: skip
NDRM3 = {**NDRM1, "variant": "ndrm3"}
# the largest difference allowed between the accumulated and the whole batch's gradients and weights (float64)
TOLERANCE = 1e-6


def trainers(tiny_data, entry: dict, splits: tuple[int, ...]) -> list[Trainer]:
    """A fresh trainer of ``entry`` for each ``train.accumulation`` in ``splits``, each with its own copy of one
    model in float64 and eval mode (the module docstring says why), at step 0 of a fresh training."""
    entry = {**entry, "train": TRAIN}
    settings = TrainSettings.from_entry(entry["type"], entry)
    job = TrainingJob(
        entry["type"],
        entry,
        settings,
        Corpus(tiny_data / "data"),
        read_run(tiny_data / "bm25.run"),
        0,
        30,
        torch.device("cpu"),
        tiny_data / entry["type"] / "model.safetensors",
    )
    torch.manual_seed(0)
    model, _, loss_fn = prepare(job)
    model.double().eval()
    return [
        Trainer(
            dataclasses.replace(job, settings=dataclasses.replace(settings, accumulation=n)),
            copy.deepcopy(model),
            loss_fn,
        )
        for n in splits
    ]


def largest_difference(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("entry", [KNRM, TK, NDRM1], ids=["knrm", "tk", "ndrm1"])
def test_an_accumulated_step_is_the_whole_batchs_step(tiny_data, entry):
    whole, *accumulated = trainers(tiny_data, entry, (1, 2, 4))
    whole_loss = whole.step(whole.batches())
    gradients = [p.grad.clone() for p in whole.params]  # after clipping (grad_clip 1): a function of the whole gradient
    assert any(g.abs().max() > 0 for g in gradients), "a step without a gradient compares nothing"
    for parts in accumulated:
        assert parts.step(parts.batches()) == pytest.approx(whole_loss, abs=TOLERANCE)
        gradient_gap = largest_difference([p.grad for p in parts.params], gradients)
        weight_gap = largest_difference(list(parts.params), list(whole.params))
        split = parts.settings.accumulation
        print(f"{entry['type']} accumulation {split}: gradient {gradient_gap:.1e}, weights {weight_gap:.1e}")
        assert gradient_gap <= TOLERANCE and weight_gap <= TOLERANCE


def test_the_micro_batches_are_the_whole_batchs_groups_in_order(tiny_data):
    (trainer,) = trainers(tiny_data, KNRM, (1,))
    seen: list[list] = []

    def recording(queries, doc_ids, docs):
        seen.append(list(zip(queries, doc_ids)))
        return {}

    def steps(micro: int, offset: int = 0, share: int = 8) -> list[tuple[int, list[int]]]:
        seen.clear()
        batches = TrainingBatches(trainer.sampler, trainer.job.corpus, recording, 0, 3, 8, offset, share, micro)
        sizes = [(step, [groups for groups, _ in parts]) for step, parts in batches]
        return sizes, [pair for part in seen for pair in part], len(seen)

    whole, whole_pairs, _ = steps(1)
    assert whole == [(0, [8]), (1, [8]), (2, [8])]
    for micro in (2, 4):
        sizes, pairs, encoded = steps(micro)
        assert sizes == [(step, [8 // micro] * micro) for step in range(3)] and encoded == 3 * micro
        assert pairs == whole_pairs  # the same queries and documents, in the same order
    # a second process's share (offset 4 of 8) in two micro-batches: the whole batch's last four groups
    _, pairs, _ = steps(2, offset=4, share=4)
    per_step = len(whole_pairs) // 3
    assert pairs == [p for s in range(3) for p in whole_pairs[s * per_step + per_step // 2 : (s + 1) * per_step]]


def test_under_ddp_the_micro_batches_before_the_last_do_not_synchronise(tiny_data, monkeypatch):
    """One gloo process: the accumulated gradient through DistributedDataParallel is the whole batch's, and
    ``no_sync`` wraps every micro-batch but the last (an all-reduce per micro-batch is what accumulation avoids)."""
    (trainer,) = trainers(tiny_data, KNRM, (1,))
    (_, [(groups, encoded)]) = next(trainer.batches())
    trainer.model.zero_grad()
    accumulate_gradients(trainer.model, [(groups, encoded)], listwise_ce, trainer.scaler, torch.device("cpu"), None)
    whole = [p.grad.clone() for p in trainer.params]
    halves = [(groups // 2, {k: v[: len(v) // 2] for k, v in encoded.items()}),
              (groups // 2, {k: v[len(v) // 2 :] for k, v in encoded.items()})]  # fmt: skip
    entered = []
    no_sync = DistributedDataParallel.no_sync
    monkeypatch.setattr(DistributedDataParallel, "no_sync", lambda self: entered.append(1) or no_sync(self))
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        wrapped = DistributedDataParallel(trainer.model)
        trainer.model.zero_grad()
        accumulate_gradients(wrapped, halves, listwise_ce, trainer.scaler, torch.device("cpu"), None)
    finally:
        dist.destroy_process_group()
    assert entered == [1]
    assert largest_difference([p.grad for p in trainer.params], whole) <= TOLERANCE


def validated(entry: dict, train: dict) -> dict:
    config = {"dataset": "cranfield", "models": {"m": {**entry, "train": {"batch_size": 8, **train}}}}
    return validate_config(json.loads(json.dumps(config)))["models"]["m"]


@pytest.mark.parametrize(
    ("train", "message"),
    [
        ({"accumulation": 3}, r"models\.m\.train\.accumulation: expected a positive integer that divides .* 8 groups"),
        ({"accumulation": 4, "processes": 4}, r"models\.m\.train\.accumulation: .* processes 4 = 2 groups"),
        ({"accumulation": 0}, r"models\.m\.train\.accumulation"),
        ({"accumulation": 2.0}, r"models\.m\.train\.accumulation"),
        ({"accumulation": True}, r"models\.m\.train\.accumulation"),
        ({"processes": 3}, r"models\.m\.train\.batch_size: 8 .* divisible by 3"),
    ],
)
def test_a_split_that_does_not_divide_the_batch_is_refused_at_config_load(train, message):
    with pytest.raises(InputError, match=message):
        validated(KNRM, train)


def test_a_pretraining_override_is_checked_too():
    """``train.pretrain`` overrides training keys for its own run (its set under pseudo_queries is another check's)."""
    models = {"m": {**KNRM, "train": {"batch_size": 8, "accumulation": 4, "pretrain": {"queries": "titles"}}}}
    models["m"]["train"]["pretrain"]["batch_size"] = 4  # 4 micro-batches of 1 group
    check_batch_splits(models)
    models["m"]["train"]["pretrain"]["batch_size"] = 2
    with pytest.raises(InputError, match=r"config key models\.m\.train\.pretrain\.accumulation: .* 2 groups"):
        check_batch_splits(models)


def test_a_model_with_batch_norm_is_refused_at_config_load_and_by_the_trainer(tiny_data):
    assert validated(NDRM1, {"accumulation": 4})["train"]["accumulation"] == 4
    assert validated(NDRM3, {"accumulation": 1})
    with pytest.raises(InputError, match=r"models\.m\.train\.accumulation: 2 .* batch norm"):
        validated(NDRM3, {"accumulation": 2})
    # the model types' table says what the built model has: NDRM3 batch norm, NDRM1 none
    entry = {**NDRM3, "train": {**TRAIN, "accumulation": 2}}
    settings = TrainSettings.from_entry("ndrm", entry)
    job = TrainingJob(
        "ndrm", entry, settings, Corpus(tiny_data / "data"), read_run(tiny_data / "bm25.run"), 0, 30,
        torch.device("cpu"), tiny_data / "ndrm3" / "model.safetensors",
    )  # fmt: skip
    model, _, loss_fn = prepare(job)
    assert any(isinstance(m, torch.nn.BatchNorm1d) for m in model.modules())
    with pytest.raises(InputError, match=r"models\.ndrm\.train\.accumulation: 2 .* batch norm"):
        Trainer(job, model, loss_fn)
    Trainer(
        dataclasses.replace(job, settings=dataclasses.replace(settings, accumulation=1)), copy.deepcopy(model), loss_fn
    )
