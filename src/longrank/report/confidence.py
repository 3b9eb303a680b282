"""Section: the primary measure per system with its bootstrap 95% confidence interval."""

from __future__ import annotations

from longrank.report import plots
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import PRIMARY, measure_missing, stage_label


def section(ctx: Context) -> Section:
    cmp = ctx.cmp
    sec = Section(f"{PRIMARY} with bootstrap 95% confidence intervals")
    if PRIMARY not in cmp.measures:
        return sec.not_run(measure_missing(ctx.inp, cmp.measures))
    references = {s: stage_label(s) for s in ctx.inp.first_stages}
    png = plots.ci_plot(cmp.table, PRIMARY, cmp.systems, ctx.fig_dir / "fig_ci_ndcg10.png", cmp.letters, references)
    return sec.image(
        png,
        f"Mean {PRIMARY} per system; bars are percentile bootstrap 95% CIs over test queries. "
        "Overlapping intervals do not imply a non-significant paired difference: see the pairwise table.",
    )
