"""Reproduction measured as IR measures it: the Effect Ratio and the Delta Relative Improvement of Breuer
et al., "How to Measure the Reproducibility of System-oriented IR Experiments" (SIGIR 2020), for each baseline ->
improved pair a paper's table gives (published.yaml's ``pairs``), computed by the authors' ``repro-eval`` package.

For a measure M, a baseline b and an improved system a, the original (the paper's) and the reproduced (this run's):

- ER = (mean M(a_rep) - mean M(b_rep)) / (mean M(a_orig) - mean M(b_orig)): 1 reproduces the paper's improvement
  exactly, below 1 a smaller one, above 1 a larger one, negative the reverse;
- ΔRI = RI_orig - RI_rep with RI = (mean M(a) - mean M(b)) / mean M(b): 0 reproduces the relative improvement,
  positive a smaller one.

Both depend on the per-topic scores only through their means over the same topics (a mean of differences is the
difference of the means), and the papers print means only: the original side is given to repro-eval as one topic
holding the paper's mean, the reproduced side as this run's test means (the compare stage's table, the same number
as the "Measured" column). A published difference of 0 (NDRM1 and NDRM3 rerank share RR@100 0.9333) has no ER.
"""

from __future__ import annotations

from dataclasses import dataclass

from repro_eval.measure.overall_effects import DRI, ER

from longrank.tables import Cell, fmt


@dataclass(frozen=True)
class Pair:
    """One of published.yaml's ``pairs``: a table's baseline and improved model, by their entries' systems."""

    table: str  # published.yaml's table key
    baseline: str
    improved: str


def effect_ratio(orig_a: float, orig_b: float, rep_a: float, rep_b: float) -> tuple[float | None, float]:
    """(ER, ΔRI) of one measure from the four means, by repro-eval (ER None where the paper's difference is 0)."""
    orig_a_, orig_b_ = {"mean": {"m": orig_a}}, {"mean": {"m": orig_b}}
    rep_a_, rep_b_ = {"mean": {"m": rep_a}}, {"mean": {"m": rep_b}}
    er = ER(orig_a_, orig_b_, rep_a_, rep_b_)["m"] if orig_a != orig_b else None
    return er, DRI(orig_a_, orig_b_, rep_a_, rep_b_)["m"]


def _covers(cmp, fig) -> str:
    row = cmp.table[(cmp.table.system == fig.system) & (cmp.table.measure == fig.measure)].iloc[0]
    return "yes" if row["ci_low"] <= fig.value <= row["ci_high"] else "no"


def rows(cmp, figures, pairs) -> list[list]:
    """One row per (pair, measure) both of whose figures the run measured."""
    means = {(s, m): v for s, m, v in zip(cmp.table.system, cmp.table.measure, cmp.table["mean"])}
    out = []
    for pair in pairs:
        base = {f.measure: f for f in figures if f.table_key == pair.table and f.system == pair.baseline}
        for measure, better in ((f.measure, f) for f in figures if f.table_key == pair.table):
            if better.system != pair.improved or measure not in base:
                continue
            worse = base[measure]
            if (pair.improved, measure) not in means or (pair.baseline, measure) not in means:
                continue
            rep_a, rep_b = means[(pair.improved, measure)], means[(pair.baseline, measure)]
            er, dri = effect_ratio(better.value, worse.value, rep_a, rep_b)
            out.append(
                [
                    f"{pair.baseline} → {pair.improved}",
                    f"{better.short}, {better.table}",
                    measure,
                    Cell(f"{better.value - worse.value:+.4f}"),
                    Cell(f"{rep_a - rep_b:+.4f}"),
                    Cell(fmt(er) if er is not None else "– (no published difference)"),
                    Cell(fmt(dri)),
                    Cell(f"{_covers(cmp, worse)} / {_covers(cmp, better)}"),
                ]
            )
    return out


def add_table(sec, cmp, figures, pairs) -> None:
    """The ER / ΔRI table below the figures, or a note naming the pairs the run cannot set side by side."""
    found = rows(cmp, figures, pairs)
    if not found:
        wanted = ", ".join(f"{p.baseline} → {p.improved}" for p in pairs)
        sec.note(
            f"Effect Ratio / ΔRI: no baseline → model pair of the papers has both systems measured here ({wanted})."
        )
        return
    sec.howto(
        "Effect Ratio (ER) and Delta Relative Improvement (ΔRI), Breuer et al. (SIGIR 2020), by the repro-eval "
        "package: ER = the run's improvement of the model over its paper's baseline / the paper's (1: reproduced, "
        "below 1: smaller, negative: reversed); ΔRI = the paper's relative improvement − the run's (0: reproduced). "
        "'CIs cover' says whether the run's 95% CI of the baseline / of the model covers the paper's figure."
    )
    sec.table(
        ["Baseline → model", "Paper", "Measure", "Published Δ", "Measured Δ", "ER", "ΔRI", "CIs cover"],
        found,
        caption="Reproduction of each paper's improvement over its baseline",
    )
