"""Paired significance tests, multiple-testing correction, effect sizes, bootstrap CIs, non-inferiority.

Everything here works on per-query values of systems evaluated on the same queries (aligned arrays).

- Pairwise tests: two-sided Wilcoxon signed-rank (the test of the TK/TKL papers) and paired t-test;
  Holm correction across all pairs of one table (one measure, one test).
- Letters: system *i* is "significantly better than" system *j* (superscript letter of *j* on *i*'s
  value) when the Holm-corrected Wilcoxon p < alpha and mean(i) > mean(j).
- Non-inferiority (MORES, Gao et al. EMNLP 2020, §4.1, after Jayasinghe et al. 2015): reject
  H0': mean(ref) - mean(sys) >= δ, with δ = margin × mean(ref), by a one-sided paired t-test on
  d_q = sys_q - ref_q + δ (H1: E[d] > 0). Rejecting H0' means any loss against the reference is
  smaller than the margin.
"""

from __future__ import annotations

import functools
import itertools
import string
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

from longrank.evaluate.comparison_tables import ComparisonTables
from longrank.errors import InputError
from longrank.config.schema import schema_default

LETTERS = string.ascii_lowercase + string.ascii_uppercase


def letters_for(systems: Sequence[str]) -> dict[str, str]:
    if len(systems) > len(LETTERS):
        raise InputError(f"at most {len(LETTERS)} systems can be compared in one table, got {len(systems)}")
    return {s: LETTERS[i] for i, s in enumerate(systems)}


TOL = 1e-12  # differences below this are rounding noise (eval TSVs carry 6 decimals)


def _constant(d: np.ndarray) -> bool:
    return bool(np.all(np.abs(d - d[0]) <= TOL))


def _all_zero(d: np.ndarray) -> bool:
    return bool(np.all(np.abs(d) <= TOL))


def _diffs(x, y) -> np.ndarray:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.shape} vs {y.shape}")
    return x - y


def wilcoxon_p(x, y) -> float:
    """Two-sided Wilcoxon signed-rank p; 1.0 when every paired difference is zero (nothing to test).

    The test reads only the signed ranks of the differences (zeros kept as zeros), in no order, so the p of
    the sorted signed ranks is the p of the differences, bit for bit (half-integer ranks sum exactly). Keying
    the test by them lets the many pairs of a table that share a pattern share one call.
    """
    d = _diffs(x, y)
    if d.size == 0 or _all_zero(d):
        return 1.0
    signed_ranks = np.zeros_like(d)
    nonzero = d != 0
    signed_ranks[nonzero] = stats.rankdata(np.abs(d[nonzero])) * np.sign(d[nonzero])
    return _wilcoxon_p_of_signed_ranks(tuple(np.sort(signed_ranks).tolist()))


# scipy's wilcoxon: with ties or zeros among at most 13 pairs, its p is an exact permutation test (2^13 sign flips
# fit in its 9,999 resamples); from 14 pairs on, the normal approximation
EXACT_PERMUTATION_BELOW = 14


@functools.lru_cache(maxsize=65536)
def _wilcoxon_p_of_signed_ranks(signed_ranks: tuple[float, ...]) -> float:
    """scipy's two-sided Wilcoxon p (``zero_method="wilcox"``), its exact permutation test computed for every sign
    flip at once: scipy calls its statistic once per flip (~0.1 s a test on the 2-core machine; a graded
    collection's 19 systems on 12 test queries spent 116 s in compare). Equal to scipy's p, bit for bit: the same
    permutation test over the same null values (sums of half-integer ranks, exact in float64), checked against
    ``stats.wilcoxon`` in tests/test_significance.py."""
    d = np.asarray(signed_ranks, dtype=float)
    nonzero = d[d != 0]
    ties_or_zeros = nonzero.size < d.size or np.unique(np.abs(nonzero)).size < nonzero.size
    if not (ties_or_zeros and d.size < EXACT_PERMUTATION_BELOW):  # scipy's exact distribution or approximation
        return float(stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)
    ranks = np.zeros_like(d)
    ranks[d != 0] = stats.rankdata(np.abs(nonzero))

    def rank_sum_of_positives(flipped: np.ndarray, axis: int) -> np.ndarray:  # wilcoxon's statistic, r_plus
        return np.sum((flipped > 0) * ranks, axis=axis)

    return float(
        stats.permutation_test(
            (d,),
            rank_sum_of_positives,
            permutation_type="samples",  # one sample: its signs are flipped
            vectorized=True,
            n_resamples=9999,  # scipy's PermutationMethod default, as wilcoxon passes it
            alternative="two-sided",
            axis=-1,
        ).pvalue
    )


