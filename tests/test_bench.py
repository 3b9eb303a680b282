"""The bench stage on tiny untrained checkpoints: docs/ms and memory per length, TKL's packing comparison."""

from __future__ import annotations

import json

import pytest
import torch

from longrank.cli import main
from longrank.io import read_json
from longrank.models.registry import build_model
from longrank.models.checkpoint import save_weights
from test_tk_tkl import write_tiny_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_tiny_corpus(tmp_path_factory.mktemp("bench") / "data")


def bench(tmp_path, corpus, name, cfg, lengths):
    torch.manual_seed(0)
    checkpoint = tmp_path / f"{name}.safetensors"
    save_weights(build_model(cfg, corpus), checkpoint)
    out = tmp_path / f"{name}.json"
    main(["bench", "--model", name, "--model-config", json.dumps(cfg), "--checkpoint", str(checkpoint),
          "--data", str(corpus.dir), "--lengths", *map(str, lengths), "--batch-size", "4", "--repeats", "2",
          "--device", "cpu", "--out", str(out)])
    return read_json(out)


def test_bench_knrm_reports_every_length_and_the_configured_one(tmp_path, corpus):
    result = bench(tmp_path, corpus, "knrm", {"type": "knrm", "max_doc_len": 100}, [50, 300])
    assert result["title"] == "Efficiency of knrm" and result["notes"]
    assert len(result["columns"]) == len(result["rows"][0])
    rows = {row[1]: row for row in result["rows"]}
    assert sorted(rows) == [50, 100, 300]  # max_doc_len is always measured
    assert rows[300][2] == 100 and rows[50][2] == 50  # truncated lengths are recorded as effective
    assert all(row[3] > 0 and row[4] > 0 and row[5] >= 0 for row in result["rows"])
    assert result["docs_per_ms"]["knrm"] == rows[100][3]
    assert "packing" not in result


def test_bench_tkl_compares_packed_and_unpacked_windows(tmp_path, corpus):
    cfg = {"type": "tkl", "n_layers": 1, "max_query_len": 8, "max_doc_len": 160}
    result = bench(tmp_path, corpus, "tkl", cfg, [160])
    packing = result["packing"]
    assert packing["packed"]["window_passes"] < packing["unpacked"]["window_passes"]
    assert packing["speedup"] > 0 and packing["max_score_diff"] < 1e-3
    assert packing["packed"]["docs_per_ms"] > 0 and packing["unpacked"]["docs_per_ms"] > 0
    labels = [row[0] for row in result["rows"]]
    assert "mixed lengths, packed" in labels and "mixed lengths, unpacked" in labels
    assert result["docs_per_ms"]["tkl"] > 0
