"""Section: the bench stages' tables, and effectiveness against throughput (MIR Fig. 5 style)."""

from __future__ import annotations

import pandas as pd

from longrank.report import plots
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import PRIMARY, measure_missing, no_model_reason
from longrank.results.stage_outputs import SPREAD_LIMIT, BenchTable
from longrank.tables import Cell, fmt

NOISY_MARK = "‡"  # beside a median whose timings spread by more than SPREAD_LIMIT of it


def noisy_cells(bench: BenchTable) -> list[tuple[int, str]]:
    """(row index, column) of every timed cell whose spread (max − min) exceeds ``SPREAD_LIMIT`` of its median."""
    return [(i, col) for i, row in enumerate(bench.timings) for col, timing in row.items() if timing.noisy]


def timed_table(bench: BenchTable) -> tuple[list[str], list[list[Cell]]]:
    """The bench's table with a spread column after each timed (median) column: min and max relative to the
    median and the IQR; a noisy median carries ``NOISY_MARK``."""
    timed = [c for c in bench.columns if any(c in row for row in bench.timings)]
    headers = [h for c in bench.columns for h in ([c, f"{c}: spread (min / max, IQR)"] if c in timed else [c])]
    table = []
    for i, row in enumerate(bench.rows):
        timings = bench.timings[i] if bench.timings else {}
        cells = []
        for col, value in zip(bench.columns, row):
            timing = timings.get(col)
            text = fmt(value, 3) if isinstance(value, float) else ("–" if value is None else str(value))
            cells.append(Cell(text, NOISY_MARK if timing is not None and timing.noisy else ""))
            if col in timed:
                cells.append(Cell(timing.describe() if timing is not None else "–"))
        table.append(cells)
    return headers, table


def absent_benches(inp) -> list[str]:
    """Why a paper-figure bench an enabled model asks for has no table here: its ``enabled: false`` key."""
    wanted = {
        spec["capabilities"]["speed_bench"]
        for m, spec in inp.resolved.items()
        if m in inp.models and spec["capabilities"].get("speed_bench")
    }
    titles = {"mores_speed": "MORES's speed table (Table 4)", "mir_speed": "MIR against BERT-MaxP (Fig. 5)"}
    return [
        f"{titles[bench]}: {bench}.enabled: false"
        for bench in sorted(wanted & set(titles))
        if not inp.bench_enabled(bench)
    ]


def section(ctx: Context) -> Section:
    inp, cmp = ctx.inp, ctx.cmp
    sec = Section("Efficiency")
    models_benched = inp.bench_enabled("bench")
    if not models_benched:
        sec.not_run("every model's docs/ms and peak memory (stage bench): bench.enabled: false")
    elif not inp.benches:
        sec.not_run(
            no_model_reason(inp, "is benched")
            if not inp.models
            else f"no bench JSON among the report's inputs (bench/{{model}}.json of {', '.join(inp.models)})"
        )
    for why in absent_benches(inp):
        sec.not_run(why)
    for b in inp.benches:
        headers, rows = timed_table(b)
        if rows:
            sec.table(headers, rows, caption=b.title)
        if b.notes:
            sec.note(b.notes)
        noisy = noisy_cells(b)
        if noisy:
            sec.warning(
                f"{NOISY_MARK} {len(noisy)} timing(s) of this table spread (max − min) by more than "
                f"{SPREAD_LIMIT:.0%} of their median: "
                + "; ".join(
                    f"{b.rows[i][0]} {b.rows[i][1]}, {col} ({b.timings[i][col].spread:.0%})" for i, col in noisy
                )
                + ". Their medians are one draw from a wide range (a shared or busy machine): read them as approximate."
            )
    rates, passes = inp.docs_per_ms, inp.rates
    if not rates:
        if inp.benches and models_benched:
            sec.not_run("effectiveness against throughput: none of these benches gives a docs/ms figure")
        return sec
    if PRIMARY not in cmp.measures:
        return sec.not_run(f"effectiveness against throughput: {measure_missing(inp, cmp.measures)}")
    prim = cmp.table[cmp.table.measure == PRIMARY].set_index("system")
    eff = pd.DataFrame(
        [
            {
                "system": s,
                "docs_per_ms": v,
                "low": passes[s].low if s in passes else v,
                "high": passes[s].high if s in passes else v,
                "runs": passes[s].runs if s in passes else 0,
                "mean": float(prim.loc[s, "mean"]),
            }
            for s, v in rates.items()
            if s in prim.index
        ]
    )
    if not len(eff):
        return sec.not_run(f"effectiveness against throughput: no benched system ({', '.join(rates)}) was compared")
    png = plots.efficiency_plot(eff, ctx.fig_dir / "fig_efficiency.png", PRIMARY)
    sec.image(
        png, f"{PRIMARY} against throughput (documents re-ranked per second; MIR Fig. 5 style). " + spread_caption(eff)
    )
    return sec


def spread_caption(eff: pd.DataFrame) -> str:
    """What the horizontal bars are, and which points stand on one timed pass (no bar: not a precise figure)."""
    once = list(eff.loc[eff["runs"] == 1, "system"])
    unknown = list(eff.loc[eff["runs"] == 0, "system"])
    parts = ["Each point is the median over the bench's timed passes; its bar spans the slowest to the fastest pass."]
    if once:
        parts.append(f"Timed in 1 run, so no spread to show: {', '.join(once)}.")
    if unknown:
        parts.append(f"Spread not recorded (a bench JSON without its passes): {', '.join(unknown)}.")
    return " ".join(parts)
