"""Section "Verdict": the report's answer before any table. Which system has the highest mean of the headline
measure, how far it is from the first stage it ranks and from the runner-up, whether those differences are
significant (the comparison's Holm-corrected Wilcoxon test, as every verdict of the report), and what it costs
(documents per millisecond, from the bench); then every system in the order of that measure."""

from __future__ import annotations

from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import base_model, stage_label
from longrank.report.verdicts import pair_row
from longrank.tables import Cell, fmt_p


def ranked(ctx: Context) -> list[str]:
    """The compared systems, highest mean of the headline measure first (the comparison's order on ties)."""
    means = ctx.cmp.means(ctx.cmp.primary)
    return sorted(ctx.cmp.systems, key=lambda s: -float(means[s]))


def significance(ctx: Context, a: str, b: str) -> tuple[float, str] | None:
    """(mean a - b, "significant (Holm p …)" or "not significant (Holm p …)"), None for a pair the comparison lacks."""
    found = pair_row(ctx.cmp.pairs, ctx.cmp.primary, a, b)
    if found is None:
        return None
    diff, p_holm, _ = found
    word = "significant" if p_holm < ctx.cmp.alpha else "not significant"
    return diff, f"{word} (Wilcoxon, Holm p {fmt_p(p_holm)})"


def cost(ctx: Context, system: str) -> str:
    """What ranking with ``system`` costs, from the bench of the model behind it."""
    model = base_model(ctx.inp, system)
    if system in ctx.inp.first_stages:
        return f"{stage_label(system)} is the first stage: no reranking cost"
    rate = ctx.inp.rate_cell(model)
    if rate == "–":
        return f"{model}'s speed was not timed (its bench did not run)"
    figure, spread = rate.split(" ", 1)  # "4.20 (1 run)", "2.00 (1.00–2.00, n=5)": the median, then its passes
    return f"{model} reranks {figure} documents per millisecond {spread}"


def signed(diff: float) -> str:
    """A difference at the report's four digits, without a "-0.0000"."""
    return f"{0.0 if abs(diff) < 5e-5 else diff:+.4f}"


def relation(diff: float, other: str, mean: float) -> str:
    """How a mean stands to ``other``'s (at the four digits the report prints)."""
    if abs(diff) < 5e-5:
        return f"level with {other} ({mean:.4f})"
    return f"{diff:+.4f} over {other} ({mean:.4f})" if diff > 0 else f"{-diff:.4f} below {other} ({mean:.4f})"


def compared(ctx: Context, a: str, b: str, name_b: str) -> str:
    """``a`` against ``b``: the difference and whether it is significant; empty for a pair the comparison lacks."""
    found = significance(ctx, a, b)
    return (
        "" if found is None else f"{relation(found[0], name_b, float(ctx.cmp.means(ctx.cmp.primary)[b]))}, {found[1]}"
    )


def headline(ctx: Context, order: list[str]) -> str:
    """One paragraph: the best model (a trained or zero-shot model's row, interpolated or not) against the first
    stage it ranks, and against the best row when that is no model (a first stage, a lexical floor) or else the
    runner-up; and its cost."""
    inp, primary = ctx.inp, ctx.cmp.primary
    means = ctx.cmp.means(primary)
    models = [s for s in order if base_model(inp, s) in inp.models]
    if not models:
        return f"{order[0]} has the highest {primary}, {float(means[order[0]]):.4f}; no model was compared."
    model = models[0]
    stage = inp.stage_of(model) or inp.default_first_stage
    parts = [f"The best model is {model}, {primary} {float(means[model]):.4f}"]
    if stage in means.index:
        parts.append(compared(ctx, model, stage, stage_label(stage)))
    if order[0] != model and order[0] != stage:  # a row above every model that is not its first stage (a floor)
        parts.append(_other(ctx, model, order[0], "the highest row is", "above the model"))
    elif order[0] == model and len(order) > 1:
        parts.append(_other(ctx, model, order[1], "next is", "below it"))
    return "; ".join(p for p in parts if p) + f". Cost: {cost(ctx, model)}."


def _other(ctx: Context, model: str, other: str, lead: str, side: str) -> str:
    """Another row beside the best model: "<lead> <other> (mean), <gap> <side>, significant or not"."""
    found = significance(ctx, model, other)
    if found is None:
        return ""
    mean = float(ctx.cmp.means(ctx.cmp.primary)[other])
    gap = "level with it" if abs(found[0]) < 5e-5 else f"{abs(found[0]):.4f} {side}"
    return f"{lead} {other} ({mean:.4f}), {gap}, {found[1]}"


def section(ctx: Context) -> Section:
    inp, cmp = ctx.inp, ctx.cmp
    primary = cmp.primary
    sec = Section("Verdict")
    order = ranked(ctx)
    sec.text(headline(ctx, order))
    if cmp.too_few_queries:
        sec.warning("Too few test queries for any difference to be significant (Effectiveness says why).")
    means = cmp.means(primary)
    rows = []
    for rank, system in enumerate(order, 1):
        stage = inp.stage_of(system)
        against = None if stage in (None, system) else pair_row(cmp.pairs, primary, system, stage)
        rows.append(
            [
                Cell(str(rank)),
                system,
                Cell(f"{float(means[system]):.4f}"),
                Cell(f"{signed(against[0])} vs {stage_label(stage)}" if against and stage else "–"),
                Cell(fmt_p(against[1]) if against else "–"),
                Cell(inp.rate_cell(base_model(inp, system)) if system not in inp.first_stages else "–"),
            ]
        )
    return sec.table(
        ["Rank", "System", primary, "Difference from its first stage", "p (Wilcoxon, Holm)", "Docs/ms"],
        rows,
        caption=f"Every system by {primary} ({cmp.settings.n_queries} test queries)",
    )
