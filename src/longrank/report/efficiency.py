"""Section: the bench stages' tables, and effectiveness against throughput (MIR Fig. 5 style)."""

from __future__ import annotations

import pandas as pd

from longrank.report import plots
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import PRIMARY
from longrank.tables import Cell, fmt


def section(ctx: Context) -> Section:
    inp, cmp = ctx.inp, ctx.cmp
    sec = Section("Efficiency")
    if not inp.benches:
        sec.note("Skipped: no bench stage runs in this configuration.")
    for b in inp.benches:
        rows = [
            [Cell(fmt(v, 3) if isinstance(v, float) else ("" if v is None else str(v))) for v in row] for row in b.rows
        ]
        if rows:
            sec.table(b.columns, rows, caption=b.title)
        if b.notes:
            sec.note(b.notes)
    rates = inp.docs_per_ms
    if rates and PRIMARY in cmp.measures:
        prim = cmp.table[cmp.table.measure == PRIMARY].set_index("system")
        eff = pd.DataFrame(
            [
                {"system": s, "docs_per_ms": v, "mean": float(prim.loc[s, "mean"])}
                for s, v in rates.items()
                if s in prim.index
            ]
        )
        if len(eff):
            png = plots.efficiency_plot(eff, ctx.fig_dir / "fig_efficiency.png", PRIMARY)
            sec.image(png, f"{PRIMARY} against throughput (documents re-ranked per second; MIR Fig. 5 style).")
    return sec
