"""Section "Effectiveness": the systems' table with significance letters and the sanity reference rows, each
system against the first stage it ranks, fine-tuned encoders against their zero-shot floor, trained rerankers
against the sanity references, and every pair's differences."""

from __future__ import annotations

from longrank.report import sanity_references
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import interpolated, stage_label
from longrank.config.model_entries import is_zero_shot
from longrank.report.verdicts import verdict_rows
from longrank.tables import LETTER_NOTE, Cell, effectiveness_rows, fmt, fmt_p

VERDICT_HEADERS = ["Mean difference", "p (Wilcoxon, Holm)"]


def is_fine_tuned_encoder(spec: dict | None, resolved: dict | None) -> bool:
    """A model on a pretrained WordPiece encoder (config.json's ``resolved_models``) whose weights were trained here
    (its own or ``checkpoint_of``'s)."""
    if not spec or not resolved:
        return False
    return bool(resolved["on_pretrained_encoder"]) and not is_zero_shot(spec)


def section(ctx: Context) -> Section:
    inp, cmp = ctx.inp, ctx.cmp
    sec = Section("Effectiveness")
    sec.warning(cmp.too_few_queries)
    weights, expected = sanity_references.interpolation_weights(inp), sanity_references.random_order(inp)
    _systems_table(sec, ctx, weights, expected)
    _against_first_stages(sec, ctx, weights)
    _against_zero_shot_floors(sec, ctx)
    sec.table(
        *sanity_references.sanity_table(
            inp,
            cmp.table,
            cmp.pairs,
            cmp.systems,
            cmp.primary,
            cmp.alpha,
            expected.get(inp.default_first_stage, {}),
            expected,
        ),
        caption=f"Trained rerankers against the sanity references ({cmp.primary})",
    )
    _pairwise_differences(sec, cmp.pairs, cmp.primary)
    return sec


# docs/ms with the range of its timed passes (slowest–fastest), or "1 run" where the bench timed one
RATE_HEADER = "Docs/ms (median; slowest–fastest pass)"


def _systems_table(sec: Section, ctx: Context, weights, expected) -> None:
    """The systems' table with significance letters, document budgets, speeds, interpolation weights and the
    random-order reference rows."""
    inp, cmp = ctx.inp, ctx.cmp
    systems = cmp.systems
    rates = inp.docs_per_ms
    extra_cols = ["Max doc len"] + ([RATE_HEADER] if rates else [])
    extra = {s: {"Max doc len": inp.max_doc_len(s) or "–", RATE_HEADER: inp.rate_cell(s)} for s in systems}
    extra_cols += sanity_references.weight_column(weights, extra)  # "w (dev)" beside every model+{first stage} row
    headers, rows = effectiveness_rows(cmp.table, systems, cmp.measures, extra, extra_cols)
    rows += sanity_references.random_order_rows(
        expected, headers, cmp.primary
    )  # reference rows: the nDCG@10 column only
    settings = cmp.settings
    sec.howto(
        LETTER_NOTE.format(alpha=cmp.alpha) + " Confidence intervals are percentile bootstrap 95% intervals "
        f"over queries ({settings.bootstrap} resamples, seed {settings.seed}). "
        f"All systems are evaluated on the same {settings.n_queries} test queries. "
        + sanity_references.reference_note(inp)
    )
    sec.table(headers, rows)


def _against_first_stages(sec: Section, ctx: Context, weights) -> None:
    """Each system against the first stage whose candidates it ranks (the other first stages: their own section)."""
    inp, cmp = ctx.inp, ctx.cmp
    systems, primary = cmp.systems, cmp.primary
    for stage in inp.first_stages:
        if stage not in systems:
            continue
        label = stage_label(stage)
        others = [s for s in systems if s not in inp.first_stages and inp.stage_of(s) == stage]
        if not others:  # a first stage nothing reranks (e.g. a model's fullrank run): compared in "First stages"
            continue
        lines = verdict_rows(
            cmp.pairs,
            primary,
            [(s, stage) for s in others],
            label,
            cmp.alpha,
            sanity_references.zero_weight_verdicts(weights, label),
        )
        sec.table(
            ["System", f"vs {label} on {primary}", *VERDICT_HEADERS],
            lines,
            caption=f"Each system against {label} ({primary})",
        )


def _against_zero_shot_floors(sec: Section, ctx: Context) -> None:
    """Each fine-tuned encoder row against the untrained encoder it starts from (on the same first stage),
    interpolated against interpolated."""
    inp, cmp = ctx.inp, ctx.cmp
    systems, primary = cmp.systems, cmp.primary
    tuned = [
        s
        for s in systems
        if is_fine_tuned_encoder(inp.models.get(inp.base_model(s)), inp.resolved.get(inp.base_model(s)))
    ]
    for floor in [s for s in systems if is_zero_shot(inp.models.get(s))]:
        stage = inp.stage_of(floor)
        pairings = [
            (s, floor if inp.base_model(s) == s else interpolated(inp, floor))
            for s in tuned
            if inp.stage_of(s) == stage
        ]
        lines = verdict_rows(cmp.pairs, primary, pairings, f"the {floor} floor", cmp.alpha)
        if lines:
            sec.table(
                ["System", f"vs {floor} on {primary}", *VERDICT_HEADERS],
                lines,
                caption=f"Fine-tuned encoders against the zero-shot floor {floor} ({primary}; +{stage} rows "
                f"against {interpolated(inp, floor)})",
            )


def _pairwise_differences(sec: Section, pairs, primary: str) -> None:
    detail = []
    for _, r in pairs[pairs.measure == primary].iterrows():
        detail.append(
            [
                f"{r.system_a} − {r.system_b}",
                Cell(f"{r.mean_diff:+.4f}"),
                Cell(f"[{r.diff_ci_low:+.4f}, {r.diff_ci_high:+.4f}]"),
                Cell(fmt(float(r.cohens_d), 2)),
                Cell(fmt_p(r.wilcoxon_p)),
                Cell(fmt_p(r.wilcoxon_p_holm)),
                Cell(fmt_p(r.ttest_p)),
                Cell(fmt_p(r.ttest_p_holm)),
            ]
        )
    sec.table(
        ["Pair", "Mean diff", "95% CI", "Cohen's d", "Wilcoxon p", "Wilcoxon p (Holm)", "t-test p", "t-test p (Holm)"],
        detail,
        caption=f"Pairwise differences on {primary}",
    )
