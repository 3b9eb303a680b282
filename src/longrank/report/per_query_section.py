"""Section "Per query": what a mean hides. For each system, on the headline measure, how many test queries it wins,
ties and loses against the first stage whose candidates it ranks, and its largest gain and loss with their queries;
where a first stage returned fewer candidates than a system reranks, how many queries that limits. Every system's
value on every measure and query is in ``per_query.csv`` beside the report, to check any mean against."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from longrank.evaluate.comparison_tables import write_csv
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import rerank_depth, stage_label
from longrank.report.plots import plt, save_figure
from longrank.tables import Cell

PER_QUERY_CSV = "per_query.csv"
#: a difference this small is a tie (the evaluation's own rounding, not a change of ranking)
TIE = 1e-9


def long_frame(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """query_id, system, measure, value: every system's per-query evaluation in one table."""
    parts = [
        frame.reset_index().melt(id_vars="query_id", var_name="measure", value_name="value").assign(system=system)
        for system, frame in frames.items()
    ]
    return pd.concat(parts)[["query_id", "system", "measure", "value"]].sort_values(
        ["system", "measure", "query_id"], kind="stable"
    )


def outcomes(system: pd.Series, stage: pd.Series) -> dict:
    """Wins, ties and losses of ``system`` against ``stage`` over the queries both evaluate, and the largest gain
    and loss with their query (None without a win, or without a loss)."""
    diff = (system - stage).dropna()
    return {
        "wins": int((diff > TIE).sum()),
        "ties": int((diff.abs() <= TIE).sum()),
        "losses": int((diff < -TIE).sum()),
        "gain": (diff.idxmax(), float(diff.max())) if (diff > TIE).any() else None,
        "loss": (diff.idxmin(), float(diff.min())) if (diff < -TIE).any() else None,
    }


def section(ctx: Context) -> Section:
    inp, cmp = ctx.inp, ctx.cmp
    primary = cmp.primary
    sec = Section("Per query")
    write_csv(ctx.fig_dir.parent / PER_QUERY_CSV, long_frame(cmp.frames))
    sec.howto(
        f"Each system against the first stage whose candidates it ranks, query by query on {primary}: a win is a "
        f"higher value, a tie the same (within {TIE:g}). A mean can rise with more losses than wins, or hide one "
        f"query that moves it. Every system's value on every measure and query: {PER_QUERY_CSV}."
    )
    rows, counts = [], {}
    for system in cmp.systems:
        stage = inp.stage_of(system)
        if stage in (None, system) or stage not in cmp.frames:
            continue
        found = outcomes(cmp.frames[system][primary], cmp.frames[stage][primary])
        counts[system] = (found["wins"], found["ties"], found["losses"])
        rows.append([system, stage_label(stage), *map(Cell, map(str, counts[system])), _extreme(found["gain"]),
                     _extreme(found["loss"])])  # fmt: skip
    if not rows:
        return sec.not_run("no system ranks a first stage's candidates (only first stages are compared)")
    sec.table(
        ["System", "Against", "Wins", "Ties", "Losses", "Largest gain (query)", "Largest loss (query)"],
        rows,
        caption=f"Wins, ties and losses per query ({primary})",
    )
    sec.image(
        wins_plot(counts, primary, ctx.fig_dir / "per_query.png"), caption=f"Queries won, tied and lost ({primary})"
    )
    for note in short_candidate_lists(ctx):
        sec.note(note)
    return sec


def _extreme(found: tuple[str, float] | None) -> Cell:
    return Cell(f"{found[1]:+.4f} ({found[0]})" if found else "–")


def short_candidate_lists(ctx: Context) -> list[str]:
    """Per first stage, how many test queries it gave fewer candidates than the deepest system reranking it asks for:
    on those a reranker orders all there is, and a tiny collection's rankings can equal the first stage's."""
    inp, notes = ctx.inp, []
    for stage in inp.first_stages:
        depths = [rerank_depth(inp, s) for s in ctx.cmp.systems if s != stage and inp.stage_of(s) == stage]
        run = inp.candidates(stage)
        if not depths or run is None:
            continue
        depth = max(depths)
        sizes = [len(run.get(q, {})) for q in inp.evaluated_qids]
        short = [n for n in sizes if n < depth]
        if short:
            notes.append(
                f"{stage_label(stage)} returned fewer than {depth} candidates (the deepest rerank of it) for "
                f"{len(short)} of {len(sizes)} test queries (as few as {min(short)}): on those the rerankers order "
                "only what it returned."
            )
    return notes


def wins_plot(counts: dict[str, tuple[int, int, int]], measure: str, path) -> Path:
    """Each system's queries won, tied and lost against its first stage (``per_query_section``) as one stacked bar."""
    systems = list(counts)
    fig, ax = plt.subplots(figsize=(6.5, 0.4 * len(systems) + 1.4))
    left = np.zeros(len(systems))
    y = np.arange(len(systems))[::-1]
    for i, (label, color) in enumerate((("wins", "#2a9d55"), ("ties", "#bbbbbb"), ("losses", "#d1495b"))):
        values = np.array([counts[s][i] for s in systems], dtype=float)
        ax.barh(y, values, left=left, color=color, label=label)
        left += values
    ax.set_yticks(y, systems)
    ax.set_xlabel(f"test queries, by {measure} against the first stage each system ranks")
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=3, fontsize=8, frameon=False)  # above: no bar hidden
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole queries
    return save_figure(fig, path)
