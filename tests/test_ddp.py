"""Training on several processes (DistributedDataParallel, gloo on the CPU): two processes sharing the global
batch take the steps one process takes on the whole batch, rank 0 alone writes, and the process count is
checked against the batch and the launcher. Run as a script, this file is a torchrun worker (see ``__main__``)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from longrank.data.corpus import Corpus
from longrank.errors import InputError
from longrank.io.trec_files import read_run
from longrank.train import train as train_stage
from longrank.train.state_sets import read_position, sets_newest_first
from longrank.train.fingerprint import fingerprint_of, training_inputs
from longrank.train.losses import LOSSES, with_negative_pairs
from longrank.train.optimiser import parameter_groups
from longrank.train.sampling import PairSampler
from longrank.config.train_settings import TrainSettings

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

# eval_every 1: training_log.tsv then holds every step's loss (it logs the mean loss since the last evaluation)
KNRM = {
    "type": "knrm",
    "max_doc_len": 60,
    "train": {"steps": 8, "batch_size": 8, "lr": 0.01, "eval_every": 1, "patience": 0},
}
KNRM2 = {**KNRM, "train": {**KNRM["train"], "processes": 2}}
RTOL = 1e-4
REPO = Path(__file__).resolve().parents[1]


def env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}


def launch(command: list[str]) -> str:
    """Run a training command in fresh processes; its stderr (the workers' too), shown when it fails."""
    done = subprocess.run(command, env=env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-6000:]
    return done.stderr


def train_args(tiny_data, cfg: dict, out: Path) -> list[str]:
    return [
        "--model",
        "knrm",
        "--model-config",
        json.dumps(cfg),
        "--data",
        str(tiny_data / "data"),
        "--candidates",
        str(tiny_data / "bm25.run"),
        "--fold",
        "0",
        "--rerank-depth",
        "30",
        "--device",
        "cpu",
        "--out",
        str(out),
    ]


def train_in_process(tiny_data, cfg: dict, out: Path) -> Path:
    """Training in this process, on one thread (conftest), as the launched processes run (``env``: OMP_NUM_THREADS=1):
    the thread count is in the fingerprint."""
    assert torch.get_num_threads() == 1
    train_stage.train(
        "knrm", cfg, Corpus(tiny_data / "data"), read_run(tiny_data / "bm25.run"), 0, 30, torch.device("cpu"), out
    )
    return out


def newest_set(out: Path) -> Path:
    """The newest checkpoint set of the training whose model is ``out``."""
    return sets_newest_first(out.parent / "train_state")[0]


def curve_of(out: Path) -> list[tuple[int, float, float]]:
    """(step, training loss, dev nDCG@10) per evaluation, as training_log.tsv lists them (eval_every 1: every step),
    at full precision (the state's history the log is written from)."""
    history = read_position(newest_set(out)).history
    logged = [line.split("\t") for line in (out.parent / "training_log.tsv").read_text().splitlines()[1:]]
    assert [(int(s), round(float(loss), 6)) for s, loss, _ in logged] == [
        (h.step, round(h.train_loss, 6)) for h in history
    ]
    return [(h.step, h.train_loss, h.dev_ndcg10) for h in history]


def assert_same_training(one: Path, two: Path) -> dict:
    """The loss curves and final weights of a 1-process and a 2-process run agree; returns the largest differences."""
    a, b = curve_of(one), curve_of(two)
    assert [s for s, _, _ in a] == [s for s, _, _ in b] == list(range(1, 9))
    loss_a, loss_b = (
        torch.tensor([x[1] for x in a], dtype=torch.float64),
        torch.tensor([x[1] for x in b], dtype=torch.float64),
    )
    torch.testing.assert_close(loss_b, loss_a, rtol=RTOL, atol=1e-6)
    torch.testing.assert_close(torch.tensor([x[2] for x in b]), torch.tensor([x[2] for x in a]), rtol=RTOL, atol=1e-6)
    assert loss_a[-1] < loss_a[0]  # it learned something, so agreeing is not trivially so
    # patience 0: the kept model is the weights after step 8 (a finished training keeps no other weights)
    wa, wb = (load_file(str(out)) for out in (one, two))
    assert wa.keys() == wb.keys()
    for key in wa:
        torch.testing.assert_close(wb[key], wa[key], rtol=RTOL, atol=1e-6, msg=f"model.safetensors: {key}")
    summary = json.loads((two.parent / "train_summary.json").read_text())
    assert (
        summary["processes"] == 2
        and summary["best_step"] == json.loads((one.parent / "train_summary.json").read_text())["best_step"]
    )
    return {
        "loss_max_abs": float((loss_a - loss_b).abs().max()),
        "loss_max_rel": float(((loss_a - loss_b) / loss_a).abs().max()),
        "last_weights_max_abs": max(float((wa[k] - wb[k]).abs().max()) for k in wa),
        "last_weights_max_rel": max(float(((wa[k] - wb[k]) / wa[k].abs().clamp_min(1e-3)).abs().max()) for k in wa),
        "best_step": summary["best_step"],
    }


def test_two_processes_under_torchrun_train_as_one_and_rank_1_writes_nothing(tiny_data):
    """Started by torchrun, from scratch; rank 1 is given another --out (this file's ``__main__``): nothing may appear there."""
    one = train_in_process(tiny_data, KNRM, tiny_data / "one" / "model.safetensors")
    two = tiny_data / "two" / "model.safetensors"
    started = time.time()
    launch(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node=2",
            __file__,
            *train_args(tiny_data, KNRM2, two),
        ]
    )
    print(f"2 processes (torchrun): {time.time() - started:.1f} s;", assert_same_training(one, two))
    assert (tiny_data / "rank1_marker").read_text() == "1"  # rank 1 did run, with its own --out
    assert not (tiny_data / "rank1").exists(), "rank 1 wrote into its output directory"


