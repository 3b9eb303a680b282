"""The console of a failed run ends with each failed job's own error, read from its log (longrank/console.py, the
Snakefile's onerror), and training's dev evaluations reach the console without opening a log (progress.to_console)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, snakemake, synthetic_collection, write_local_collection
from longrank.console import failed_jobs, job_error, print_failures


def test_a_log_with_a_worded_error_gives_that_line_and_one_without_gives_its_tail(tmp_path):
    worded = tmp_path / "data.log"
    worded.write_text("loading\nlongrank data: error: queries.tsv:3: query id 'a b' is not one word\n")
    assert job_error(worded) == ["longrank data: error: queries.tsv:3: query id 'a b' is not one word"]
    traceback = tmp_path / "train.log"
    traceback.write_text("".join(f"line {i}\n" for i in range(20)) + "ZeroDivisionError: division by zero\n")
    assert job_error(traceback)[-1] == "ZeroDivisionError: division by zero"
    assert len(job_error(traceback)) == 6
    assert job_error(tmp_path / "absent.log")[0].startswith("(the log could not be read")


@pytest.mark.stage
def test_a_failed_run_prints_the_failing_jobs_own_message_last(tmp_path, ir_datasets_home, monkeypatch):
    docs, queries, qrels = synthetic_collection(n_queries=6)
    dataset = write_local_collection(tmp_path / "mine", docs, queries, qrels)
    queries_file = tmp_path / "mine" / "queries.tsv"
    # a query whose words went into the id column: the data stage refuses it, naming the file, line and id
    queries_file.write_text(queries_file.read_text() + "bread dough yeast\tbread\n")
    config = tmp_path / "mine.yaml"
    config.write_text(yaml.safe_dump({"dataset": dataset, "mores_speed": {"enabled": False}}))
    (tmp_path / "config").symlink_to(REPO / "config")
    done = snakemake(tmp_path, "report", "--configfile", str(config), check=False)
    assert done.returncode != 0
    console = done.stdout + done.stderr
    tail = console[console.rindex("job(s) failed; each one's own error:") :]
    assert "- rule data (results/tiny/logs/data.log):" in tail, tail
    assert f"longrank data: error: {queries_file}:7: query id 'bread dough yeast' is not one word" in tail, tail
    # the same, read back from the Snakemake log it names
    snakemake_log = sorted((tmp_path / ".snakemake" / "log").glob("*.snakemake.log"))[-1]
    assert [job.rule for job in failed_jobs(snakemake_log.read_text())] == ["data"]
    out = io.StringIO()
    monkeypatch.chdir(tmp_path)  # the job logs' paths are relative to the working directory, as in onerror
    assert print_failures([str(snakemake_log)], out) == 1 and "is not one word" in out.getvalue()


def test_training_lines_reach_stdout_only_when_stderr_goes_elsewhere(tmp_path):
    code = "from longrank.progress import to_console; to_console('[train] m fold 0 step 1/2: loss 0.5')"
    log = tmp_path / "job.log"
    with log.open("w") as stderr:
        done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=stderr, text=True)
    assert done.stdout == "[train] m fold 0 step 1/2: loss 0.5\n"
    # one stream for both (a terminal, or 2>&1): written once, by the logger, not twice
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert done.stdout == ""


@pytest.mark.stage
def test_the_rich_logger_the_readme_offers_is_installed_and_plans_the_run(tmp_path, ir_datasets_home):
    (tmp_path / "config").symlink_to(REPO / "config")
    done = snakemake(tmp_path, "-n", "report", "--logger", "rich")
    assert "Workflow start" in done.stdout + done.stderr


WARNS = """
import warnings
from longrank.cli import one_line_warnings
warnings.simplefilter("always")
with one_line_warnings():
    warnings.warn("knrm: query 'u4' has no word its vocabulary knows", UserWarning)
warnings.warn("after the stage", UserWarning)
"""


def test_a_stage_prints_a_warning_as_one_plain_line_and_gives_pythons_format_back():
    done = subprocess.run([sys.executable, "-c", WARNS], capture_output=True, text=True, timeout=120, check=True)
    lines = done.stderr.splitlines()
    assert lines[0] == "UserWarning: knrm: query 'u4' has no word its vocabulary knows"  # no file:line, no source
    assert lines[1].startswith("<string>:") and lines[1].endswith("UserWarning: after the stage")
