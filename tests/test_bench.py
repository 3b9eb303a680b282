"""The bench stage on tiny untrained checkpoints: docs/ms and memory per length, TKL's packing comparison."""

from __future__ import annotations

import json

import pytest
import torch

from longrank.cli import main
from longrank.io.json_yaml import read_json
from longrank.models.registry import build_model
from longrank.models.checkpoint import save_weights
from longrank.results.stage_outputs import Rate
from test_tk_tkl import write_tiny_corpus

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_tiny_corpus(tmp_path_factory.mktemp("bench") / "data")


def bench(tmp_path, corpus, name, cfg, lengths):
    torch.manual_seed(0)
    checkpoint = tmp_path / f"{name}.safetensors"
    save_weights(build_model(cfg, corpus), checkpoint)
    out = tmp_path / f"{name}.json"
    main(
        [
            "bench",
            "--model",
            name,
            "--model-config",
            json.dumps(cfg),
            "--checkpoint",
            str(checkpoint),
            "--data",
            str(corpus.dir),
            "--lengths",
            *map(str, lengths),
            "--batch-size",
            "4",
            "--repeats",
            "2",
            "--device",
            "cpu",
            "--out",
            str(out),
        ]
    )
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
    # the passes behind that figure: batch_size documents each, as many as --repeats, their median the figure
    rate = Rate.from_json(result["rates"]["knrm"])
    assert rate.docs == 4 and rate.runs == 2 and rate.median == pytest.approx(rows[100][3])
    assert rate.low <= rate.median <= rate.high
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


def test_mir_speed_times_mir_at_other_lengths_and_maxp_over_its_windows_but_not_an_ablation():
    from longrank.bench.mir_alike import timed_alike

    train = {"steps": 40}
    models = {
        "mir": {"type": "mir", "graph_set": "g", "max_doc_tokens": 416, "train": train},
        "mir_1k": {"type": "mir", "graph_set": "g", "max_doc_tokens": 1024, "train": {"steps": 9}},
        "mir_default_len": {
            "type": "mir",
            "graph_set": "g",
            "graphs": ["p2p", "s2s", "t2t"],
        },  # the defaults, spelt out
        "mir_no_graph": {"type": "mir", "graph_set": "g", "max_doc_tokens": 416, "graphs": []},
        "mir_other_set": {"type": "mir", "graph_set": "h", "max_doc_tokens": 416},
        "maxp_2k": {
            "type": "bert_ranker",
            "mode": "maxp",
            "passage_len": 128,
            "passage_stride": 96,
            "max_passages": 21,
        },
        "maxp_other_windows": {
            "type": "bert_ranker",
            "mode": "maxp",
            "passage_len": 128,
            "passage_stride": 64,
            "max_passages": 4,
        },
        "firstp": {"type": "bert_ranker", "mode": "firstp", "passage_len": 128},
    }
    alike = timed_alike(models, "mir", {"window": 128, "overlap": 0.25, "max_doc_tokens": 2048})
    assert alike == {
        "mir": {"model": "MIR", "tokens": 416},
        "mir_1k": {"model": "MIR", "tokens": 1024},
        "mir_default_len": {"model": "MIR", "tokens": 2048},
        "maxp_2k": {"model": "MaxP", "tokens": 2048},
    }


def test_the_side_by_side_throughput_wins_over_a_separate_bench_of_the_same_entry(tmp_path):
    from longrank.results.stage_outputs import BenchTable
    from longrank.report.inputs import throughput

    side = BenchTable("MIR", [], [], "", docs_per_ms={"mir": 1.0, "zz_maxp": 2.0}, side_by_side=True)
    alone = BenchTable("MaxP", [], [], "", docs_per_ms={"zz_maxp": 5.0})  # listed after mir.speed
    assert throughput([side, alone]) == {"mir": 1.0, "zz_maxp": 2.0}
