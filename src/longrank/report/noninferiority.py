"""Section: MORES-style non-inferiority of each system to compare's ``--reference``."""

from __future__ import annotations

from longrank.report.context import Context
from longrank.report.html import Section
from longrank.tables import Cell, fmt_p


def section(ctx: Context) -> Section:
    sec = Section("Non-inferiority")
    ni = ctx.cmp.noninferiority
    if ni is None or ni.empty:
        return sec.not_run(
            "evaluation.noninferiority_reference: null (name a system there, e.g. bm25, to test every system's "
            "non-inferiority to it at evaluation.margins)"
        )
    ref = ni["reference"].iloc[0]
    sec.howto(
        f"MORES-style test (Gao et al. 2020, §4.1): for margin δ (a fraction of {ref}'s mean), a one-sided "
        f"paired t-test rejects H0: mean(system) − mean({ref}) ≤ −δ·mean({ref}). ✓ = non-inferior "
        f"(p < {ctx.cmp.alpha}): any loss against {ref} is smaller than the margin."
    )
    ni_measures = list(dict.fromkeys(ni["measure"]))
    rows = []
    for (s, margin), grp in ni.groupby(["system", "margin"], sort=False):
        g = grp.set_index("measure")
        rows.append(
            [
                s,
                f"{100 * margin:g}%",
                *[
                    Cell(("✓ " if g.loc[m, "verdict"] == "non-inferior" else "✗ ") + f"p={fmt_p(float(g.loc[m, 'p']))}")
                    for m in ni_measures
                ],
            ]
        )
    return sec.table(["System", "Margin", *ni_measures], rows, caption=f"Non-inferiority to {ref}")
