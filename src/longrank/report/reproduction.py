"""Section "Published figures": the papers' own numbers beside the reproduced ones.

The figures live in ``published.yaml`` beside this module (package data), each with the config entry that claims
the paper's setting and the text of the paper it comes from (tests/test_published_figures.py finds it there). A
figure is shown when the run's resolved dataset is the figure's collection (its ``dataset.id`` one of the
collection's ir_datasets ids) and the run has the entry (a model, or a first stage for a first stage's row): the
paper's value, the measured mean with the compare stage's percentile bootstrap 95% CI, and whether the interval
covers the paper's value. A figure whose measure the run does not evaluate says which measure to add. Below them,
each paper's improvement of a model over its baseline as Breuer et al.'s Effect Ratio and ΔRI (effect_ratio.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


from longrank.io.json_yaml import load_yaml
from longrank.report import effect_ratio
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import first_stages, rerank_depth, stage_label, stage_of
from longrank.tables import Cell, fmt

PUBLISHED = "published.yaml"
_TRIPLED = re.compile(r"(\d+\.\d{3,})\1\1")  # a LaTeX-to-text rendering prints "0.6161" as "0.61610.61610.6161"
_NUMBER = re.compile(r"(?<![\d.,])\d*\.\d+")  # decimals only: "2,000", "512" and line numbers are not figures


def printed_numbers(text: str) -> list[str]:
    """The decimal numbers of a table row's text as printed, in order (a tripled rendering read once)."""
    return _NUMBER.findall(_TRIPLED.sub(r"\1", text))


def numbers(text: str) -> list[float]:
    return [float(n) for n in printed_numbers(text)]


@dataclass(frozen=True)
class Figure:
    """One published number: a paper's table, model and measure on one collection, and the config entry claiming it."""

    paper: str  # key of published.yaml's papers
    short: str  # how the report names the paper
    cite: str
    table: str  # as the paper names it ("Table 1")
    table_key: str
    collection: str  # key of published.yaml's collections
    collection_name: str
    ir_datasets: tuple[str, ...]
    queries: int  # how many queries the paper's figure averages over
    model: str  # as the paper names it
    config: str  # the config file (config/...) whose entry claims the paper's setting
    system: str  # that entry: a model, or a first stage
    candidates: str | None  # the first-stage method whose candidates the paper's model reranked (None: a first stage)
    candidates_label: str  # how text names them ("HDCT's top 100")
    candidates_depth: int | None  # how many of them per query the paper's model reranked
    note: str
    measure: str  # ir-measures name
    column: str  # the paper's column heading
    value: float
    snippet: str  # the table row's text up to the value

    @property
    def printed(self) -> str:
        """The value as the paper prints it (its digits): the snippet's last number."""
        found = printed_numbers(self.snippet)
        return found[-1] if found else f"{self.value:g}"


def load_published(text: str | None = None) -> list[Figure]:
    """Every figure of ``published.yaml`` (or of ``text``, a document of the same form)."""
    if text is None:
        text = resources.files("longrank.report").joinpath(PUBLISHED).read_text("utf-8")
    doc = load_yaml(text)
    papers, collections, tables = doc["papers"], doc["collections"], doc["tables"]
    out = []
    for entry in doc["entries"]:
        table = tables[entry["table"]]
        coll = collections[entry["collection"]]
        for measure, value, snippet in entry["figures"]:
            position = len(numbers(snippet)) - 1
            column = table["columns"][position] if 0 <= position < len(table["columns"]) else "?"
            paper, cand = papers[table["paper"]], entry.get("candidates")
            out.append(
                Figure(
                    paper=table["paper"],
                    short=paper["short"],
                    cite=paper["cite"],
                    table=table["table"],
                    table_key=entry["table"],
                    collection=entry["collection"],
                    collection_name=coll["name"],
                    ir_datasets=tuple(coll["ir_datasets"]),
                    queries=int(coll["queries"]),
                    model=entry["model"],
                    config=entry["config"],
                    system=entry["system"],
                    candidates=cand,
                    candidates_label=doc["candidates"][cand]["label"] if cand else "",
                    candidates_depth=doc["candidates"][cand]["depth"] if cand else None,
                    note=entry.get("note") or "",
                    measure=measure,
                    column=column,
                    value=float(value),
                    snippet=snippet,
                )
            )
    return out


@lru_cache(maxsize=1)
def published() -> tuple[Figure, ...]:
    return tuple(load_published())


@lru_cache(maxsize=1)
def published_pairs() -> tuple[effect_ratio.Pair, ...]:
    """published.yaml's baseline -> improved pairs (the Effect Ratio's)."""
    doc = load_yaml(resources.files("longrank.report").joinpath(PUBLISHED).read_text("utf-8"))
    return tuple(effect_ratio.Pair(**pair) for pair in doc.get("pairs") or [])


def on_collection(figures, dataset) -> list[Figure]:
    """The figures on the run's collection: its resolved ``dataset.id`` among the collection's ids (a dataset with no
    id, a local one, matches a collection of its name only)."""
    if not isinstance(dataset, dict):
        dataset = {"name": dataset}
    ds_id, name = dataset.get("id"), dataset.get("name")
    return [f for f in figures if (ds_id in f.ir_datasets if ds_id else name == f.collection)]


