"""Console progress: one line per dev evaluation (model, fold, step/steps, loss, dev nDCG@10, elapsed,
ETA), and progress bars that write whole lines, not carriage-return redraws, when stderr is a file (a job's log)."""

from __future__ import annotations

import io
import logging
import re

import torch

from longrank.progress import progress


def test_progress_writes_lines_to_a_file_and_redraws_on_a_terminal():
    out = io.StringIO()
    for _ in progress(range(200), desc="rerank", unit="batch", mininterval=5, file=out, delay=0):
        pass
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert 2 <= len(lines) <= 22 and lines[-1].startswith("rerank: 100%") and "200/200" in lines[-1]
    assert len(set(lines)) == len(lines)

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    tty = Terminal()
    for _ in progress(range(3), desc="rerank", file=tty, mininterval=0, delay=0):
        pass
    assert "\r" in tty.getvalue()


def test_work_done_within_a_second_shows_no_progress():
    """One quick call (an exported ranker's score() of a few documents) draws no bar on a terminal and writes no
    line to a log; work that runs longer does, from its second second."""
    import time

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for stream in (io.StringIO(), Terminal()):
        for _ in progress(range(3), desc="rerank", file=stream, mininterval=0):
            pass
        assert stream.getvalue() == ""
    out = io.StringIO()
    for _ in progress(range(3), desc="rerank", file=out, mininterval=0):
        time.sleep(0.6)
    assert "rerank" in out.getvalue()


def test_training_logs_one_line_per_dev_evaluation(tiny_data, caplog):
    from longrank.data.corpus import Corpus
    from longrank.io.trec_files import read_run
    from longrank.train import train as train_stage

    cfg = {"type": "knrm", "max_doc_len": 60, "train": {"steps": 6, "batch_size": 2, "eval_every": 3}}
    with caplog.at_level(logging.INFO, logger="longrank.train"):
        train_stage.train(
            "knrm",
            cfg,
            Corpus(tiny_data / "data"),
            read_run(tiny_data / "bm25.run"),
            0,
            30,
            torch.device("cpu"),
            tiny_data / "m" / "model.safetensors",
        )
    lines = [r.getMessage() for r in caplog.records if "dev nDCG@10" in r.getMessage()]
    pattern = r"knrm fold 0 step (3|6)/6: loss \d+\.\d{4}, dev nDCG@10 \d\.\d{4}( \(best\))?, elapsed \d+:\d\d:\d\d, ETA \d+:\d\d:\d\d"
    assert len(lines) == 2 and all(re.fullmatch(pattern, line) for line in lines), lines
    assert lines[-1].endswith("ETA 0:00:00")
