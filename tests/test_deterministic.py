"""``deterministic: true``: the stages that run a model compute with PyTorch's deterministic algorithms, and say so in
each training's summary, each run's ``.meta.yaml`` and the training fingerprint. Every case runs in fresh processes,
as Snakemake runs the stages: the setting is process-wide, and a test session must not keep it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO

KNRM = {"type": "knrm", "max_doc_len": 60, "train": {"steps": 6, "batch_size": 4, "eval_every": 3, "seed": 3}}


def train_and_rerank(tiny_data: Path, out: Path, *flags: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    common = ["--model", "knrm", "--model-config", json.dumps(KNRM), "--data", str(tiny_data / "data")]
    common += ["--candidates", str(tiny_data / "bm25.run"), "--rerank-depth", "30", "--device", "cpu", *flags]
    model = out / "fold0" / "model.safetensors"
    for stage, extra in (("train", ["--fold", "0", "--out", str(model)]), ("rerank", ["--checkpoints", str(model),
                                                                                        "--out-dir", str(out / "runs")])):  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "longrank", stage, *common, *extra], env=env, capture_output=True,
                              text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.stage  # two trainings and two reranks, each a fresh interpreter with torch
def test_deterministic_algorithms_are_recorded_and_change_no_cpu_byte(tiny_data, tmp_path):
    train_and_rerank(tiny_data, tmp_path / "plain")
    train_and_rerank(tiny_data, tmp_path / "deterministic", "--deterministic")
    for name, on in (("plain", False), ("deterministic", True)):
        summary = json.loads((tmp_path / name / "fold0" / "train_summary.json").read_text())
        assert summary["deterministic"] is on
        meta = yaml.safe_load((tmp_path / name / "runs" / "knrm.run.meta.yaml").read_text())
        assert meta["longrank"]["platform"]["deterministic_algorithms"] is on
        assert [fold["deterministic"] for fold in meta["longrank"]["method"]["training"]] == [on]
    # on the CPU (one thread a job) the deterministic algorithms compute the same bytes
    for relative in ("fold0/model.safetensors", "runs/knrm.run"):
        assert (tmp_path / "plain" / relative).read_bytes() == (tmp_path / "deterministic" / relative).read_bytes()


FINGERPRINT_KEYS = """
import json, sys
from longrank.data.corpus import Corpus
from longrank.io.trec_files import read_run
from longrank.runtime import set_deterministic
from longrank.train.fingerprint import training_inputs
set_deterministic(sys.argv[2] == "on")
corpus = Corpus(sys.argv[1] + "/data")
inputs = training_inputs(json.loads(sys.argv[3]), corpus, corpus.folds[0], 30, read_run(sys.argv[1] + "/bm25.run"), built={})
print(json.dumps(inputs))
"""


@pytest.mark.stage  # two interpreters with torch
def test_a_deterministic_training_has_its_own_fingerprint_and_the_others_keep_theirs(tiny_data):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    inputs = {
        mode: json.loads(
            subprocess.run(
                [sys.executable, "-c", FINGERPRINT_KEYS, str(tiny_data), mode, json.dumps(KNRM)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                timeout=300,
            ).stdout  # fmt: skip
        )
        for mode in ("off", "on")
    }
    assert "deterministic" not in inputs["off"]  # every training fingerprinted before the key stands
    assert inputs["on"].pop("deterministic") == "on" and inputs["on"] == inputs["off"]
