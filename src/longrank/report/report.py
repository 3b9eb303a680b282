"""Stage ``report``: one self-contained ``index.html`` (+ ``report.md``, tables and PNGs) per dataset.

Everything is read from the files the rule names in its manifest (``report.manifest``); the only numbers typed in are
the papers' published figures the reproduction section sets beside the measured ones (``published.yaml``, with the
table row each comes from).
Each section is a module of this package that computes its numbers and its fragment (``section(ctx) -> Section``);
this module gathers the inputs and puts the sections in order. A section the configuration gives no data (no
TKL model: no region positions) is kept with a one-line note saying why (``Section.not_run``).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from longrank.errors import InputError
from longrank.io.atomic import write_text
from longrank.report import (
    attention_scaling_section,
    confidence,
    diagnostics,
    effectiveness,
    efficiency,
    first_stages,
    history_section,
    interpolation,
    length_bias,
    length_buckets,
    max_length,
    mir_section,
    noninferiority,
    per_query_section,
    provenance,
    regions,
    reproduction,
    seeds_section,
    training,
    verdict_section,
)
from longrank.report.comparison import copy_tables, load_comparison
from longrank.report.context import Context
from longrank.report.html import Section, not_run_listed_once, render_html, render_markdown
from longrank.report.inputs import Inputs
from longrank.report.manifest import Manifest

log = logging.getLogger(__name__)

# The report's sections, in order. Every one is shown: one that has nothing to show says why (Section.not_run: the
# config key that switched it off, or the input that is missing). The papers' published figures follow the
# confidence intervals they are read against.
SECTIONS = [
    verdict_section,
    effectiveness,
    per_query_section,
    first_stages,
    diagnostics,
    confidence,
    seeds_section,
    reproduction,
    length_buckets,
    length_bias,
    max_length,
    regions,
    mir_section,
    efficiency,
    attention_scaling_section,
    noninferiority,
    interpolation,
    training,
    history_section,
    provenance,
]

__all__ = ["Inputs", "Manifest", "SECTIONS", "add_arguments", "build", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--manifest", required=True, help="JSON: the files to read (report.manifest.Manifest, as the rule builds it)"
    )
    parser.add_argument("--out-dir", required=True, help="report directory (index.html, report.md, tables, PNGs)")
    parser.add_argument("--length-buckets", type=int, default=4, help="query buckets for nDCG by length (default: 4)")
    parser.add_argument("--title", default=None)


def build(manifest: Manifest, out_dir: Path, n_length_buckets: int = 4, title: str | None = None) -> list[Section]:
    inp = Inputs(manifest)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig_dir = out_dir / "figures"  # one folder, so the workflow can declare the figures that exist
    fig_dir.mkdir(exist_ok=True)
    dataset = (
        inp.config.get("dataset", {}).get("name")
        if isinstance(inp.config.get("dataset"), dict)
        else inp.config.get("dataset")
    )
    title = title or f"LongRank report: {dataset}"
    cmp = load_comparison(inp)
    copy_tables(inp, cmp, out_dir)
    ctx = Context(inp, cmp, fig_dir, n_length_buckets)
    sections = [module.section(ctx) for module in SECTIONS]
    shown = not_run_listed_once(sections)
    write_text(out_dir / "index.html", render_html(title, shown))
    write_text(out_dir / "report.md", render_markdown(title, shown))
    return sections


def run(args: argparse.Namespace) -> None:
    try:
        manifest = Manifest.from_json(args.manifest)
    except (ValueError, TypeError) as err:
        raise InputError(f"--manifest: {err}") from None
    sections = build(manifest, Path(args.out_dir), args.length_buckets, args.title)
    skipped = [s.title for s in sections if not s.ran]
    log.info(
        "report written to %s (%d sections%s)",
        args.out_dir,
        len(sections),
        f"; not run, each saying why: {', '.join(skipped)}" if skipped else "",
    )
