"""The training loop and reranking: learning happens, a killed run resumes to the same weights, the
final output appears only when training finished, interpolation is chosen on dev queries only."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import stat

import pytest
import torch
from safetensors.torch import load_file

from longrank import artifacts
from longrank.data.corpus import Corpus
from longrank.errors import InputError
from longrank.io.json_yaml import read_json, write_json
from longrank.io.trec_files import read_run
from longrank.config import model_types
from longrank.models import registry
from longrank.models.knrm import KNRM as KNRMModel
from longrank.interpolate import interpolate
from longrank.rerank import RerankJob, rerank
from longrank.runs import with_tail
from longrank.train import train as train_stage, trainer
from longrank.train.state_sets import read_position, sets_newest_first
from longrank.train.losses import LOSSES
from longrank.train.sampling import PairSampler

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

KNRM = {
    "type": "knrm",
    "max_doc_len": 60,
    "train": {"steps": 24, "batch_size": 4, "lr": 0.01, "eval_every": 8, "patience": 5},
}


def train_knrm(tiny_data, out_name: str, cfg=KNRM):
    corpus = Corpus(tiny_data / "data")
    out = tiny_data / out_name / "model.safetensors"
    train_stage.train("knrm", cfg, corpus, read_run(tiny_data / "bm25.run"), 0, 30, torch.device("cpu"), out)
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
    # the threads it trained on: CPU weights depend on them (workflow/rules/common.smk, MODEL_THREADS)
    assert summary["threads"] == torch.get_num_threads() >= 1


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


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_reduced_precision_is_a_gpu_setting_and_the_cpu_trains_the_same_weights(tiny_data, precision):
    """train.precision autocasts on a GPU only: on the CPU the weights equal fp32 training's, bit for bit."""
    reference = load_file(train_knrm(tiny_data, "fp32"))
    reduced = load_file(train_knrm(tiny_data, precision, {**KNRM, "train": {**KNRM["train"], "precision": precision}}))
    assert reference.keys() == reduced.keys() and all(torch.equal(reference[k], reduced[k]) for k in reference)


def test_killed_training_resumes_to_identical_weights(tiny_data, monkeypatch):
    reference = train_knrm(tiny_data, "uninterrupted")
    kill_at_step_13(tiny_data, "killed", monkeypatch)
    out = tiny_data / "killed" / "model.safetensors"
    assert not out.exists(), "a killed run must not leave a final model behind"
    (saved,) = sets_newest_first(out.parent / "train_state")
    assert read_position(saved).step == 8
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


def test_state_of_another_parameter_layout_is_not_resumed(tiny_data, monkeypatch):
    """A state left by other code (here the optimiser's parameter groups split otherwise, as when a model moves its
    new layers to another learning rate) is discarded and trained afresh, not loaded into a misfitting optimiser."""
    kill_at_step_13(tiny_data, "relaid", monkeypatch)

    def split(model, settings, name="model"):
        params = [p for p in model.parameters() if p.requires_grad]
        return [{"params": params[:1]}, {"params": params[1:]}]

    monkeypatch.setattr(trainer, "parameter_groups", split)
    out = train_knrm(tiny_data, "relaid")
    reference = train_knrm(tiny_data, "relaid_from_scratch")
    a, b = load_file(str(reference)), load_file(str(out))
    assert all(torch.equal(a[k], b[k]) for k in a)


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


def test_rerank_scores_the_test_queries_with_the_first_stage_tail_below(tiny_data):
    checkpoint = train_knrm(tiny_data, "run")
    corpus = Corpus(tiny_data / "data")
    candidates = read_run(tiny_data / "bm25.run")
    rerank(
        RerankJob("knrm", KNRM, corpus, candidates, [str(checkpoint)], 10, 16, torch.device("cpu"), tiny_data / "runs")
    )
    run = read_run(tiny_data / "runs" / "knrm.run")
    assert set(run) == set(corpus.folds[0]["test"])
    for qid, scores in run.items():
        ranked = sorted(scores, key=lambda d: (-scores[d], d))
        first = sorted(candidates[qid], key=lambda d: (-candidates[qid][d], d))
        assert set(ranked[:10]) == set(first[:10]) and ranked[10:] == first[10:]  # the model reorders its depth only
    assert (tiny_data / "runs" / "knrm.details.jsonl").read_text() == ""  # KNRM explains nothing
    with pytest.raises(InputError, match="one per fold"):
        rerank(
            RerankJob(
                "knrm", KNRM, corpus, candidates, [str(checkpoint)] * 2, 10, 16, torch.device("cpu"), tiny_data / "runs"
            )
        )


# ---- per-document artifacts -------------------------------------------------------------------------------

