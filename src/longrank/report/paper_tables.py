"""Stage ``paper_tables``: each paper's main table in its own layout, from every run a user has.

    longrank paper_tables --results results --out results/paper-tables

A paper's table spreads over runs: TKL's Table 1 has TREC DL 2019 and MS MARCO Dev columns, MIR's the same, the
Conformer-Kernel's TREC DL 2020, MORES's the passage run; each run's report sets only its own collection's figures
beside its means. This stage reads every results folder under ``--results`` (each ``<dataset>/`` with the config
stage's ``config.json`` and the compare stage's ``compare/table.csv``), finds for each of ``published.yaml``'s figures
the run on the figure's collection (``reproduction.on_collection``) and writes, per table, rows the paper's models and
columns its collections x measures: the measured mean beside the published figure, with the Effect Ratio and ΔRI
against the paper's baseline in each cell of an improved model (``effect_ratio``). Written as one HTML page
(``index.html``), LaTeX (``<table>.tex``, one per table) and CSV (``paper_tables.csv``, one row per cell); a cell
whose collection no run covers is "–", and the page lists which runs filled which columns.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from longrank.errors import InputError
from longrank.evaluate.comparison_tables import write_csv
from longrank.io.atomic import write_text
from longrank.io.json_yaml import read_json
from longrank.report.effect_ratio import effect_ratio
from longrank.report.html import Section, render_html
from longrank.report.reproduction import Figure, on_collection, published, published_pairs
from longrank.tables import fmt, to_latex

log = logging.getLogger(__name__)
CSV = "paper_tables.csv"
COLUMNS = ["table", "paper", "model", "system", "collection", "measure", "published", "measured", "ci_low",
           "ci_high", "er", "delta_ri", "run"]  # fmt: skip


@dataclass(frozen=True)
class Run:
    """One results folder: its dataset as config.json resolves it and the compare stage's table."""

    path: Path
    dataset: dict
    table: pd.DataFrame

    def mean(self, system: str, measure: str) -> tuple[float, float, float] | None:
        """(mean, CI low, CI high) of ``system`` on ``measure``, None where the run did not compare it."""
        row = self.table[(self.table.system == system) & (self.table.measure == measure)]
        if row.empty:
            return None
        r = row.iloc[0]
        return float(r["mean"]), float(r["ci_low"]), float(r["ci_high"])


def find_runs(results: Path) -> list[Run]:
    """Every finished run under ``results``: a folder with config.json and compare/table.csv."""
    runs = []
    for config in sorted(results.glob("*/config.json")):
        table = config.parent / "compare" / "table.csv"
        if table.is_file():
            dataset = read_json(config).get("dataset")
            runs.append(
                Run(config.parent, dataset if isinstance(dataset, dict) else {"name": dataset}, pd.read_csv(table))
            )
    return runs


def run_for(runs: list[Run], figure: Figure) -> Run | None:
    """The run on the figure's collection that compared the figure's entry (the first in name order)."""
    found = [run for run in runs if on_collection([figure], run.dataset) and run.mean(figure.system, figure.measure)]
    return found[0] if found else None


def cells(runs: list[Run]) -> pd.DataFrame:
    """One row per published figure (COLUMNS): the measured mean and CI of the run on its collection, and for a
    model a pair makes the improved side of, ER and ΔRI against the pair's baseline on the same collection."""
    figures = published()
    baseline_of: dict[tuple[str, str], str] = {(p.table, p.improved): p.baseline for p in published_pairs()}
    by_key = {(f.table_key, f.system, f.collection, f.measure): f for f in figures}
    rows = []
    for fig in figures:
        run = run_for(runs, fig)
        got = run.mean(fig.system, fig.measure) if run else None
        er = dri = None
        baseline = baseline_of.get((fig.table_key, fig.system), "")
        base = by_key.get((fig.table_key, baseline, fig.collection, fig.measure))
        base_got = run.mean(base.system, fig.measure) if run and base else None
        if got and base and base_got:
            er, dri = effect_ratio(fig.value, base.value, got[0], base_got[0])
        rows.append([fig.table_key, f"{fig.short}, {fig.table}", fig.model, fig.system, fig.collection, fig.measure,
                     fig.value, *(got or (None, None, None)), er, dri, str(run.path) if run else None])  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def layout(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """One paper table as the paper lays it out: a row per model (in published.yaml's order), a column per collection
    and measure; a cell "measured (published)", with "ER e, ΔRI d" where the model improves on the paper's baseline."""
    columns = list(dict.fromkeys(zip(frame.collection, frame.measure)))
    headers = ["Model", *(f"{collection} {measure}" for collection, measure in columns)]
    rows = []
    for model, group in frame.groupby("model", sort=False):
        by_column = {(r.collection, r.measure): r for r in group.itertuples()}
        rows.append([str(model), *(_cell(by_column.get(column)) for column in columns)])
    return headers, rows


def _cell(r) -> str:
    if r is None:
        return ""
    measured = "–" if pd.isna(r.measured) else fmt(r.measured, 3)
    text = f"{measured} ({fmt(r.published, 3)})"
    if not pd.isna(r.delta_ri):
        text += f" ER {'–' if pd.isna(r.er) else fmt(r.er, 2)}, ΔRI {fmt(r.delta_ri, 3)}"
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, default=Path("results"), help="the folder of results folders")
    parser.add_argument("--out", type=Path, default=None, help="where to write (default: <results>/paper-tables)")


def run(args: argparse.Namespace) -> None:
    runs = find_runs(args.results)
    if not runs:
        raise InputError(
            f"--results {args.results}: no finished run (a <dataset>/ folder with config.json and compare/table.csv); "
            "run `snakemake report` with a TREC DL config first"
        )
    out = args.out or args.results / "paper-tables"
    out.mkdir(parents=True, exist_ok=True)
    frame = cells(runs)
    write_csv(out / CSV, frame)
    sections = [_section(frame, runs)]
    for key, table in frame.groupby("table", sort=False):
        headers, rows = layout(table)
        caption = f"{table.paper.iloc[0]}: measured (published); ER and ΔRI against the paper's baseline"
        write_text(out / f"{key}.tex", to_latex(headers, rows, caption=caption, label=f"tab:{key}"))
        sections.append(Section(str(table.paper.iloc[0])).table(headers, rows, caption=caption))
    write_text(out / "index.html", render_html("The papers' tables across this checkout's runs", sections))
    filled = int(frame.measured.notna().sum())
    log.info("paper tables written to %s: %d of %d published figures measured, from %d runs", out, filled,
             len(frame), len(runs))  # fmt: skip


def _section(frame: pd.DataFrame, runs: list[Run]) -> Section:
    """Which run filled which collection's columns, and how to read a cell."""
    sec = Section("Runs read")
    sec.howto(
        "Each cell: this checkout's test mean (the paper's figure in brackets); for a model the paper sets against a "
        "baseline, the Effect Ratio (1: the paper's improvement reproduced) and ΔRI (0: its relative improvement "
        "reproduced) of Breuer et al. (SIGIR 2020). '–': no run here measured it. A run's own report gives each "
        f"mean's 95% CI and what of its setting differs from the paper's. Every cell: {CSV}."
    )
    used = frame.dropna(subset=["run"]).groupby("run").collection.unique()
    paths = [str(r.path) for r in runs]
    rows = [[path, ", ".join(sorted(used.get(path, [])) or ["none of the papers' collections"])] for path in paths]
    return sec.table(["Results folder", "Collections it fills"], rows)