def smallest_wilcoxon_p(n_pairs: int) -> float:
    """The smallest two-sided p of the exact Wilcoxon signed-rank test on ``n_pairs`` non-zero differences: all
    of one sign, probability 2 / 2^n. Fewer queries than about log2(2 / alpha) can never reach alpha."""
    return min(1.0, 2.0 / 2.0**n_pairs) if n_pairs > 0 else 1.0


def smallest_holm_wilcoxon_p(n_pairs: int, n_comparisons: int) -> float:
    """The smallest Holm-corrected Wilcoxon p over ``n_comparisons`` pairs: Holm multiplies the smallest p by their number."""
    return min(1.0, max(1, n_comparisons) * smallest_wilcoxon_p(n_pairs))


def ttest_p(x, y) -> float:
    """Two-sided paired t-test p; 1.0 for all-zero differences, 0.0 for constant non-zero ones."""
    d = _diffs(x, y)
    if d.size < 2 or _all_zero(d):
        return 1.0
    if _constant(d):  # zero variance, non-zero mean: t is infinite
        return 0.0
    return float(stats.ttest_rel(x, y).pvalue)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    p = np.asarray(pvalues, dtype=float)
    if p.size == 0:
        return p
    return multipletests(p, method="holm")[1]


def cohens_d_paired(x, y) -> float:
    """Mean paired difference over its standard deviation (d_z). 0 when no difference; ±inf when constant."""
    d = _diffs(x, y)
    if d.size == 0 or _all_zero(d):
        return 0.0
    sd = d.std(ddof=1) if d.size > 1 else 0.0
    if _constant(d) or sd == 0:
        return float(np.sign(d.mean()) * np.inf)
    return float(d.mean() / sd)


def bootstrap_means(values, n_resamples: int, seed: int, chunk: int = 1000) -> np.ndarray:
    """Means of ``n_resamples`` percentile-bootstrap resamples over queries (deterministic for a seed)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return np.full(n_resamples, np.nan)
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        idx = rng.integers(0, v.size, size=(size, v.size))
        out[start : start + size] = v[idx].mean(axis=1)
    return out


def noninferiority_p(system, reference, margin: float) -> tuple[float, float, float]:
    """One-sided paired t-test of H0': mean(sys) - mean(ref) <= -margin·mean(ref).

    Returns (delta, t statistic, p). A small p rejects H0': ``system`` is non-inferior to the reference.
    """
    s, r = np.asarray(system, dtype=float), np.asarray(reference, dtype=float)
    delta = margin * float(r.mean())
    d = _diffs(s, r) + delta
    if d.size < 2:
        return delta, float("nan"), float("nan")
    if _constant(d):
        return delta, float(np.sign(d[0]) * np.inf), (0.0 if d[0] > 0 else 1.0)
    res = stats.ttest_1samp(d, 0.0, alternative="greater")
    return delta, float(res.statistic), float(res.pvalue)


def align(frames: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Check every system covers exactly the same queries; return frames sorted by the same query order."""
    if not frames:
        raise InputError("no systems to compare")
    names = list(frames)
    union = set().union(*(set(f.index) for f in frames.values()))
    for name in names:
        missing = sorted(union - set(frames[name].index))
        if missing:
            shown = " ".join(missing[:20]) + (" ..." if len(missing) > 20 else "")
            raise InputError(
                f"system {name!r} is not evaluated on the same queries as the others: "
                f"{len(missing)} missing queries: {shown}"
            )
    order = sorted(union)
    return {name: frames[name].loc[order] for name in names}


