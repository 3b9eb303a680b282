"""Nothing overwritten: a model's results of every setting it ran with are kept in its history
(stage ``history``), at most ``history.keep`` settings; going back to a kept setting copies its weights back without a
training step; the report's experiment log sets each kept setting's scores beside today's with what changed. Every
file here is one the real stages wrote (train, rerank, evaluate, history), on the tiny collection."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from longrank.cli import main
from longrank.data.corpus import Corpus
from longrank.io.json_yaml import read_json
from longrank.io.trec_files import read_run
from longrank.report.history_section import changed_keys
from longrank.rerank import RerankJob, rerank
from longrank.train import train as train_stage
from longrank.train.state_sets import is_finished, sets_newest_first
from conftest import E2E_CONFIG, snakemake

pytestmark = pytest.mark.stage  # trainings run: not in the unit tier

KNRM = {
    "type": "knrm",
    "max_doc_len": 60,
    "train": {"steps": 16, "batch_size": 4, "lr": 0.01, "eval_every": 8, "patience": 5},
}


def with_lr(lr: float) -> dict:
    return {**KNRM, "train": {**KNRM["train"], "lr": lr}}


def run_setting(tiny_data, entry: dict, keep: int = 5) -> dict:
    """One setting through train, rerank, evaluate and history, as the workflow chains them; returns latest.json."""
    results = tiny_data / "results"
    out = results / "models" / "knrm" / "fold0" / "model.safetensors"
    for name in ("model.safetensors", "model.manifest.json", "dev.run", "train_summary.json"):  # as Snakemake does
        (out.parent / name).unlink(missing_ok=True)
    corpus = Corpus(tiny_data / "data")
    train_stage.train(
        "knrm", entry, corpus, read_run(tiny_data / "bm25.run"), 0, 30, torch.device("cpu"), out,
        reuse_from=results,
    )  # fmt: skip
    rerank(RerankJob("knrm", entry, corpus, read_run(tiny_data / "bm25.run"), [str(out)], 10, 16, torch.device("cpu"),
           results / "runs"))  # fmt: skip
    evaluation = results / "eval" / "knrm.tsv"
    data = tiny_data / "data"
    main(["evaluate", "--run", str(results / "runs" / "knrm.run"), "--qrels", str(data / "qrels.txt"),
          "--folds", str(data / "folds.json"), "--measures", "nDCG@10", "--out", str(evaluation)])  # fmt: skip
    latest = results / "history" / "knrm" / "latest.json"
    settings = {"entry": entry, "first_stage": {"method": "bm25"}, "code": {"train": "t", "rerank": "r"}}
    main(["history", "--model", "knrm", "--settings", json.dumps(settings), "--systems", "knrm",
          "--evals", str(evaluation), "--runs", str(results / "runs" / "knrm.run"),
          "--summaries", str(out.parent / "train_summary.json"), "--keep", str(keep), "--weights", "true",
          "--data", str(data), "--candidates", str(tiny_data / "bm25.run"), "--out", str(latest)])  # fmt: skip
    return read_json(latest)


def test_each_setting_keeps_its_results_and_going_back_copies_the_weights_back(tiny_data, caplog):
    first = run_setting(tiny_data, with_lr(0.01))
    history = tiny_data / "results" / "history" / "knrm"
    entry = history / first["current"]
    weights = (tiny_data / "results" / "models" / "knrm" / "fold0" / "model.safetensors").read_bytes()
    ndcg = read_json(entry / "settings.json")["scores"]["knrm"]["nDCG@10"]
    assert 0 < ndcg <= 1 and (entry / "runs" / "knrm.run").exists() and (entry / "eval" / "knrm.tsv").exists()
    (kept,) = sets_newest_first(entry / "fold0" / "train_state")
    assert is_finished(kept) and (kept / "best.safetensors").read_bytes() == weights
    (current,) = sets_newest_first(tiny_data / "results" / "models" / "knrm" / "fold0" / "train_state")
    assert (kept / "best.safetensors").stat().st_ino == (current / "best.safetensors").stat().st_ino  # no 2nd copy

    second = run_setting(tiny_data, with_lr(0.05))
    assert second["current"] != first["current"] and second["kept"] == [second["current"], first["current"]]
    assert (entry / "runs" / "knrm.run").exists()  # the earlier setting's results survive the new one
    assert (tiny_data / "results" / "models" / "knrm" / "fold0" / "model.safetensors").read_bytes() != weights

    caplog.set_level(logging.INFO)
    third = run_setting(tiny_data, with_lr(0.01))  # back to the first setting
    assert third["current"] == first["current"] and len(third["kept"]) == 2  # its entry replaced, not added
    restored = f"restoring knrm fold 0 from {history / first['current'] / 'fold0'}: trained before"
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(restored) for m in messages)
    # the second setting's state is discarded, and the line says what comes next: not "training afresh"
    [discarded] = [m for m in messages if m.startswith("discarding the training state")]
    assert discarded.endswith("; the finished training of these inputs is restored") and "afresh" not in discarded
    assert not any(r.getMessage().startswith("knrm fold 0 step") for r in caplog.records)  # no step trained
    assert (tiny_data / "results" / "models" / "knrm" / "fold0" / "model.safetensors").read_bytes() == weights
    assert read_json(history / third["current"] / "settings.json")["scores"]["knrm"]["nDCG@10"] == ndcg


def test_history_keeps_at_most_keep_settings_and_always_the_current_one(tiny_data):
    names = [run_setting(tiny_data, with_lr(lr), keep=2)["current"] for lr in (0.01, 0.02, 0.03)]
    history = tiny_data / "results" / "history" / "knrm"
    assert sorted(p.name for p in history.iterdir() if p.is_dir()) == sorted(names[1:])
    latest = read_json(history / "latest.json")
    assert latest["kept"] == [names[2], names[1]] and latest["keep"] == 2
    assert latest["bytes"] == sum(
        f.stat().st_size for f in history.rglob("*") if f.is_file() and f.name != "latest.json"
    )


def test_a_state_left_by_other_inputs_is_never_restored(tiny_data, caplog):
    """The history's finished state is copied back only for the same fingerprint: other candidates, other model."""
    run_setting(tiny_data, with_lr(0.01))
    shutil.rmtree(tiny_data / "results" / "models" / "knrm" / "fold0" / "train_state")
    caplog.set_level(logging.INFO)
    out = tiny_data / "elsewhere" / "model.safetensors"
    train_stage.train(
        "knrm", KNRM, Corpus(tiny_data / "data"), read_run(tiny_data / "bm25.run"), 0, 20, torch.device("cpu"), out,
        reuse_from=tiny_data / "results",
    )  # fmt: skip  # rerank depth 20, not 30: other inputs
    assert not any("restoring" in r.getMessage() for r in caplog.records)
    assert any(r.getMessage().startswith("knrm fold 0 step 8/16") for r in caplog.records)


