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
    tables = [(name, b) for name, b in inp.benches if b.get("columns")]  # attention_scaling.json has its own section
    if not tables:
        sec.note("Skipped: no bench/*.json.")
    for name, b in tables:
        cols = list(b.get("columns") or [])
        rows = [[Cell(fmt(v, 3) if isinstance(v, float) else ("" if v is None else str(v))) for v in row]
                for row in b.get("rows") or []]
        if cols and rows:
            sec.table(cols, rows, caption=b.get("title") or name)
        if b.get("notes"):
            sec.note(str(b["notes"]))
    rates = inp.docs_per_ms
    if rates and cmp is not None and PRIMARY in cmp.measures:
        prim = cmp.table[cmp.table.measure == PRIMARY].set_index("system")
        eff = pd.DataFrame([{"system": s, "docs_per_ms": v, "mean": float(prim.loc[s, "mean"])}
                            for s, v in rates.items() if s in prim.index])
        if len(eff):
            png = plots.efficiency_plot(eff, ctx.fig_dir / "fig_efficiency.png", PRIMARY)
            sec.image(png, f"{PRIMARY} against throughput (documents re-ranked per second; MIR Fig. 5 style).")
    return sec