def test_train_processes_resumes_a_killed_run_on_two_processes_and_trains_as_one(tiny_data, monkeypatch):
    """The Snakemake rule's command line, unchanged: ``train.processes: 2`` makes the command launch two workers.
    They resume a state left at step 4 (by one process here: the process count is not part of the fingerprint,
    and rank 0 of a killed multi-process run leaves the same files), every rank loading it, and end where an
    uninterrupted single process ends."""
    one = train_in_process(tiny_data, KNRM, tiny_data / "one" / "model.safetensors")
    original = PairSampler.batch

    def dies_at_step_4(self, step, batch_size):
        if step == 4:
            raise KeyboardInterrupt("simulated kill")
        return original(self, step, batch_size)

    two = tiny_data / "two" / "model.safetensors"
    monkeypatch.setattr(PairSampler, "batch", dies_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        train_in_process(tiny_data, KNRM, two)
    monkeypatch.undo()
    assert read_position(newest_set(two)).step == 4 and not two.exists()
    started = time.time()
    stderr = launch([sys.executable, "-m", "longrank", "train", *train_args(tiny_data, KNRM2, two)])
    assert "launching 2 training processes" in stderr
    assert stderr.count("resuming knrm fold 0 at step 4") == 1  # rank 0 says so (starting over would match too)
    print(f"2 processes (train.processes, steps 5-8): {time.time() - started:.1f} s;", assert_same_training(one, two))
    assert sorted(p.name for p in two.parent.iterdir()) == sorted(p.name for p in one.parent.iterdir())


def train_command(tiny_data, cfg: dict, out: Path) -> None:
    parser = argparse.ArgumentParser()
    train_stage.add_arguments(parser)
    train_stage.run(parser.parse_args(train_args(tiny_data, cfg, out)))


def test_a_batch_the_processes_cannot_share_equally_is_named_before_any_launch(tiny_data):
    odd = {**KNRM, "train": {**KNRM2["train"], "batch_size": 7}}
    for attempt in (train_command, train_in_process):
        with pytest.raises(InputError, match=r"models\.knrm\.train\.batch_size: 7 .* divisible by 2"):
            attempt(tiny_data, odd, tiny_data / "odd" / "model.safetensors")
    assert not (tiny_data / "odd").exists()


def test_the_process_count_must_match_torchruns(tiny_data, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(InputError, match=r"models\.knrm\.train\.processes is 1 .* WORLD_SIZE=2"):
        train_in_process(tiny_data, KNRM, tiny_data / "x" / "model.safetensors")
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    with pytest.raises(
        InputError, match=r"models\.knrm\.train\.processes: 2 processes are started by the train command"
    ):
        train_in_process(tiny_data, KNRM2, tiny_data / "x" / "model.safetensors")


@pytest.mark.parametrize("name", [*LOSSES, "ranknet+negative_pairs"])
def test_every_loss_averaged_over_equal_shares_is_the_whole_batchs(name):
    """What makes N processes equal to one: DDP averages the shares' gradients, so each loss must be a mean over
    rows (queries) that the mean of equal shares' losses reproduces, gradient included."""
    loss = with_negative_pairs(LOSSES["ranknet"], 1) if name == "ranknet+negative_pairs" else LOSSES[name]
    scores = torch.randn(8, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0), requires_grad=True)
    whole = loss(scores)
    (grad_whole,) = torch.autograd.grad(whole, scores)
    shared = torch.stack([loss(share) for share in scores.chunk(2)]).mean()  # 2 processes, DDP's average
    (grad_shared,) = torch.autograd.grad(shared, scores)
    torch.testing.assert_close(shared, whole)
    torch.testing.assert_close(grad_shared, grad_whole)


def test_the_process_count_is_not_part_of_the_fingerprint(tiny_data):
    corpus, candidates = Corpus(tiny_data / "data"), read_run(tiny_data / "bm25.run")

    def fingerprint(cfg: dict) -> str:
        return fingerprint_of(training_inputs(cfg, corpus, corpus.folds[0], 30, candidates, built={}))

    prints = {
        fingerprint({**KNRM, "train": {**KNRM["train"], **extra}}) for extra in ({}, {"processes": 1}, {"processes": 4})
    }
    assert len(prints) == 1
    assert fingerprint({**KNRM, "train": {**KNRM["train"], "batch_size": 4}}) not in prints


def test_parameter_groups_see_through_the_ddp_wrapper(tiny_data, tmp_path):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from longrank.models.registry import build_model

    model = build_model(KNRM, Corpus(tiny_data / "data"))
    settings = TrainSettings(scoring_lr=0.05, embedding_lr=1e-4)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        wrapped = DistributedDataParallel(model)
        assert next(n for n, _ in wrapped.named_parameters()).startswith("module.")
        plain, seen = parameter_groups(model, settings, "knrm"), parameter_groups(wrapped, settings, "knrm")
    finally:
        dist.destroy_process_group()
    assert [(g["name"], g.get("lr"), [id(p) for p in g["params"]]) for g in seen] == [
        (g["name"], g.get("lr"), [id(p) for p in g["params"]]) for g in plain
    ]
    assert {g["name"]: g.get("lr") for g in seen} == {"embeddings": 1e-4, "scoring": 0.05}


if __name__ == "__main__":
    # A torchrun worker: ``python -m longrank train`` with rank 1's --out moved to <data>/../rank1/, so that any file
    # rank 1 writes shows there (it reads nothing from its output directory in a fresh run).
    from longrank.cli import main

    argv = sys.argv[1:]
    if os.environ["RANK"] != "0":
        out = argv.index("--out") + 1
        root = Path(argv[argv.index("--data") + 1]).parent
        (root / "rank1_marker").write_text(os.environ["RANK"])
        argv[out] = str(root / "rank1" / "model.safetensors")
    main(["train", *argv])
