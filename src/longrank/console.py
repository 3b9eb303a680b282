"""What a failed workflow run prints last: each failed job's own error, read from the job's log file.

A stage writes its clear message (``longrank data: error: queries.tsv:3: query id 'bread dough yeast' is not one
word``) to stderr, which the rules send to ``results/{dataset}/logs/<rule>_<model>.log``; Snakemake's console shows
only the job's shell command and "check log file(s)". The Snakefile's ``onerror`` hands Snakemake's own log to
``print_failures``, which finds the failed jobs' log files in it and prints, per job, the rule, the log's path and
the stage's error line (or, for an error the stage did not word itself, the last lines of its traceback).
Torch-free: it runs inside Snakemake's process.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

#: a stage's own worded error (longrank/cli.py prints it so)
_STAGE_ERROR = re.compile(r"^longrank [\w-]+: error: ")
#: lines of a log shown when it holds no worded error (the end of a traceback)
TAIL_LINES = 6


@dataclass(frozen=True)
class FailedJob:
    rule: str
    logs: tuple[str, ...]


def failed_jobs(snakemake_log: str) -> list[FailedJob]:
    """The jobs Snakemake reports as failed (``Error in rule X:`` blocks), each with its log files, in order."""
    jobs: list[FailedJob] = []
    rule = None
    for line in snakemake_log.splitlines():
        start = re.match(r"^Error in rule ([\w-]+):", line)
        if start:
            rule = start.group(1)
            jobs.append(FailedJob(rule, ()))
            continue
        logs = re.match(r"^\s+log: (.+?) \(check log file", line)
        if logs and rule is not None:
            jobs[-1] = FailedJob(rule, tuple(path.strip() for path in logs.group(1).split(",")))
            rule = None
    return jobs


def job_error(log_file: str | Path) -> list[str]:
    """The stage's worded error lines in a job's log, or the log's last lines when it has none."""
    try:
        lines = [line.rstrip() for line in Path(log_file).read_text(errors="replace").splitlines() if line.strip()]
    except OSError as err:
        return [f"(the log could not be read: {err.strerror})"]
    worded = [line for line in lines if _STAGE_ERROR.match(line)]
    return worded or lines[-TAIL_LINES:] or ["(the log is empty)"]


def print_failures(snakemake_logs, stream=None) -> int:
    """Print every failed job's error from its log; returns how many failed jobs were found. ``snakemake_logs``: the
    path of Snakemake's own log, or a list of them (Snakemake 9's ``onerror`` gives one per log handler)."""
    stream = sys.stderr if stream is None else stream
    paths = [snakemake_logs] if isinstance(snakemake_logs, (str, Path)) else list(snakemake_logs or [])
    texts = [Path(path).read_text(errors="replace") for path in paths if path and Path(path).is_file()]
    jobs = failed_jobs("\n".join(texts[:1]))  # the handlers' logs say the same: read the first
    if not jobs:
        return 0
    print(f"\nLongRank: {len(jobs)} job(s) failed; each one's own error:", file=stream)
    for job in jobs:
        for log_file in job.logs or ("",):
            print(f"- rule {job.rule}" + (f" ({log_file}):" if log_file else " (no log file):"), file=stream)
            for line in job_error(log_file) if log_file else []:
                print(f"    {line}", file=stream)
    stream.flush()
    return len(jobs)
