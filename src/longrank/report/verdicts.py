"""Plain-words verdicts of one system against a reference, read from compare's ``pairs.csv``.

Shared by the report's effectiveness section (against the first stage, the zero-shot floor), its comparison of
first stages and its sanity checks (against the untrained lexical reranker), so every verdict uses the same
test and wording.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from longrank.tables import Cell, fmt_p


def pair_row(pairs: pd.DataFrame, measure: str, a: str, b: str):
    """(mean a - b, Holm Wilcoxon p, raw Wilcoxon p) whichever order the pair was stored in."""
    sel = pairs[(pairs.measure == measure) & (pairs.system_a == a) & (pairs.system_b == b)]
    if len(sel):
        r = sel.iloc[0]
        return float(r.mean_diff), float(r.wilcoxon_p_holm), float(r.wilcoxon_p)
    sel = pairs[(pairs.measure == measure) & (pairs.system_a == b) & (pairs.system_b == a)]
    if len(sel):
        r = sel.iloc[0]
        return -float(r.mean_diff), float(r.wilcoxon_p_holm), float(r.wilcoxon_p)
    return None


def verdict(diff: float, p_holm: float, label: str, alpha: float) -> str:
    if p_holm < alpha:
        return f"better than {label}" if diff > 0 else f"significantly WORSE than {label}"
    return f"NOT significantly better than {label}" if diff > 0 else f"not better than {label} (lower on average)"


def verdict_rows(
    pairs: pd.DataFrame,
    measure: str,
    pairings: list[tuple[str, str]],
    label: str,
    alpha: float,
    fixed: Mapping[str, str] | None = None,
) -> list[list]:
    """One row per (system, reference): better / worse / not significantly different, by Holm-corrected Wilcoxon.

    ``fixed[system]`` replaces the statistical verdict where the answer is known without a test (an
    interpolation that chose weight 0 in every fold *is* the first stage's run)."""
    rows = []
    for system, reference in pairings:
        pr = pair_row(pairs, measure, system, reference)
        if pr is None:
            continue
        diff, p_holm, _ = pr
        text = (fixed or {}).get(system) or verdict(diff, p_holm, label, alpha)
        rows.append([system, Cell(text), Cell(f"{diff:+.4f}"), Cell(fmt_p(p_holm))])
    return rows
