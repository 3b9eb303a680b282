"""longrank.results.stage_outputs: the one definition of each intermediate JSON file. What a writer writes reads back equal, and a
file of another shape fails naming the file and the field (rather than a reader finding no key and showing '–')."""

from __future__ import annotations

import json

import pytest

from longrank.errors import InputError
from longrank.results.stage_outputs import BenchTable, FoldWeight, Interpolation, TrainSummary


def test_an_interpolation_reads_back_as_written(tmp_path):
    written = Interpolation(
        "m+bm", 0.35, [FoldWeight(0, 0.3, {"0.0": 0.2, "0.3": 0.4}), FoldWeight(1, 0.4, {"0.4": 0.5})]
    )
    written.write(tmp_path / "m+bm.interpolation.json")
    read = Interpolation.read(tmp_path / "m+bm.interpolation.json")
    assert read == written
    assert [f.dev_ndcg10 for f in read.folds] == [0.4, 0.5]


def test_the_old_top_level_curve_is_refused_naming_the_file_and_field(tmp_path):
    """The shape the report once read (a top-level dev_ndcg10_by_weight) is not what interpolate writes."""
    path = tmp_path / "old.interpolation.json"
    path.write_text(json.dumps({"system": "m+bm", "weight": 0.7, "dev_ndcg10_by_weight": {"0.7": 0.5}}))
    with pytest.raises(InputError, match=r"old.interpolation.json: Interpolation lacks the field\(s\) \['folds'\]"):
        Interpolation.read(path)
    path.write_text(json.dumps({"system": "m+bm", "weight": 0.7, "folds": [], "dev_ndcg10_by_weight": {}}))
    with pytest.raises(InputError, match=r"unknown field\(s\) \['dev_ndcg10_by_weight'\]"):
        Interpolation.read(path)


def test_a_chosen_weight_must_be_one_of_the_weights_tried(tmp_path):
    with pytest.raises(InputError, match="the chosen weight 0.5 is not among the weights tried"):
        Interpolation("m+bm", 0.5, [FoldWeight(0, 0.5, {"0.0": 0.2})]).write(tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


def test_a_train_summary_keeps_its_hyperparameters_and_defaults(tmp_path):
    TrainSummary("knrm", 0, 0.31, steps_run=20, best_step=10, seconds=3.5, hyperparameters={"seed": 0}).write(
        tmp_path / "s.json"
    )
    read = TrainSummary.read(tmp_path / "s.json")
    assert read.hyperparameters == {"seed": 0} and read.processes == 1 and read.note == ""
    (tmp_path / "bad.json").write_text(json.dumps({"model": "knrm", "fold": 0, "steps": 0}))
    with pytest.raises(
        InputError, match=r"bad.json: TrainSummary lacks the field\(s\) \['best_dev_ndcg10', 'best_step', 'steps_run'\]"
    ):
        TrainSummary.read(tmp_path / "bad.json")


def test_a_bench_table_keeps_its_raw_measurements_beside_and_refuses_a_short_row(tmp_path):
    table = BenchTable("speed", ["a", "b"], [[1, 2.5]], "cpu", docs_per_ms={"m": 2.0}, extra={"by_length": {"64": 1}})
    table.write(tmp_path / "b.json")
    raw = json.loads((tmp_path / "b.json").read_text())
    assert raw["by_length"] == {"64": 1} and "extra" not in raw  # top level, as readers outside the report read it
    assert BenchTable.read(tmp_path / "b.json") == table
    with pytest.raises(InputError, match="'speed': a row of 1 cells for 2 columns"):
        BenchTable("speed", ["a", "b"], [[1]], "").write(tmp_path / "c.json")