ATTACHED: list[str] = []


class LengthKNRM(KNRMModel):
    """KNRM declaring a collection artifact (each document's word count): ``encode`` reads it by document id, so
    scoring fails unless the artifact was attached, and checks it against the text it was given."""

    def build_artifacts(self, scope, corpus, doc_ids, out_dir, *, batch_size=32):
        write_json(out_dir / "lengths.json", {d: len(corpus.docs[d].split()) for d in doc_ids})

    def attach_artifacts(self, directory):
        self.lengths = read_json(directory / "lengths.json")
        ATTACHED.append(str(directory))

    def encode(self, queries, doc_ids, docs):
        assert [self.lengths[d] for d in doc_ids] == [len(t.split()) for t in docs]
        return super().encode(queries, doc_ids, docs)


def artifacts_stage(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    artifacts.add_arguments(parser)
    artifacts.run(parser.parse_args(argv))


@pytest.fixture
def length_knrm(monkeypatch):
    """LengthKNRM registered as type ``length_knrm``: its row declares the collection artifact, its defaults KNRM's."""
    monkeypatch.setitem(
        model_types.MODEL_TYPES,
        "length_knrm",
        model_types.ModelType(
            parameter_groups=model_types.MODEL_TYPES["knrm"].parameter_groups,
            artifacts=lambda params: {"lengths": "collection"},
        ),
    )
    monkeypatch.setitem(model_types.ARCHITECTURE_DEFAULTS, "length_knrm", model_types.ARCHITECTURE_DEFAULTS["knrm"])
    monkeypatch.setitem(registry.IMPLEMENTATIONS, "length_knrm", f"{__name__}:LengthKNRM")


def test_a_collection_artifact_is_built_once_and_attached_in_training_and_reranking(tiny_data, length_knrm):
    cfg = {**KNRM, "type": "length_knrm", "train": {**KNRM["train"], "steps": 8}}
    assert model_types.artifact_scopes(cfg) == ["collection"]
    corpus, candidates = Corpus(tiny_data / "data"), read_run(tiny_data / "bm25.run")
    out = tiny_data / "artifacts" / "length_knrm" / "collection"
    common = [
        "--model-config",
        json.dumps(cfg),
        "--data",
        str(tiny_data / "data"),
        "--candidates",
        str(tiny_data / "bm25.run"),
        "--device",
        "cpu",
        "--out",
        str(out),
    ]
    with pytest.raises(InputError, match="no 'fold' artifacts"):
        artifacts_stage([*common, "--scope", "fold", "--checkpoint", "x.safetensors"])
    artifacts_stage([*common, "--scope", "collection"])
    assert sorted(read_json(out / "lengths.json")) == sorted({d for r in candidates.values() for d in r})

    model_out = tiny_data / "length_knrm" / "model.safetensors"
    with pytest.raises(InputError, match="--collection-artifacts"):
        train_stage.train("length_knrm", cfg, corpus, candidates, 0, 30, torch.device("cpu"), model_out)
    ATTACHED.clear()
    train_stage.train(
        "length_knrm", cfg, corpus, candidates, 0, 30, torch.device("cpu"), model_out, collection_artifacts=out
    )
    assert [str(out)] == ATTACHED
    job = RerankJob(
        "length_knrm", cfg, corpus, candidates, [str(model_out)], 30, 16, torch.device("cpu"), tiny_data / "runs"
    )
    with pytest.raises(InputError, match="--collection-artifacts"):
        rerank(job)
    rerank(dataclasses.replace(job, collection_artifacts=out))
    assert [str(out)] * 2 == ATTACHED
    assert set(read_run(tiny_data / "runs" / "length_knrm.run")) == set(corpus.folds[0]["test"])
    # a model without artifacts refuses a directory rather than ignoring it
    with pytest.raises(InputError, match="declares no collection artifacts"):
        train_stage.train(
            "knrm",
            KNRM,
            corpus,
            candidates,
            0,
            30,
            torch.device("cpu"),
            tiny_data / "k" / "model.safetensors",
            collection_artifacts=out,
        )


def test_a_failed_artifact_build_leaves_the_earlier_output_and_no_temporary_directory(
    tiny_data, monkeypatch, length_knrm
):
    cfg = {**KNRM, "type": "length_knrm"}
    corpus = Corpus(tiny_data / "data")
    out = tiny_data / "artifacts" / "collection"
    old_umask = os.umask(0o022)
    try:
        artifacts.build(cfg, corpus, "collection", out)  # no candidates: the whole collection
    finally:
        os.umask(old_umask)
    assert sorted(read_json(out / "lengths.json")) == sorted(corpus.docs)
    assert (
        stat.S_IMODE(out.stat().st_mode) == 0o755
    )  # readable by the group on a shared file system, not mkdtemp's 0700
    before = (out / "lengths.json").read_text()

    def half_written(self, scope, corpus, doc_ids, out_dir, *, batch_size=32):
        (out_dir / "lengths.json").write_text("{")
        raise RuntimeError("killed")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LengthKNRM, "build_artifacts", half_written)
        with pytest.raises(RuntimeError, match="killed"):
            artifacts.build(cfg, corpus, "collection", out)
    assert (out / "lengths.json").read_text() == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["collection"]
    (out / "stale").write_text("")  # a rebuild replaces the whole directory
    artifacts.build(cfg, corpus, "collection", out, candidates=tiny_data / "bm25.run")
    assert sorted(p.name for p in out.iterdir()) == ["lengths.json"] and sorted(
        p.name for p in out.parent.iterdir()
    ) == ["collection"]