PAIR_COLUMNS = [
    "measure",
    "system_a",
    "system_b",
    "mean_diff",
    "diff_ci_low",
    "diff_ci_high",
    "cohens_d",
    "wilcoxon_p",
    "wilcoxon_p_holm",
    "ttest_p",
    "ttest_p_holm",
    "mean_a",
    "mean_b",
]
TABLE_COLUMNS = ["system", "letter", "measure", "mean", "ci_low", "ci_high", "better_than", "n_queries"]
NONINFERIORITY_COLUMNS = [
    "measure",
    "system",
    "reference",
    "margin",
    "mean",
    "reference_mean",
    "delta",
    "t",
    "p",
    "verdict",
]


def compare(
    frames: Mapping[str, pd.DataFrame],
    measures: Sequence[str] | None = None,
    reference: str | None = None,
    margins: Sequence[float] = (0.02, 0.05),
    alpha: float = schema_default("evaluation.alpha"),
    n_resamples: int = 10000,
    seed: int = 0,
) -> ComparisonTables:
    """The tables ``table`` (per system and measure), ``pairs`` (per pair and measure) and, with a ``reference``,
    ``noninferiority``."""
    frames = align(frames)
    systems = list(frames)
    letters = letters_for(systems)
    if measures is None:
        measures = [c for c in frames[systems[0]].columns]
    for name, frame in frames.items():
        absent = [m for m in measures if m not in frame.columns]
        if absent:
            raise InputError(f"system {name!r} has no column for measures {absent}")
    if reference is not None and reference not in frames:
        raise InputError(f"reference system {reference!r} is not among the compared systems {systems}")

    table_rows, pair_rows, ni_rows = [], [], []
    for measure in measures:
        values = {s: frames[s][measure].to_numpy(dtype=float) for s in systems}
        # One seed for every system: the same resampled query sets, so boot[a] - boot[b] is exactly the
        # paired bootstrap of the per-query differences (and costs one pass per system, not per pair).
        boot = {s: bootstrap_means(values[s], n_resamples, seed) for s in systems}
        rows = _pair_rows(measure, values, boot)
        table_rows.extend(_system_rows(measure, values, boot, letters, _better_than(rows, systems, letters, alpha)))
        pair_rows.extend(rows)
        if reference is not None:
            ni_rows.extend(_noninferiority_rows(measure, values, reference, margins, alpha))
    return ComparisonTables(
        table=pd.DataFrame(table_rows, columns=TABLE_COLUMNS),
        pairs=pd.DataFrame(pair_rows, columns=PAIR_COLUMNS),
        noninferiority=pd.DataFrame(ni_rows, columns=NONINFERIORITY_COLUMNS) if reference is not None else None,
    )


def _pair_rows(
    measure: str,
    values: dict[str, np.ndarray],
    boot: dict[str, np.ndarray],
    pairs: Sequence[tuple[str, str]] | None = None,
) -> list[dict]:
    """One row per pair of systems (every pair, or the given ``pairs``): means, the paired bootstrap CI of the
    difference, effect size and p-values (Holm-corrected over these pairs of the measure)."""
    rows = [
        _pair_row(measure, a, b, values, boot)
        for a, b in (itertools.combinations(values, 2) if pairs is None else pairs)
    ]
    wp = holm([r["wilcoxon_p"] for r in rows])
    tp = holm([r["ttest_p"] for r in rows])
    for r, w, t in zip(rows, wp, tp):
        r["wilcoxon_p_holm"] = float(w)
        r["ttest_p_holm"] = float(t)
    return rows


