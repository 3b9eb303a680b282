"""Stage ``report``: one self-contained ``index.html`` (+ ``report.md``, tables and PNGs) per dataset.

Everything is read from ``results/{dataset}/``; no number is typed in. Each section is a module of this
package that computes its numbers and its fragment (``section(ctx) -> Section``); this module gathers the
inputs and puts the sections in order. A section whose inputs are absent is kept with a one-line note saying
what is missing, so a partial run still gives a report.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from longrank.io import InputError, write_text
from longrank.report import (attention_scaling, confidence, diagnostics, effectiveness, efficiency, first_stages,
                             interpolation, length_bias, length_buckets, max_length, mir, noninferiority, provenance,
                             regions, training)
from longrank.report.comparison import copy_tables, load_comparison
from longrank.report.context import Context
from longrank.report.html import Section, render_html, render_markdown
from longrank.report.inputs import Inputs

log = logging.getLogger(__name__)

# The report's sections, in order. A section may return None to be left out (attention_scaling: only when its
# optional stage ran).
SECTIONS = [effectiveness, first_stages, diagnostics, confidence, length_buckets, length_bias, max_length, regions,
            mir, efficiency, attention_scaling, noninferiority, interpolation, training, provenance]

__all__ = ["Inputs", "SECTIONS", "add_arguments", "build", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", required=True, help="results/{dataset}")
    parser.add_argument("--out-dir", required=True, help="report directory (index.html, report.md, tables, PNGs)")
    parser.add_argument("--eval-dir", default=None, help="per-query evaluations (default: RESULTS/eval)")
    parser.add_argument("--compare-dir", default=None, help="compare outputs (default: RESULTS/compare)")
    parser.add_argument("--length-buckets", type=int, default=4, help="query buckets for nDCG by length (default: 4)")
    parser.add_argument("--title", default=None)


def build(results: Path, out_dir: Path, eval_dir: Path | None = None, compare_dir: Path | None = None,
          n_length_buckets: int = 4, title: str | None = None) -> list[Section]:
    results, out_dir = Path(results), Path(out_dir)
    if not results.is_dir():
        raise InputError(f"results directory {results} does not exist")
    inp = Inputs(results, Path(eval_dir or results / "eval"), Path(compare_dir or results / "compare"))
    out_dir.mkdir(parents=True, exist_ok=True)
    fig_dir = out_dir / "figures"  # one folder, so the workflow can declare the figures that exist
    fig_dir.mkdir(exist_ok=True)
    dataset = inp.config.get("dataset", {}).get("name") if isinstance(inp.config.get("dataset"), dict) else inp.config.get("dataset")
    title = title or f"LongRank report: {dataset or results.name}"
    cmp = load_comparison(inp)
    copy_tables(inp, cmp, out_dir)
    ctx = Context(inp, cmp, fig_dir, n_length_buckets)
    sections = [s for s in (module.section(ctx) for module in SECTIONS) if s is not None]
    write_text(out_dir / "index.html", render_html(title, sections))
    write_text(out_dir / "report.md", render_markdown(title, sections))
    return sections


def run(args: argparse.Namespace) -> None:
    sections = build(Path(args.results), Path(args.out_dir), args.eval_dir and Path(args.eval_dir),
                     args.compare_dir and Path(args.compare_dir), args.length_buckets, args.title)
    skipped = [s.title for s in sections if s.blocks and all(b.kind == "note" for b in s.blocks)]
    log.info("report written to %s (%d sections%s)", args.out_dir, len(sections),
             f"; skipped: {', '.join(skipped)}" if skipped else "")
