"""The training loop and reranking: learning happens, a killed run resumes to the same weights, the
final output appears only when training finished, interpolation is chosen on dev queries only."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from longrank.data.corpus import Corpus
from longrank.io import InputError, read_run
from longrank.rerank import interpolate, rerank, with_tail
from longrank.train import loop
from longrank.train.losses import LOSSES
from longrank.train.sampling import PairSampler

KNRM = {"type": "knrm", "max_doc_len": 60, "train": {"steps": 24, "batch_size": 4, "lr": 0.01, "eval_every": 8, "patience": 5}}


def train_knrm(tiny_data, out_name: str, cfg=KNRM):
    corpus = Corpus(tiny_data / "data")
    out = tiny_data / out_name / "model.safetensors"
    loop.train("knrm", cfg, corpus, read_run(tiny_data / "bm25.run"), 0, 30, torch.device("cpu"), out)
    return out


def test_losses_prefer_positive_above_negatives():
    good, bad = torch.tensor([[3.0, 0.0, -1.0]]), torch.tensor([[-1.0, 0.0, 3.0]])
    for name, fn in LOSSES.items():
        assert fn(good) < fn(bad), name


def test_sampler_is_a_function_of_seed_and_step(tiny_data):
    corpus = Corpus(tiny_data / "data")
    sampler = PairSampler(corpus.folds[0]["train"], corpus.qrels, read_run(tiny_data / "bm25.run"), 30, 3, seed=1)
    qids, groups = sampler.batch(5, 4)
    assert (qids, groups) == sampler.batch(5, 4) and (qids, groups) != sampler.batch(6, 4)
    for qid, group in zip(qids, groups):
        assert corpus.qrels[qid][group[0]] > 0 and all(corpus.qrels[qid].get(d, 0) <= 0 for d in group[1:])


def test_training_lowers_the_loss_and_writes_logs(tiny_data):
    out = train_knrm(tiny_data, "run")
    summary = json.loads((out.parent / "train_summary.json").read_text())
    log = (out.parent / "training_log.tsv").read_text().splitlines()[1:]
    losses = [float(line.split("\t")[1]) for line in log]
    assert losses[-1] < losses[0]
    assert 0 <= summary["best_dev_ndcg10"] <= 1 and summary["best_step"] in (8, 16, 24)


def kill_at_step_13(tiny_data, out_name: str, monkeypatch) -> None:
    """Train until step 13, then die as a killed job would (after the step-8 checkpoint)."""
    original = PairSampler.batch

    def dies_at_step_13(self, step, batch_size):
        if step == 13:
            raise KeyboardInterrupt("simulated kill")
        return original(self, step, batch_size)

    monkeypatch.setattr(PairSampler, "batch", dies_at_step_13)
    with pytest.raises(KeyboardInterrupt):
        train_knrm(tiny_data, out_name)
    monkeypatch.setattr(PairSampler, "batch", original)


def test_killed_training_resumes_to_identical_weights(tiny_data, monkeypatch):
    reference = train_knrm(tiny_data, "uninterrupted")
    kill_at_step_13(tiny_data, "killed", monkeypatch)
    out = tiny_data / "killed" / "model.safetensors"
    assert not out.exists(), "a killed run must not leave a final model behind"
    assert json.loads((out.parent / "train_state" / "position.json").read_text())["step"] == 8
    train_knrm(tiny_data, "killed")
    a, b = load_file(str(reference)), load_file(str(out))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_state_of_another_config_is_not_resumed(tiny_data, monkeypatch):
    kill_at_step_13(tiny_data, "changed", monkeypatch)
    changed = {**KNRM, "train": {**KNRM["train"], "lr": 0.02}}
    out = train_knrm(tiny_data, "changed", changed)
    reference = train_knrm(tiny_data, "changed_from_scratch", changed)
    a, b = load_file(str(reference)), load_file(str(out))
    assert all(torch.equal(a[k], b[k]) for k in a), "the state made with the old learning rate was resumed"


def test_unknown_training_key_is_named(tiny_data):
    with pytest.raises(InputError, match=r"models.knrm.train: unknown keys \['epochs'\]"):
        train_knrm(tiny_data, "bad", {**KNRM, "train": {"epochs": 3}})


def test_interpolation_and_tail():
    model = {"q": {"a": 10.0, "b": 0.0}}
    first = {"q": {"a": 1.0, "b": 3.0, "c": 2.0}}
    assert interpolate(model, first, 1.0)["q"] == {"a": 1.0, "b": 0.0}
    assert interpolate(model, first, 0.0)["q"] == {"a": 0.0, "b": 1.0}
    full = with_tail(model, first, ["q"])
    assert sorted(full["q"], key=full["q"].get, reverse=True) == ["a", "b", "c"]


def test_rerank_scores_test_queries_and_chooses_weight_on_dev(tiny_data):
    checkpoint = train_knrm(tiny_data, "run")
    corpus = Corpus(tiny_data / "data")
    rerank("knrm", KNRM, corpus, read_run(tiny_data / "bm25.run"), [str(checkpoint)], [read_run(checkpoint.parent / "dev.run")], 30, 16, torch.device("cpu"), tiny_data / "runs")
    run = read_run(tiny_data / "runs" / "knrm.run")
    assert set(run) == set(corpus.folds[0]["test"])
    assert set(read_run(tiny_data / "runs" / "knrm+bm25.run")) == set(run)
    choice = json.loads((tiny_data / "runs" / "knrm.interpolation.json").read_text())
    assert 0.0 <= choice["weight"] <= 1.0 and len(choice["folds"][0]["dev_ndcg10_by_weight"]) == 11