def test_another_collections_training_of_the_same_inputs_is_copied_not_trained_again(tiny_data, caplog):
    """The other TREC DL year: another results folder trains on the same documents, queries, judgments and candidates
    with the same settings and code, so its finished training is copied (history.across_collections: the train
    rule's --reuse-from is the folder of results folders); with only its own folder to look in, it trains."""
    results = tiny_data / "results"
    corpus, candidates = Corpus(tiny_data / "data"), read_run(tiny_data / "bm25.run")

    def train(name: str, reuse_from: Path) -> Path:
        out = results / name / "models" / "knrm" / "fold0" / "model.safetensors"
        train_stage.train("knrm", KNRM, corpus, candidates, 0, 30, torch.device("cpu"), out, reuse_from=reuse_from)
        return out

    first = train("trec-dl-2019", results)
    caplog.set_level(logging.INFO)
    second = train("trec-dl-2020", results)
    source = first.parent
    assert any(r.getMessage().startswith(f"restoring knrm fold 0 from {source}: ") for r in caplog.records)
    assert not any(r.getMessage().startswith("knrm fold 0 step") for r in caplog.records)  # no step trained
    assert second.read_bytes() == first.read_bytes()
    assert (second.parent / "dev.run").read_bytes() == (first.parent / "dev.run").read_bytes()
    summary = read_json(second.parent / "train_summary.json")
    assert summary["restored_from"] == str(source) and summary["steps_run"] == 16
    assert summary["seconds"] >= read_json(first.parent / "train_summary.json")["seconds"] * 0.5  # that training's
    (copied,) = sets_newest_first(second.parent / "train_state")
    (kept,) = sets_newest_first(first.parent / "train_state")
    assert (copied / "best.safetensors").stat().st_ino == (kept / "best.safetensors").stat().st_ino  # linked

    caplog.clear()
    train("own-folder-only", results / "own-folder-only")  # history.across_collections: false
    assert not any(r.getMessage().startswith("restoring") for r in caplog.records)
    assert any(r.getMessage().startswith("knrm fold 0 step 8/16") for r in caplog.records)


