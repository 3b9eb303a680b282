"""The trainer's steps one at a time, on a tiny real model (KNRM; NDRM, whose dropout makes the seeding matter) over the
tiny synthetic collection: a step changes the weights, a resume restores the exact position, weights, optimiser and
batches, evaluate-and-checkpoint keeps the best weights by dev, and the position file keeps its shape (one of another
shape is refused, never read in part)."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from safetensors.torch import load_file

from longrank.data.corpus import Corpus
from longrank.io.trec_files import read_run
from longrank.results.file_records import file_record
from longrank.train import train as train_stage
from longrank.train.state_sets import read_position, sets_newest_first
from longrank.train.job import TrainingJob, prepare
from longrank.train.position import Evaluation, PositionShapeError, TrainingPosition
from longrank.train.sampling import PairSampler
from longrank.config.train_settings import TrainSettings
from longrank.train.trainer import Trainer

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

KNRM = {
    "type": "knrm",
    "max_doc_len": 60,
    "train": {"steps": 12, "batch_size": 4, "lr": 0.01, "eval_every": 4, "patience": 5},
}
NDRM = {  # NDRM1 at toy sizes: dropout 0.2, so each step's noise seed matters
    "type": "ndrm",
    "variant": "ndrm1",
    "hidden_dim": 16,
    "n_heads": 4,
    "conv_groups": 4,
    "conv_window": 5,
    "n_layers": 1,
    "max_doc_len": 60,
    "pool_window": 16,
    "pool_stride": 8,
    "max_query_len": 8,
    "train": {"steps": 12, "batch_size": 4, "lr": 1e-3, "eval_every": 4, "patience": 5},
}


def job_of(tiny_data, entry: dict, out_name: str) -> TrainingJob:
    name = entry["type"]
    return TrainingJob(
        name,
        entry,
        TrainSettings.from_entry(name, entry),
        Corpus(tiny_data / "data"),
        read_run(tiny_data / "bm25.run"),
        0,
        30,
        torch.device("cpu"),
        tiny_data / out_name / "model.safetensors",
    )


def trainer_of(job: TrainingJob) -> Trainer:
    """Set up and resumed, as ``run_job`` leaves it before its first step."""
    model, built, loss_fn = prepare(job)
    trainer = Trainer(job, model, loss_fn)
    trainer.resume(built)
    trainer.model.train()
    return trainer


def weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_step_changes_the_weights_and_advances_the_position(tiny_data):
    trainer = trainer_of(job_of(tiny_data, KNRM, "one"))
    before, batches = weights(trainer.model), trainer.batches()
    loss = trainer.step(batches)
    assert isinstance(loss, float) and loss > 0 and trainer.position.step == 1
    after = weights(trainer.model)
    assert not same(before, after) and trainer.scheduler.last_epoch == 1
    # the same job again: the same step, to the bit
    again = trainer_of(job_of(tiny_data, KNRM, "again"))
    assert again.step(again.batches()) == loss and same(weights(again.model), after)


def test_a_resume_restores_the_exact_position_weights_optimiser_and_batches(tiny_data):
    """NDRM (dropout): each step's noise is seeded by the step, so a trainer resumed from a checkpoint takes the step
    the one that wrote it takes next, to the bit."""
    job = job_of(tiny_data, NDRM, "ndrm")
    first = trainer_of(job)
    assert any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in first.model.modules())
    batches = first.batches()
    losses = [first.step(batches) for _ in range(4)]
    first.evaluate_and_checkpoint(sum(losses) / 4)
    resumed = trainer_of(job)
    assert resumed.position == first.position and resumed.position.step == 4
    assert same(weights(resumed.model), weights(first.model))
    moments = [first.optimizer.state[p]["exp_avg_sq"] for p in first.params]
    assert all(torch.equal(resumed.optimizer.state[p]["exp_avg_sq"], m) for p, m in zip(resumed.params, moments))
    assert resumed.scheduler.last_epoch == first.scheduler.last_epoch == 4
    resumed_batches = resumed.batches()
    assert resumed.step(resumed_batches) == first.step(batches)
    assert same(weights(resumed.model), weights(first.model))


def test_evaluate_and_checkpoint_keeps_the_best_weights_by_dev(tiny_data):
    job = job_of(tiny_data, KNRM, "best")
    trainer = trainer_of(job)
    batches = trainer.batches()
    trainer.step(batches)
    position = trainer.evaluate_and_checkpoint(0.9)  # the first evaluation improves on nothing: kept
    assert position.best_step == 1 and position.evals_without_improvement == 0 and position.history[0].step == 1
    kept = load_file(str(job.state_dir / "step-000000001" / "best.safetensors"))
    trainer.step(batches)
    trainer.position.best_dev_ndcg10 = 2.0  # as if step 1 had scored above any nDCG: step 2 cannot improve on it
    position = trainer.evaluate_and_checkpoint(0.8)
    assert position.best_step == 1 and position.evals_without_improvement == 1
    assert [(e.step, e.train_loss) for e in position.history] == [(1, 0.9), (2, 0.8)]
    newest = sets_newest_first(job.state_dir)[0]
    assert newest.name == "step-000000002" and read_position(newest) == position
    assert same(load_file(str(newest / "best.safetensors")), kept)  # carried over, not step 2's
    assert not same(load_file(str(newest / "last.safetensors")), kept)
    trainer.finish()
    assert same(load_file(str(job.out)), kept)
    assert (job.out.parent / "dev.run").read_bytes() == (newest / "best_dev.run").read_bytes()
    assert (job.out.parent / "training_log.tsv").read_text().splitlines()[1:] == [
        f"{e.step}\t{e.train_loss:.6f}\t{e.dev_ndcg10:.6f}" for e in position.history
    ]


def test_patience_0_keeps_the_last_evaluations_weights_and_never_stops_early(tiny_data):
    """train.patience: 0 (a paper's fixed number of epochs, MIR's "two epochs"): a worse dev evaluation still
    replaces the kept weights, and the loop goes on whatever the dev figures."""
    entry = {**KNRM, "train": {**KNRM["train"], "patience": 0}}
    job = job_of(tiny_data, entry, "last")
    trainer = trainer_of(job)
    batches = trainer.batches()
    trainer.step(batches)
    trainer.evaluate_and_checkpoint(0.9)
    trainer.step(batches)
    trainer.position.best_dev_ndcg10 = 2.0  # no nDCG improves on it: patience >= 1 would keep step 1's weights
    position = trainer.evaluate_and_checkpoint(0.8)
    assert position.best_step == 2 and position.evals_without_improvement == 0 and trainer.patient()
    newest = sets_newest_first(job.state_dir)[0]
    assert same(load_file(str(newest / "best.safetensors")), load_file(str(newest / "last.safetensors")))


def test_optimizer_and_schedule_settings_choose_adam_and_a_constant_rate(tiny_data):
    """train.optimizer: adam is torch's Adam (weight_decay coupled into the gradient as L2), adamw (the default)
    AdamW; train.schedule: constant keeps the rate after warm-up, linear (the default) decays it to 0."""
    default = trainer_of(job_of(tiny_data, KNRM, "adamw"))
    assert type(default.optimizer) is torch.optim.AdamW
    entry = {**KNRM, "train": {**KNRM["train"], "optimizer": "adam", "schedule": "constant", "weight_decay": 0.01}}
    adam = trainer_of(job_of(tiny_data, entry, "adam"))
    assert type(adam.optimizer) is torch.optim.Adam and adam.optimizer.defaults["weight_decay"] == 0.01
    batches, linear_batches = adam.batches(), default.batches()
    for _ in range(6):
        adam.step(batches)
        default.step(linear_batches)
    assert adam.scheduler.get_last_lr()[0] == pytest.approx(0.01)  # constant: the configured rate
    assert default.scheduler.get_last_lr()[0] == pytest.approx(0.01 * 6 / 12)  # linear: half-way to 0


def test_the_position_file_keeps_the_shape_the_stage_has_always_written(tiny_data):
    out = tiny_data / "shape" / "model.safetensors"
    train_stage.train(
        "knrm", KNRM, Corpus(tiny_data / "data"), read_run(tiny_data / "bm25.run"), 0, 30, torch.device("cpu"), out
    )
    raw = json.loads((sets_newest_first(out.parent / "train_state")[0] / "position.json").read_text())
    assert list(raw) == [
        "step",
        "best_dev_ndcg10",
        "best_step",
        "evals_without_improvement",
        "history",
        "seconds",
        "fingerprint",
        "inputs",
    ]
    assert [list(h) for h in raw["history"]] == [["step", "train_loss", "dev_ndcg10"]] * 3
    assert TrainingPosition.from_json(raw).to_json() == raw


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda raw: raw.pop("inputs"), r"missing \['inputs'\]"),
        (lambda raw: raw.update(epoch=3), r"unknown \['epoch'\]"),
        (lambda raw: raw["history"][0].pop("dev_ndcg10"), "history holds an entry of another shape"),
        (lambda raw: raw.update(step="8"), "step is '8', of the wrong type"),
    ],
)
def test_a_position_of_another_shape_is_refused_by_name(tmp_path, change, message):
    raw = TrainingPosition(8, 0.5, 8, 0, [Evaluation(8, 0.7, 0.5)], 1.0, "f", {"documents": "d"}).to_json()
    change(raw)
    with pytest.raises(PositionShapeError, match=message) as err:
        TrainingPosition.from_json(raw, tmp_path / "position.json")
    assert str(tmp_path / "position.json") in str(err.value)


def test_a_state_whose_position_has_another_shape_is_discarded_never_reused(tiny_data, monkeypatch, caplog):
    """A checkpoint set that verifies (its manifest rewritten to match) but whose position.json is of an older shape
    (no ``inputs``, as before the fingerprint named them): training says so and starts afresh."""
    corpus, candidates = Corpus(tiny_data / "data"), read_run(tiny_data / "bm25.run")
    out = tiny_data / "old" / "model.safetensors"
    original = PairSampler.batch

    def dies_at_step_6(self, step, batch_size):
        if step == 6:
            raise KeyboardInterrupt("simulated kill")
        return original(self, step, batch_size)

    monkeypatch.setattr(PairSampler, "batch", dies_at_step_6)
    with pytest.raises(KeyboardInterrupt):
        train_stage.train("knrm", KNRM, corpus, candidates, 0, 30, torch.device("cpu"), out)
    monkeypatch.undo()
    (saved,) = sets_newest_first(out.parent / "train_state")
    raw = json.loads((saved / "position.json").read_text())
    del raw["inputs"]
    (saved / "position.json").write_text(json.dumps(raw))
    manifest = json.loads((saved / "manifest.json").read_text())
    manifest["files"]["position.json"] = file_record(saved / "position.json")
    (saved / "manifest.json").write_text(json.dumps(manifest))
    caplog.set_level(logging.INFO, logger="longrank.train")
    train_stage.train("knrm", KNRM, corpus, candidates, 0, 30, torch.device("cpu"), out)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("discarding the training state")]
    assert "position.json: not a training position of this version; missing ['inputs']" in line
    assert not [r for r in caplog.records if r.getMessage().startswith("resuming")]
    fresh = tiny_data / "fresh" / "model.safetensors"
    train_stage.train("knrm", KNRM, corpus, candidates, 0, 30, torch.device("cpu"), fresh)
    assert out.read_bytes() == fresh.read_bytes()
