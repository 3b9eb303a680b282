"""compare: tests agree with scipy/statsmodels, letters, bootstrap CIs, non-inferiority, query-set checks."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from longrank.evaluate import significance as sig
from longrank.evaluate.metrics import write_eval_tsv
from longrank.errors import InputError


def frame(values, qids=None, measure="nDCG@10"):
    qids = qids or [f"q{i:04d}" for i in range(len(values))]  # sorted order = array order
    return pd.DataFrame({measure: values}, index=pd.Index(qids, name="query_id"))


def test_pvalues_equal_scipy():
    rng = np.random.default_rng(1)
    x = rng.uniform(size=40)
    y = np.clip(x + rng.normal(0.05, 0.1, size=40), 0, 1)
    assert sig.wilcoxon_p(x, y) == pytest.approx(stats.wilcoxon(x, y).pvalue, rel=1e-12)
    assert sig.ttest_p(x, y) == pytest.approx(stats.ttest_rel(x, y).pvalue, rel=1e-12)
    assert sig.wilcoxon_p(x, x) == 1.0 and sig.ttest_p(x, x) == 1.0  # all-zero differences
    assert sig.ttest_p(x + 0.1, x) == 0.0


def test_holm_equals_statsmodels():
    p = [0.01, 0.04, 0.03, 0.5, 0.001]
    np.testing.assert_allclose(sig.holm(p), multipletests(p, method="holm")[1])
    assert sig.holm(p)[0] == pytest.approx(0.04)  # 0.01 is 2nd smallest of 5: ×4


def test_cohens_d():
    d = np.array([0.1, 0.2, 0.3, 0.0])
    assert sig.cohens_d_paired(d, np.zeros(4)) == pytest.approx(d.mean() / d.std(ddof=1))
    assert sig.cohens_d_paired(d, d) == 0.0


def test_letters_one_clearly_better_system():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.1, 0.5, size=50)
    frames = {
        "bm25": frame(base),
        "noise": frame(np.clip(base + rng.normal(0, 0.01, 50), 0, 1)),
        "good": frame(base + 0.3 + rng.uniform(0, 0.05, 50)),
    }
    out = sig.compare(frames, n_resamples=500, seed=0)
    table = out.table.set_index("system")
    assert list(table["letter"]) == ["a", "b", "c"]
    assert table.loc["good", "better_than"] == "ab"
    assert table.loc["bm25", "better_than"] == "" and table.loc["noise", "better_than"] == ""
    pairs = out.pairs
    assert len(pairs) == 3
    row = pairs[(pairs.system_a == "bm25") & (pairs.system_b == "good")].iloc[0]
    assert row.mean_diff < 0 and row.diff_ci_high < 0 and row.wilcoxon_p_holm < 0.05
    np.testing.assert_allclose(pairs.wilcoxon_p_holm, multipletests(pairs.wilcoxon_p, method="holm")[1])
    np.testing.assert_allclose(pairs.ttest_p_holm, multipletests(pairs.ttest_p, method="holm")[1])


def ci(values, n_resamples: int, seed: int) -> tuple[float, float]:
    """The 95% percentile-bootstrap interval of the mean, from the resampled means the report's intervals use."""
    low, high = np.percentile(sig.bootstrap_means(values, n_resamples, seed), [2.5, 97.5])
    return float(low), float(high)


def test_bootstrap_interval_contains_mean_and_is_deterministic():
    rng = np.random.default_rng(3)
    v = rng.uniform(size=60)
    lo, hi = ci(v, 2000, seed=7)
    assert lo < v.mean() < hi
    assert (lo, hi) == ci(v, 2000, seed=7)
    assert (lo, hi) != ci(v, 2000, seed=8)
    assert hi - lo < 0.2


def test_noninferiority():
    rng = np.random.default_rng(5)
    ref = rng.uniform(0.3, 0.7, size=300)
    same = ref + rng.normal(0, 0.01, size=300)
    worse = ref * 0.7
    _, _, p_same = sig.noninferiority_p(same, ref, 0.05)
    _, _, p_worse = sig.noninferiority_p(worse, ref, 0.05)
    assert p_same < 0.05 and p_worse > 0.5
    out = sig.compare(
        {"bert": frame(ref), "mores": frame(same), "bad": frame(worse)},
        reference="bert",
        margins=[0.02, 0.05],
        n_resamples=200,
    ).noninferiority
    verdict = out.set_index(["system", "margin"])["verdict"]
    assert verdict[("mores", 0.05)] == "non-inferior"
    assert verdict[("bad", 0.05)] == "not shown non-inferior"
    assert set(out["system"]) == {"mores", "bad"}


