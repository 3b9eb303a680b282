"""A missing GloVe file or hub model is named before any job runs: which key asks for it, what to download
and where to put it (longrank.downloads, the Snakefile's onstart)."""

from __future__ import annotations

import copy
import os
import subprocess

import pytest
import yaml

from conftest import REPO, snakemake_command
from longrank import downloads
from longrank.validation.validate import validate_config
from longrank.config.files import merged

TREC_DL = merged(("config/trec-dl.yaml", "config/trec-dl-2019.yaml"))
OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@pytest.fixture
def hub_off(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def hub_on(monkeypatch):
    for name in OFFLINE:
        monkeypatch.delenv(name, raising=False)


def test_the_full_scale_run_names_each_download_it_lacks(tmp_path, monkeypatch, hub_off):
    monkeypatch.chdir(tmp_path)  # no data/glove.6B.300d.txt here
    problems, notes = downloads.check(validate_config(copy.deepcopy(TREC_DL)), cache_dir=str(tmp_path / "hub"))
    keys = [p.split(":")[0] for p in problems]
    for model in ("knrm", "tk", "tkl", "tkl_4k"):
        assert f"config key models.{model}.embeddings" in keys
    for model in ("bert_firstp", "bert_maxp", "mores", "mores_1ib", "mir", "bert_maxp128"):
        assert f"config key models.{model}.encoder" in keys
    assert "config key mir_graphs.mir.encoder" in keys
    glove = next(p for p in problems if "models.knrm.embeddings" in p)
    assert "data/glove.6B.300d.txt" in glove and downloads.GLOVE_URL in glove and str(tmp_path) in glove
    bert = next(p for p in problems if "models.mores.encoder" in p)
    assert "huggingface-cli download bert-base-uncased" in bert and str(tmp_path / "hub") in bert
    # what is there is not named: word2vec (made by the workflow), the packages' GloVe 50d and MiniLM
    assert not [p for p in problems if "ndrm" in p or "bi_encoder" in p] and notes == []


def test_what_is_there_passes(tmp_path, monkeypatch, hub_off):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "glove.6B.300d.txt").write_text("the 0.1 0.2\n")
    config = validate_config(copy.deepcopy(TREC_DL))
    for entry in config["models"].values():
        if "encoder" in entry:
            entry["encoder"] = "random-bert-base"
    for stage in config["first_stages"].values():  # HDCT's encoder: MIR's candidates (validated: a dict by name)
        if "encoder" in stage:
            stage["encoder"] = "random-bert-base"
    config["mir_graphs"]["mir"]["encoder"] = "minilm"
    assert downloads.check(config, cache_dir=str(tmp_path / "hub")) == ([], [])


def test_with_the_hub_reachable_an_uncached_model_is_a_note(tmp_path, monkeypatch, hub_on):
    monkeypatch.chdir(tmp_path)
    config = {"models": {"m": {"type": "bert_ranker", "encoder": "bert-base-uncased"}}, "first_stages": {}}
    problems, notes = downloads.check(config, cache_dir=str(tmp_path / "hub"))
    assert problems == [] and "first job that loads it downloads it" in notes[0]


@pytest.mark.stage
def test_the_workflow_names_them_before_any_job_runs(tmp_path):
    """The real workflow (not a dry run, which needs no weights): it stops at onstart, naming the key, and no job ran."""
    (tmp_path / "config").symlink_to(REPO / "config")
    config = {"models": {"knrm": {"embeddings": "data/glove.6B.300d.txt"}}}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(config))
    cmd, env = snakemake_command(tmp_path, "report", "--configfile", "mine.yaml")
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    assert "config key models.knrm.embeddings: the word vectors data/glove.6B.300d.txt are not there" in out
    assert not (tmp_path / "results").exists(), os.listdir(tmp_path / "results")


def test_offline_is_read_from_the_environment(monkeypatch):
    for name in OFFLINE:
        monkeypatch.delenv(name, raising=False)
    assert not downloads.offline()
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    assert downloads.offline()