def differences(inp, fig: Figure) -> list[str]:
    """How the run's entry differs from the paper's setting where the report can see it: the candidates it reranks
    and how many; then the figure's own note."""
    out = []
    stages = first_stages(inp.config)
    if fig.candidates and fig.system in inp.models:
        stage = stage_of(inp, fig.system)
        assert stage is not None, "a configured model reranks a first stage"
        method = (stages.get(stage) or {}).get("method")
        if method != fig.candidates:
            out.append(f"reranks {stage_label(stage)} ({method}); the paper {fig.candidates_label or fig.candidates}")
        depth = rerank_depth(inp, fig.system)
        if depth != fig.candidates_depth:
            out.append(f"reranks the top {depth}; the paper the top {fig.candidates_depth:,}")
    if fig.note:
        out.append(fig.note)
    return out


def measured(cmp, fig: Figure, measures: list[str]) -> tuple[str, str]:
    """(the measured cell, the covers cell) of a figure."""
    if fig.measure not in measures:
        return f"not measured: add {fig.measure} to evaluation.measures", "–"
    row = cmp.table[(cmp.table.system == fig.system) & (cmp.table.measure == fig.measure)]
    if row.empty:
        return "not in this run's comparison", "–"
    r = row.iloc[0]
    mean, low, high = float(r["mean"]), float(r["ci_low"]), float(r["ci_high"])
    cell = f"{fmt(mean)} [{fmt(low)}, {fmt(high)}]"
    if low <= fig.value <= high:
        return cell, "yes"
    return cell, "no: paper above" if fig.value > high else "no: paper below"


def section(ctx: Context) -> Section:
    inp, cmp = ctx.inp, ctx.cmp
    sec = Section("Published figures beside the reproduced ones")
    dataset = inp.config.get("dataset")
    name = dataset.get("name") if isinstance(dataset, dict) else dataset
    figures = on_collection(published(), dataset)
    if not figures:
        return sec.not_run(
            f"the papers report no figure on {name}, so there is nothing to set beside this run's (published.yaml "
            "lists their TREC DL 2019 and 2020 document ranking figures)"
        )
    present = set(inp.models) | set(first_stages(inp.config))
    shown = [f for f in figures if f.system in present]
    absent = sorted({f.system for f in figures} - present)
    if not shown:
        return sec.not_run(
            f"the papers' figures on {name} are for the entries {', '.join(absent)}, none of which this run configures"
        )
    measures = list((inp.config.get("evaluation") or {}).get("measures") or cmp.measures)  # as configured
    _explain(sec, cmp, shown)
    rows, covered, compared = _figure_rows(inp, cmp, shown, measures)
    sec.table(
        [
            "System",
            "Paper",
            "Paper's model",
            "Measure (paper's)",
            "Published",
            "Measured [95% CI]",
            "CI covers",
            "Differs",
        ],
        rows,
        caption=f"Published figures on {name}: {covered} of {compared} measured lie inside the run's 95% CI",
    )
    missing = sorted({f.measure for f in shown} - set(measures))
    if missing:
        sec.note(
            f"Not measured by this run: {', '.join(missing)}. Add {' and '.join(missing)} to "
            "evaluation.measures to compare those figures."
        )
    if absent:
        sec.note(f"Figures for entries this run does not configure are left out: {', '.join(absent)}.")
    effect_ratio.add_table(sec, cmp, [f for f in shown if f.measure in measures], published_pairs())
    # a paper's table spreads over runs (TKL's and MIR's Table 1: TREC DL 2019 and Dev): one command sets them side by
    # side, from every run of the checkout
    return sec.note(
        "Each paper's whole table, its collections' columns side by side from every run of this checkout: "
        "`longrank paper_tables --results results` (results/paper-tables/index.html, .tex, .csv)."
    )


def _figure_rows(inp, cmp, shown: list[Figure], measures: list[str]) -> tuple[list[list], int, int]:
    """One row per published figure (a paper's model, its table and what differs on the first of its rows), and
    how many measured figures the run's CI covers, of how many compared."""
    rows, covered, compared, previous = [], 0, 0, None
    for fig in shown:
        cell, covers = measured(cmp, fig, measures)
        compared += covers != "–"
        covered += covers == "yes"
        measure = fig.measure if fig.column == fig.measure else f"{fig.measure} ({fig.column})"
        # a paper's model, its table and what differs once, on the first of its rows
        first = (fig.table_key, fig.model) != previous
        previous = (fig.table_key, fig.model)
        about = [f"{fig.short}, {fig.table}", fig.model] if first else ["", ""]
        rows.append(
            [
                fig.system,
                *about,
                measure,
                Cell(fig.printed),
                Cell(cell),
                Cell(covers),
                ("; ".join(differences(inp, fig)) or "–") if first else "",
            ]
        )
    return rows, covered, compared


def _explain(sec: Section, cmp, shown: list[Figure]) -> None:
    """Whether the means are over the papers' queries, and how to read a figure beside its CI."""
    n_queries = cmp.settings.n_queries
    papers_queries = sorted({f.queries for f in shown})
    if papers_queries != [n_queries]:
        sec.warning(
            f"This run's means are over its {n_queries} test queries, the papers' over "
            f"{' / '.join(map(str, papers_queries))}: the figures are not means over the same queries."
        )
    sec.howto(
        f"Each row is a number a paper prints for {shown[0].collection_name}, beside the configured entry that "
        f"claims the paper's setting. Measured: this run's test mean with its percentile bootstrap 95% CI over "
        f"queries ({cmp.settings.bootstrap} resamples). 'CI covers' says whether the paper's value lies inside "
        "that interval. The interval describes the variation of a mean over sampled queries, not over training "
        "runs or implementations, and the paper's figure is itself one training run's, rounded as printed: read "
        "a miss as a difference worth explaining, not as a test's verdict. 'Differs' lists what the report "
        "can see of the run's setting that is not the paper's."
    )
