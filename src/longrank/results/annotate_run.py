"""Stage ``annotate_run``: a copy of one run with its ir_metadata record inside, ir_metadata's in-run form (the
record as a ``# ir_metadata.start`` ... ``# ir_metadata.end`` comment header, each line ``# ``-prefixed, then the
run's lines unchanged), for where a run is shared alone: a TREC submission, repro_eval's ``PrimadExperiment``.

On request only, never in the workflow: trec_eval, ir-measures' ``read_trec_run`` and LongRank's own run reader refuse
comment lines, so every run the workflow writes stays a plain six-column TREC run with its record beside it
(``<run>.meta.yaml``, :mod:`longrank.results.run_metadata`), which is what this copies in. repro_eval's
``MetadataHandler.read_metadata`` reads the header back (it drops the ``#`` and parses the rest as YAML) and
``MetadataHandler.strip_metadata`` the ranking.
"""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path

import yaml

from longrank.errors import InputError
from longrank.io.atomic import write_text
from longrank.results.run_metadata import metadata_path, read_run_metadata

log = logging.getLogger(__name__)

START = "# ir_metadata.start"
END = "# ir_metadata.end"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, help="a run with its record beside it (<run>.meta.yaml)")
    parser.add_argument("--out", required=True, help="the annotated copy to write (not the run itself)")


def header(record: dict) -> str:
    """The record as ir_metadata's comment header. One line per YAML line (no wrapping: a folded long string would
    still parse, but a line is easier to read and grep whole), each ``# ``-prefixed."""
    text = yaml.safe_dump(record, sort_keys=False, allow_unicode=True, width=math.inf)
    return "".join(f"# {line}\n" for line in [START[2:], *text.splitlines(), END[2:]])


def annotated(run_text: str, record: dict) -> str:
    """The run's text behind the record's header."""
    if run_text.startswith(START):
        raise InputError("the run already starts with an ir_metadata header")
    return header(record) + run_text


def run(args) -> None:
    run_path, out = Path(args.run), Path(args.out)
    if out.resolve() == run_path.resolve():
        raise InputError(f"--out {out} is the run itself: the annotated form is a copy, the run stays plain TREC")
    if not run_path.is_file():
        raise InputError(f"--run {run_path}: no such file")
    record = read_run_metadata(run_path)
    if record is None:
        raise InputError(f"--run {run_path}: no record beside it ({metadata_path(run_path).name})")
    try:
        text = annotated(run_path.read_text(encoding="utf-8"), record)
    except InputError as err:
        raise InputError(f"--run {run_path}: {err}") from None
    write_text(out, text)
    log.info("wrote %s: %s with its ir_metadata record as a comment header", out, run_path)