def test_artifacts_stage_reads_a_long_inline_model_config_and_names_a_bad_one(tmp_path):
    from longrank.artifacts import read_model_config

    entry = {
        "type": "mores",
        "encoder": "minilm",
        "train": {f"key_{i}": i for i in range(40)},
    }  # longer than a file name may be
    assert read_model_config(json.dumps(entry)) == entry
    path = tmp_path / "entry.json"
    path.write_text(json.dumps(entry))
    assert read_model_config(str(path)) == entry
    with pytest.raises(InputError, match="not valid JSON"):
        read_model_config('{"type": ')
    with pytest.raises(InputError, match="missing.json"):
        read_model_config(str(tmp_path / "missing.json"))


def test_the_same_config_and_seed_give_byte_identical_runs_from_fresh_processes(tiny_data, tmp_path):
    """Train and rerank KNRM twice, each stage in a fresh interpreter with another hash seed (as Snakemake runs
    them): the checkpoints and the run files are byte-identical."""
    import subprocess
    import sys

    from conftest import REPO

    entry = json.dumps({**KNRM, "train": {"steps": 12, "batch_size": 4, "eval_every": 6, "patience": 2, "seed": 7}})
    outputs = []
    for attempt, hash_seed in enumerate(("1", "2")):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
        out = tmp_path / f"attempt{attempt}"
        common = [
            "--model",
            "knrm",
            "--model-config",
            entry,
            "--data",
            str(tiny_data / "data"),
            "--candidates",
            str(tiny_data / "bm25.run"),
            "--rerank-depth",
            "30",
            "--device",
            "cpu",
        ]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "longrank",
                "train",
                *common,
                "--fold",
                "0",
                "--out",
                str(out / "fold0" / "model.safetensors"),
            ],
            env=env,
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "longrank",
                "rerank",
                *common,
                "--checkpoints",
                str(out / "fold0" / "model.safetensors"),
                "--out-dir",
                str(out / "runs"),
            ],
            env=env,
            check=True,
            capture_output=True,
        )
        outputs.append(
            {
                p.relative_to(out): p.read_bytes()
                for p in sorted(out.rglob("*"))
                if p.is_file() and p.suffix in (".safetensors", ".run")
            }
        )
    assert any(name.suffix == ".run" for name in outputs[0]) and any(
        name.suffix == ".safetensors" for name in outputs[0]
    )
    assert outputs[0].keys() == outputs[1].keys()
    for name in outputs[0]:
        assert outputs[0][name] == outputs[1][name], f"{name} differs between two runs of the same config and seed"


def test_dataloader_workers_prepare_the_same_batches_in_step_order(tiny_data):
    """train.num_workers: sampling, reading and tokenising in two worker processes gives the weights and the
    dev scores that preparing each batch in the training process gives, also through an early stop."""
    corpus = Corpus(tiny_data / "data")
    candidates = read_run(tiny_data / "bm25.run")
    outputs = {}
    for workers in (0, 2):
        cfg = {**KNRM, "train": {**KNRM["train"], "steps": 10, "eval_every": 2, "patience": 1, "num_workers": workers}}
        out = tiny_data / f"workers{workers}" / "model.safetensors"
        train_stage.train("knrm", cfg, corpus, candidates, 0, 30, torch.device("cpu"), out)
        outputs[workers] = (
            load_file(str(out)),
            (out.parent / "dev.run").read_text(),
            read_json(out.parent / "train_summary.json"),
        )
    (w0, run0, summary0), (w2, run2, summary2) = outputs[0], outputs[2]
    assert w0.keys() == w2.keys() and all(torch.equal(w0[k], w2[k]) for k in w0)
    assert run0 == run2 and summary0["steps_run"] == summary2["steps_run"]
    assert summary2["hyperparameters"]["num_workers"] == 2