def test_mismatched_queries_raise():
    with pytest.raises(InputError, match=r"'knrm'.*q9"):
        sig.compare({"bm25": frame([0.1, 0.2, 0.3], ["q1", "q2", "q9"]), "knrm": frame([0.1, 0.2], ["q1", "q2"])})


@pytest.mark.stage
def test_compare_cli(tmp_path):
    rng = np.random.default_rng(2)
    base = rng.uniform(size=30)
    for name, vals in {"bm25": base, "knrm": np.clip(base + 0.2, 0, 1.2), "knrm+bm25": base}.items():
        write_eval_tsv(
            tmp_path / "eval" / f"{name}.tsv",
            pd.DataFrame(
                {"nDCG@10": vals, "RR@10": vals}, index=pd.Index([str(i) for i in range(30)], name="query_id")
            ),
        )
    out = tmp_path / "compare"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "longrank",
            "compare",
            "--eval-dir",
            str(tmp_path / "eval"),
            "--systems",
            "bm25",
            "knrm",
            "knrm+bm25",
            "--reference",
            "bm25",
            "--bootstrap",
            "300",
            "--out-dir",
            str(out),
        ],
        check=True,
    )
    for name in ["table.csv", "pairs.csv", "noninferiority.csv", "table.md", "table.tex", "settings.json"]:
        assert (out / name).exists(), name
    table = pd.read_csv(out / "table.csv", keep_default_na=False)
    assert table.set_index(["system", "measure"]).loc[("knrm", "nDCG@10"), "better_than"] == "ac"
    assert "$^{ac}$" in (out / "table.tex").read_text() and r"\toprule" in (out / "table.tex").read_text()
    assert "<sup>ac</sup>" in (out / "table.md").read_text()
    assert json.loads((out / "settings.json").read_text())["n_queries"] == 30
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "longrank",
            "compare",
            "--eval-dir",
            str(tmp_path / "eval"),
            "--systems",
            "bm25",
            "nope",
            "--out-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "nope" in bad.stderr


def test_pair_ci_is_paired_bootstrap_of_differences():
    rng = np.random.default_rng(4)
    a, b = rng.uniform(size=40), rng.uniform(size=40)
    out = sig.compare({"a": frame(a), "b": frame(b)}, n_resamples=1000, seed=3)
    row = out.pairs.iloc[0]
    means = sig.bootstrap_means(a - b, 1000, 3)
    assert (row.diff_ci_low, row.diff_ci_high) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])))
    sys_row = out.table.set_index("system").loc["a"]
    assert (sys_row.ci_low, sys_row.ci_high) == pytest.approx(ci(a, 1000, 3))


# scipy's exact permutation path with ties costs ~0.1-0.3 s a call: the larger ones in the full run, not the quick tier
@pytest.mark.parametrize(
    "n_queries",
    [1, 2, 6, pytest.param(10, marks=pytest.mark.stage), pytest.param(13, marks=pytest.mark.stage), 14, 43],
)
def test_the_wilcoxon_p_keyed_by_signed_ranks_is_scipys_p_of_the_pair_to_the_bit(n_queries):
    # Graded gains on few queries: ties and zeros everywhere, so up to 13 queries scipy takes its exact
    # permutation path (which ours computes for all sign flips at once) and from 14 the tie-corrected normal one;
    # the cached p must be scipy's on the raw pair.
    rng = np.random.default_rng(n_queries)
    grades = np.array([0.0, 0.0, 1 / 3, 0.5, 1.0])
    for _ in range(15 if n_queries < 13 else 6):  # scipy's reference: ~2.6 s a call at 13 queries
        x, y = rng.choice(grades, n_queries), rng.choice(grades, n_queries)
        if np.all(x == y):
            continue
        expected = stats.wilcoxon(x, y, zero_method="wilcox", alternative="two-sided").pvalue
        assert sig.wilcoxon_p(x, y) == float(expected)


@pytest.mark.parametrize("n_queries", [5, 13])
def test_without_ties_or_zeros_the_p_is_scipys_exact_distributions(n_queries):
    rng = np.random.default_rng(n_queries)
    for _ in range(10):
        x, y = rng.random(n_queries), rng.random(n_queries)
        assert sig.wilcoxon_p(x, y) == float(stats.wilcoxon(x, y, zero_method="wilcox").pvalue)
