"""Checkpoints verify themselves: every file of a training checkpoint set, truncated or with
one bit flipped, makes the set be moved aside with a warning and training fall back to the set before it (or start
afresh), ending at the weights an uninterrupted run gives; a corrupt set is never copied out as the model; and the
rerank stage refuses a model its manifest does not vouch for."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import torch

from longrank.data.corpus import Corpus
from longrank.errors import InputError
from longrank.io.json_yaml import write_json
from longrank.io.trec_files import read_run
from longrank.models.checkpoint import load_model, manifest_path
from longrank.rerank import RerankJob, rerank
from longrank.train import state_sets, train_state
from longrank.train import train as train_stage
from longrank.train.state_sets import sets_newest_first
from longrank.train.sampling import PairSampler
from conftest import synthetic_collection, write_local_collection

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

KNRM = {
    "type": "knrm",
    "max_doc_len": 60,
    "train": {"steps": 24, "batch_size": 4, "lr": 0.01, "eval_every": 8, "patience": 5},
}
SET_FILES = [
    "last.safetensors",
    "optimizer.safetensors",
    "optimizer.json",
    "position.json",
    "best.safetensors",
    "best_dev.run",
    "manifest.json",
]


def train(root: Path, out_name: str) -> Path:
    out = root / out_name / "model.safetensors"
    train_stage.train("knrm", KNRM, Corpus(root / "data"), read_run(root / "bm25.run"), 0, 30, torch.device("cpu"), out)
    return out


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """Shared by the cases (each copies what it changes): the tiny collection, an uninterrupted run (``reference``)
    and a run killed at step 21 (``killed``: checkpoint sets at steps 8 and 16, no model)."""
    from longrank.data.data import prepare
    from longrank.io.trec_files import write_run
    from longrank.retrieval.bm25 import bm25_run

    root = tmp_path_factory.mktemp("integrity")
    docs, queries, qrels = synthetic_collection()
    prepare(
        write_local_collection(root / "src", docs, queries, qrels),
        {"method": "full"},
        {"method": "holdout", "dev": 0.25, "test": 0.25},
        root / "data",
    )
    corpus = Corpus(root / "data")
    write_run(root / "bm25.run", bm25_run(corpus.docs, corpus.queries, top_k=30), "bm25")
    train(root, "reference")
    original = PairSampler.batch

    def dies_at_step_21(self, step, batch_size):
        if step == 21:
            raise KeyboardInterrupt("simulated kill")
        return original(self, step, batch_size)

    PairSampler.batch = dies_at_step_21
    try:
        with pytest.raises(KeyboardInterrupt):
            train(root, "killed")
    finally:
        PairSampler.batch = original
    assert [p.name for p in sets_newest_first(root / "killed" / "train_state")] == ["step-000000016", "step-000000008"]
    return root


def copy_of(base: Path, source: str, name: str) -> Path:
    shutil.copytree(base / source, base / name)
    return base / name


def damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(bytes(data[: len(data) // 2]))
    else:  # one bit flipped in the middle
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))


def messages(caplog, start: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(start)]


@pytest.mark.parametrize("how", ["truncated", "bit-flipped"])
@pytest.mark.parametrize("file", SET_FILES)
def test_a_damaged_file_sets_its_set_aside_and_training_resumes_from_the_one_before(base, caplog, file, how):
    caplog.set_level(logging.INFO)
    run = copy_of(base, "killed", f"damaged_{file}_{how}")
    damage(run / "train_state" / "step-000000016" / file, how)
    out = train(base, run.name)
    (warning,) = messages(caplog, "checkpoint set")
    assert "step-000000016 is corrupt" in warning and "moved aside" in warning
    assert [p.name for p in (run / "train_state").glob("step-000000016.corrupt-*")], (
        "the corrupt set was not kept aside"
    )
    assert messages(caplog, "resuming knrm fold 0 at step 8")
    assert out.read_bytes() == (base / "reference" / "model.safetensors").read_bytes()


def test_with_every_set_corrupt_training_starts_afresh(base, caplog):
    caplog.set_level(logging.INFO)
    run = copy_of(base, "killed", "all_corrupt")
    for step in ("step-000000016", "step-000000008"):
        damage(run / "train_state" / step / "last.safetensors", "bit-flipped")
    out = train(base, run.name)
    assert len(messages(caplog, "checkpoint set")) == 2 and not messages(caplog, "resuming")
    assert len(list((run / "train_state").glob("*.corrupt-*"))) == 2  # kept for inspection through the fresh start
    assert out.read_bytes() == (base / "reference" / "model.safetensors").read_bytes()


def test_a_finished_state_with_truncated_best_weights_is_never_copied_out(base, caplog):
    """The finding: the job reran (its output gone), the finished state's best weights truncated. The finished set,
    the only one a finished training keeps, is moved aside, and training starts afresh to the same model."""
    caplog.set_level(logging.INFO)
    run = copy_of(base, "reference", "finished_truncated")
    (run / "model.safetensors").unlink()
    (newest,) = sets_newest_first(run / "train_state")
    assert newest.name == "step-000000024"
    damage(newest / "best.safetensors", "truncated")
    out = train(base, run.name)
    assert messages(caplog, "checkpoint set") and not messages(caplog, "resuming")
    assert messages(caplog, "knrm fold 0 step 8/24")  # trained again
    assert out.read_bytes() == (base / "reference" / "model.safetensors").read_bytes()


def test_a_finished_training_keeps_only_what_copying_its_model_out_needs(base):
    """No finished training resumes, so its state is one set of the best weights, their dev run and the position
    (most of a resumable state, the last weights and the optimiser's moments, and the older set are gone)."""
    (final,) = sets_newest_first(base / "reference" / "train_state")
    assert sorted(p.name for p in final.iterdir()) == sorted(
        ["best.safetensors", "best_dev.run", "position.json", "manifest.json"]
    )
    assert state_sets.is_finished(final) and not state_sets.set_problems(final)
    assert final.joinpath("best.safetensors").read_bytes() == (base / "reference" / "model.safetensors").read_bytes()


def test_a_rerun_of_a_finished_training_copies_its_model_out_without_training(base, caplog):
    """``snakemake -R train`` (or a changed ``train.processes``) deletes the outputs and runs the job again: the same
    model and dev run come back from the finished state, and no step is trained."""
    caplog.set_level(logging.INFO)
    run = copy_of(base, "reference", "rerun_finished")
    for name in ("model.safetensors", "model.manifest.json", "dev.run", "train_summary.json", "training_log.tsv"):
        (run / name).unlink()
    out = train(base, run.name)
    assert messages(caplog, "resuming knrm fold 0 at step 24") and not messages(caplog, "knrm fold 0 step")
    for name in ("model.safetensors", "dev.run", "training_log.tsv"):
        assert (run / name).read_bytes() == (base / "reference" / name).read_bytes(), name
    assert out.read_bytes() == (base / "reference" / "model.safetensors").read_bytes()


def test_a_kill_while_a_finished_state_is_reduced_leaves_it_usable(base, caplog):
    """Killed after the finished manifest replaced the old one but before the files it drops were deleted: the set
    verifies, the model is copied out of it, and the leftovers go when the state is reduced again."""
    caplog.set_level(logging.INFO)
    run = copy_of(base, "killed", "killed_in_finish")
    state = run / "train_state"
    original = Path.unlink

    def dies_deleting(path, *args, **kwargs):
        if path.name == "optimizer.json":
            raise KeyboardInterrupt("simulated kill")
        original(path, *args, **kwargs)

    shutil.copytree(base / "reference" / "train_state" / "step-000000024", state / "step-000000024")
    full = state / "step-000000016"
    for name in ("last.safetensors", "optimizer.safetensors", "optimizer.json"):  # as the set had them unfinished
        shutil.copyfile(full / name, state / "step-000000024" / name)
    Path.unlink = dies_deleting
    try:
        with pytest.raises(KeyboardInterrupt):
            state_sets.finish_state(state)
    finally:
        Path.unlink = original
    (final,) = sets_newest_first(state)
    assert (final / "optimizer.json").exists() and not state_sets.set_problems(final)
    out = train(base, run.name)
    assert messages(caplog, "resuming knrm fold 0 at step 24") and not messages(caplog, "knrm fold 0 step")
    assert out.read_bytes() == (base / "reference" / "model.safetensors").read_bytes()
    assert sorted(p.name for p in final.iterdir()) == sorted(
        ["best.safetensors", "best_dev.run", "position.json", "manifest.json"]
    )


def test_a_set_a_kill_left_half_written_is_never_read(base, caplog):
    """A kill while a set is written leaves its temporary directory, never a set: the run resumes from the set
    before, and the leftover is cleared when the next set is written."""
    caplog.set_level(logging.INFO)
    run = copy_of(base, "killed", "half_written")
    state = run / "train_state"
    shutil.move(state / "step-000000016", state / ".partial-step-000000016-12345")
    (state / ".partial-step-000000016-12345" / "manifest.json").unlink()
    damage(state / ".partial-step-000000016-12345" / "optimizer.safetensors", "truncated")
    out = train(base, run.name)
    assert messages(caplog, "resuming knrm fold 0 at step 8") and not messages(caplog, "checkpoint set")
    assert not list(state.glob(".partial-*"))
    assert out.read_bytes() == (base / "reference" / "model.safetensors").read_bytes()


def test_a_kill_while_a_set_is_written_leaves_the_earlier_sets_whole(base, monkeypatch):
    run = base / "killed_in_write"
    original = train_state.write_json

    def dies_writing_step_16(path, obj):
        if Path(path).name == "position.json" and obj["step"] == 16:
            raise KeyboardInterrupt("simulated kill")
        original(path, obj)

    monkeypatch.setattr(train_state, "write_json", dies_writing_step_16)
    with pytest.raises(KeyboardInterrupt):
        train(base, run.name)
    monkeypatch.undo()
    assert [p.name for p in sets_newest_first(run / "train_state")] == ["step-000000008"]
    assert not state_sets.set_problems(run / "train_state" / "step-000000008")


def test_a_state_in_the_layout_before_checksums_is_discarded(base, caplog):
    caplog.set_level(logging.INFO)
    run = copy_of(base, "killed", "old_layout")
    state = run / "train_state"
    for file in (state / "step-000000016").iterdir():  # the files as the earlier layout kept them, unchecked
        shutil.move(file, state / file.name)
    (state / "manifest.json").unlink()
    out = train(base, run.name)
    assert [m for m in messages(caplog, "discarding the training state") if "predates checksummed" in m]
    assert out.read_bytes() == (base / "reference" / "model.safetensors").read_bytes()


# ---- the final model ------------------------------------------------------------------------------------------
def rerank_with(base: Path, checkpoint: Path) -> None:
    corpus = Corpus(base / "data")
    rerank(
        RerankJob(
            "knrm",
            KNRM,
            corpus,
            read_run(base / "bm25.run"),
            [str(checkpoint)],
            10,
            16,
            torch.device("cpu"),
            checkpoint.parent / "runs",
        )
    )


def test_the_model_has_a_manifest_and_rerank_scores_with_it(base):
    model = base / "reference" / "model.safetensors"
    assert manifest_path(model).name == "model.manifest.json" and manifest_path(model).exists()
    run = copy_of(base, "reference", "intact")
    rerank_with(base, run / "model.safetensors")
    assert read_run(run / "runs" / "knrm.run")


@pytest.mark.parametrize("how", ["truncated", "bit-flipped"])
def test_rerank_refuses_a_damaged_model(base, how):
    run = copy_of(base, "reference", f"model_{how}")
    damage(run / "model.safetensors", how)
    with pytest.raises(
        InputError, match=r"model.safetensors is corrupt: model.safetensors( has \d+ bytes|'s SHA-256 differs)"
    ):
        rerank_with(base, run / "model.safetensors")
    assert not (run / "runs").exists()


def test_rerank_refuses_a_model_without_its_manifest(base):
    run = copy_of(base, "reference", "no_manifest")
    (run / "model.manifest.json").unlink()
    with pytest.raises(InputError, match="has no manifest"):
        rerank_with(base, run / "model.safetensors")
    # elsewhere (bench, artifacts, --init) a file without a manifest is read as before: safetensors only
    assert load_model(run / "model.safetensors", KNRM, Corpus(base / "data")) is not None


def test_a_changed_manifest_refuses_the_model_too(base):
    run = copy_of(base, "reference", "manifest_changed")
    manifest = run / "model.manifest.json"
    write_json(manifest, {"files": {"model.safetensors": {"size": 1, "sha256": "0" * 64}}})
    with pytest.raises(InputError, match="corrupt"):
        load_model(run / "model.safetensors", KNRM, Corpus(base / "data"))