def _pair_row(measure: str, a: str, b: str, values: dict[str, np.ndarray], boot: dict[str, np.ndarray]) -> dict:
    d = values[a] - values[b]
    lo, hi = np.percentile(boot[a] - boot[b], [2.5, 97.5]) if d.size else (np.nan, np.nan)
    return {
        "measure": measure,
        "system_a": a,
        "system_b": b,
        "mean_a": float(values[a].mean()),
        "mean_b": float(values[b].mean()),
        "mean_diff": float(d.mean()) if d.size else np.nan,
        "diff_ci_low": float(lo),
        "diff_ci_high": float(hi),
        "cohens_d": cohens_d_paired(values[a], values[b]),
        "wilcoxon_p": wilcoxon_p(values[a], values[b]),
        "ttest_p": ttest_p(values[a], values[b]),
    }


def compare_pairs(
    frames: Mapping[str, pd.DataFrame],
    pairs: Sequence[tuple[str, str]],
    measures: Sequence[str] | None = None,
    n_resamples: int = 10000,
    seed: int = 0,
) -> pd.DataFrame:
    """``pairs.csv``'s rows for the given pairs only, Holm-corrected over them (per measure): a family of its own,
    e.g. each trained model against its own floor, kept apart from the table's all-pairs family so that adding such
    references changes no p-value of the main comparison."""
    frames = align(frames)
    absent = sorted({s for pair in pairs for s in pair} - set(frames))
    if absent:
        raise InputError(f"pairs name systems that are not compared: {absent}")
    systems = list(frames)
    measures = list(measures or frames[systems[0]].columns)
    rows = []
    for measure in measures:
        values = {s: frames[s][measure].to_numpy(dtype=float) for s in systems}
        boot = {s: bootstrap_means(values[s], n_resamples, seed) for s in systems}
        rows.extend(_pair_rows(measure, values, boot, pairs))
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def _better_than(rows: list[dict], systems: list[str], letters: dict[str, str], alpha: float) -> dict[str, list[str]]:
    """System -> the letters of the systems it beats (Holm-corrected Wilcoxon p below ``alpha``)."""
    better: dict[str, list[str]] = {s: [] for s in systems}
    for r in rows:
        if r["wilcoxon_p_holm"] < alpha and r["mean_diff"] != 0:
            winner, loser = (r["system_a"], r["system_b"]) if r["mean_diff"] > 0 else (r["system_b"], r["system_a"])
            better[winner].append(letters[loser])
    return better


def _system_rows(
    measure: str,
    values: dict[str, np.ndarray],
    boot: dict[str, np.ndarray],
    letters: dict[str, str],
    better: dict[str, list[str]],
) -> list[dict]:
    rows = []
    for s in values:
        lo, hi = (float(x) for x in np.percentile(boot[s], [2.5, 97.5]))
        rows.append(
            {
                "system": s,
                "letter": letters[s],
                "measure": measure,
                "mean": float(values[s].mean()),
                "ci_low": lo,
                "ci_high": hi,
                "better_than": "".join(sorted(better[s], key=LETTERS.index)),
                "n_queries": int(values[s].size),
            }
        )
    return rows


def _noninferiority_rows(
    measure: str, values: dict[str, np.ndarray], reference: str, margins: Sequence[float], alpha: float
) -> list[dict]:
    rows = []
    for s in values:
        if s == reference:
            continue
        for margin in margins:
            delta, t, p = noninferiority_p(values[s], values[reference], margin)
            rows.append(
                {
                    "measure": measure,
                    "system": s,
                    "reference": reference,
                    "margin": margin,
                    "mean": float(values[s].mean()),
                    "reference_mean": float(values[reference].mean()),
                    "delta": delta,
                    "t": t,
                    "p": p,
                    "verdict": "non-inferior" if p < alpha else "not shown non-inferior",
                }
            )
    return rows
