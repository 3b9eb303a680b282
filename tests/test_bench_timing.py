"""Benches that give one number: the timing record's median and spread, two rows of one bench at the same
effective length agreeing within their spread, and the report's marker for a spread above 10% of the median."""

from __future__ import annotations

import json
import statistics

import pytest
import torch

from longrank.bench.timing import time_alternating, time_region
from longrank.cli import main
from longrank.errors import InputError
from longrank.models.checkpoint import save_weights
from longrank.models.registry import build_model
from longrank.results.stage_outputs import SPREAD_LIMIT, BenchTable, Timing
from longrank.report.efficiency import NOISY_MARK, noisy_cells, timed_table
from test_tk_tkl import write_tiny_corpus


@pytest.fixture(scope="module")
def tk_bench(tmp_path_factory):
    """A real bench of TK (max_doc_len 120) at 120 and 240 words: both rows score 120 words."""
    tmp = tmp_path_factory.mktemp("bench-timing")
    corpus = write_tiny_corpus(tmp / "data")
    cfg = {"type": "tk", "n_layers": 1, "max_query_len": 8, "max_doc_len": 120}
    torch.manual_seed(0)
    save_weights(build_model(cfg, corpus), tmp / "tk.safetensors")
    out = tmp / "tk.json"
    args = ["bench", "--model", "tk", "--model-config", json.dumps(cfg), "--checkpoint", str(tmp / "tk.safetensors")]
    args += ["--data", str(corpus.dir), "--lengths", "120", "240", "--batch-size", "4", "--repeats", "7"]
    main([*args, "--device", "cpu", "--out", str(out)])
    return out


def test_timing_summarises_its_passes():
    t = Timing(seconds=[0.5, 0.1, 0.2, 0.3, 0.4], warmup=1)
    assert (t.median_s, t.min_s, t.max_s) == (0.3, 0.1, 0.5)
    assert (t.q1_s, t.q3_s) == pytest.approx((0.2, 0.4))
    assert t.spread == pytest.approx(0.4 / 0.3) and t.noisy
    # a file's summary fields are recomputed from its passes, not trusted
    assert Timing.from_json({**t.to_json(), "median_s": 9.0}).median_s == 0.3
    steady = Timing(seconds=[1.0, 1.02, 0.99, 1.01, 1.0], warmup=1)
    assert steady.spread == pytest.approx(0.03) and not steady.noisy
    assert steady.describe() == "-1% / +2%, IQR 1% (n=5)"
    with pytest.raises(InputError, match="no timed passes"):
        Timing(seconds=[], warmup=0)


def test_time_region_warms_up_then_times_every_pass():
    calls = []
    timing = time_region(lambda: calls.append(1), "cpu", repeats=5, warmup=2)
    assert len(calls) == 7 and len(timing.seconds) == 5 and timing.warmup == 2
    order = []
    both = time_alternating({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, "cpu", 3, warmup=1)
    assert order == ["a", "b"] + ["a", "b"] * 3 and set(both) == {"a", "b"}
    with pytest.raises(InputError, match="repeats"):
        time_region(lambda: None, "cpu", repeats=0)


@pytest.mark.stage  # the bench stage runs TK
def test_two_rows_at_the_same_effective_length_agree_within_their_spread(tk_bench):
    table = BenchTable.read(tk_bench)
    assert len(table.timings) == len(table.rows)
    by_length = {row[1]: (row, timing) for row, timing in zip(table.rows, table.timings)}
    (row_a, timing_a), (row_b, timing_b) = by_length[120], by_length[240]
    assert row_a[2] == row_b[2] == 120  # both truncated to max_doc_len
    a, b = timing_a["ms/batch (median)"], timing_b["ms/batch (median)"]
    assert len(a.seconds) == len(b.seconds) == 7
    # the same work measured twice: the ranges of their passes overlap
    assert a.min_s <= b.max_s and b.min_s <= a.max_s, (a.to_json(), b.to_json())
    assert row_a[4] == pytest.approx(1000 * a.median_s)


@pytest.mark.stage  # the bench stage runs TK
def test_report_marks_a_median_whose_spread_exceeds_the_limit(tk_bench):
    raw = json.loads(tk_bench.read_text())
    for row in raw["timings"]:  # the real passes made steady (the shared test machine's own spread varies) ...
        for timing in row.values():
            timing["seconds"] = [statistics.median(timing["seconds"])] * len(timing["seconds"])
    steady = BenchTable.from_json(raw)
    assert noisy_cells(steady) == []
    headers, rows = timed_table(steady)
    assert "ms/batch (median): spread (min / max, IQR)" in headers
    assert all(NOISY_MARK not in cell.sup for row in rows for cell in row)

    widened = json.loads(json.dumps(raw))  # ... then one row widened past the limit
    first = widened["timings"][0]["ms/batch (median)"]
    median = sorted(first["seconds"])[len(first["seconds"]) // 2]
    first["seconds"] = [median] * 4 + [median * (1 + 2 * SPREAD_LIMIT)]
    table = BenchTable.from_json(widened)
    assert noisy_cells(table) == [(0, "ms/batch (median)")]
    headers, rows = timed_table(table)
    median_cell = rows[0][headers.index("ms/batch (median)")]
    assert median_cell.sup == NOISY_MARK
    assert rows[0][headers.index("ms/batch (median): spread (min / max, IQR)")].text.startswith("+0% / +20%")


@pytest.mark.stage  # the bench stage runs TK
def test_a_timing_for_a_column_the_table_lacks_is_refused(tk_bench):
    raw = json.loads(tk_bench.read_text())
    raw["timings"][0] = {"no such column": {"seconds": [0.1], "warmup": 0}}
    with pytest.raises(InputError, match="no such column"):
        BenchTable.from_json(raw)


def test_attention_scaling_marks_a_noisy_time_median():
    from longrank.report.attention_scaling_section import _measure_cells

    def row(attention, seconds):
        timing = Timing(seconds=seconds, warmup=1)
        return {"attention": attention, "length": 500, "seconds": timing.median_s, "timing": timing.to_json()}

    data = {"rows": [row("sdpa", [1.0, 1.0, 1.0, 1.0, 1.5]), row("separable", [1.0, 1.01, 1.0, 0.99, 1.0])]}
    headers, (cells,) = _measure_cells(data, "seconds", 3)
    assert [c.sup for c in cells[1:]] == [NOISY_MARK, ""]