def test_an_artifact_directorys_run_records_are_no_training_input(tmp_path):
    """A graph set rebuilt with the same graphs (the other TREC DL year's: its stats.json has other seconds and paths)
    is the same training input; a changed graph is another. Found by the rehearsal: MIR alone trained again in 2020."""
    from longrank.train.fingerprint import _directory_digest

    graphs = tmp_path / "graphs" / "mir"
    graphs.mkdir(parents=True)
    (graphs / "graphs.sqlite").write_bytes(b"graphs")
    (graphs / "settings.json").write_text('{"window": 128}')
    (graphs / "stats.json").write_text('{"seconds": 6.3, "annotations": "results/trec-dl-2019/annotations"}')
    (graphs / ".snakemake_timestamp").write_text("")
    before = _directory_digest(graphs)
    (graphs / "stats.json").write_text('{"seconds": 9.8, "annotations": "results/trec-dl-2020/annotations"}')
    (graphs / ".snakemake_timestamp").write_text("x")
    assert _directory_digest(graphs) == before
    (graphs / "graphs.sqlite").write_bytes(b"other graphs")
    assert _directory_digest(graphs) != before


def test_the_log_names_every_changed_key_and_says_code_changed():
    earlier = {"entry": {"train": {"lr": 0.01, "steps": 16}, "max_doc_len": 60}, "code": {"train": "a", "rerank": "b"}}
    today = {"entry": {"train": {"lr": 0.05, "steps": 16}}, "code": {"train": "c", "rerank": "b"}}
    assert changed_keys(earlier, today) == [
        "code.train changed",
        "entry.max_doc_len: 60 → (unset)",
        "entry.train.lr: 0.01 → 0.05",
    ]
    assert changed_keys(today, today) == []


@pytest.mark.e2e
def test_the_workflow_keeps_a_changed_models_results_and_the_report_logs_them(workflow_run, tmp_path):
    """The default run with knrm's learning rate changed, then changed back: the first setting's results stay in the
    history, the report's experiment log sets its score beside today's with the key that changed, and going back
    copies the first weights back without training."""
    workdir = tmp_path / "workdir"
    shutil.copytree(workflow_run, workdir, symlinks=True)  # a copy: the other tests read the shared run
    results = workdir / "results" / "cranfield"
    history = results / "history" / "knrm"
    first = read_json(history / "latest.json")["current"]
    table = pd.read_csv(results / "compare" / "table.csv")
    first_ndcg = table[(table.system == "knrm") & (table.measure == "nDCG@10")]["mean"].item()
    lr = read_json(results / "config.json")["models"]["knrm"]["train"]["lr"]
    overlay = tmp_path / "lr.yaml"
    overlay.write_text(yaml.safe_dump({"models": {"knrm": {"train": {"lr": lr * 2}}}}))

    snakemake(workdir, "report", "--configfile", str(E2E_CONFIG), str(overlay))
    second = read_json(history / "latest.json")
    assert second["kept"] == [second["current"], first]
    md = (results / "report" / "report.md").read_text()
    log = md.split("Experiment log: earlier settings", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in log.splitlines() if line.startswith("| knrm |")]
    earlier = next(r for r in rows if r[1] == first)
    assert f"{first_ndcg:.4f}" == earlier[3] and f"entry.train.lr: {lr} → {lr * 2}" in earlier[5]
    assert any(r[1] == "today" and r[5] == "–" for r in rows)

    back = snakemake(workdir, "report", "--configfile", str(E2E_CONFIG))  # back to the first setting
    assert read_json(history / "latest.json")["current"] == first
    restored = f"restoring knrm fold 0 from results/cranfield/history/knrm/{first}/fold0: trained before"
    train_log = (results / "logs" / "train_knrm_fold0.log").read_text()
    assert restored in train_log and "afresh" not in train_log  # the log never says it trains what it restores
    assert f"[train] {restored}" in back.stdout  # one line on the console, where the training lines would be
    model = Path("models") / "knrm" / "fold0" / "model.safetensors"
    assert (results / model).read_bytes() == (workflow_run / "results" / "cranfield" / model).read_bytes()
