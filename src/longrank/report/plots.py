"""Report figures (matplotlib, Agg backend). Each function writes one PNG atomically and returns its path."""

from __future__ import annotations

import math
import os
from pathlib import Path
from dataclasses import dataclass
from collections.abc import Callable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from longrank.io.atomic import atomic_path
from longrank.report.panels import panel_check  # noqa: E402,F401 (the figures' caption notes)

plt.rcParams.update(
    {
        "figure.dpi": 110,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "font.size": 9,
    }
)


def save_figure(fig, path: str | os.PathLike) -> Path:
    path = Path(path)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return path


@dataclass
class Plot:
    """A written figure and what its caption must add: which panels are empty or repeat another, and why."""

    path: Path
    note: str = ""


def _colors(names: Sequence[str]) -> dict[str, tuple]:
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {n: cmap(i % cmap.N) for i, n in enumerate(names)}


def ci_plot(
    table: pd.DataFrame,
    measure: str,
    systems: Sequence[str],
    path,
    letters: Mapping[str, str],
    references: Mapping[str, str] | None = None,
) -> Path:
    """Mean of ``measure`` per system with its bootstrap 95% CI (horizontal error bars); ``references`` (system ->
    label, the first stages) are drawn in grey with their mean as a dashed line."""
    rows = table[table["measure"] == measure].set_index("system").loc[list(systems)]
    references = {s: label for s, label in (references or {}).items() if s in rows.index}
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(rows) + 1.4))
    y = np.arange(len(rows))[::-1]
    err = np.vstack([rows["mean"] - rows["ci_low"], rows["ci_high"] - rows["mean"]])
    greys = {s: f"{min(0.4 + 0.15 * i, 0.85):.2f}".rstrip("0") for i, s in enumerate(references)}  # 0.4, 0.55, ...
    for i, s in enumerate(rows.index):
        color = greys.get(s, "C0")
        ax.errorbar(
            rows["mean"].iloc[i], y[i], xerr=err[:, i : i + 1], fmt="o", color=color, ecolor=color, capsize=3, lw=1.5
        )
    for s, label in references.items():
        ax.axvline(rows.loc[s, "mean"], color=greys[s], ls="--", lw=1, label=f"{label} mean")
    if references:
        ax.legend(loc="best", frameon=True, framealpha=0.9)
    ax.set_yticks(y, [f"({letters.get(s, '')}) {s}" for s in rows.index])
    ax.set_xlabel(f"mean {measure} (bootstrap 95% CI over queries)")
    ax.set_title(f"{measure} per system")
    return save_figure(fig, path)


def seeds_plot(seed_means: pd.DataFrame, measure: str, path) -> Path:
    """Each seeded system's per-seed ``measure`` (``seeds_section``'s rows of one measure) as dots on one line, and
    their mean as a bar across it."""
    systems = list(dict.fromkeys(seed_means["system"]))
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(systems) + 1.4))
    for i, system in enumerate(systems):
        values = seed_means[seed_means.system == system]["mean"].to_numpy()
        y = len(systems) - 1 - i
        ax.scatter(values, np.full(len(values), y), color="C0", s=22, zorder=3)
        ax.plot([values.mean()] * 2, [y - 0.3, y + 0.3], color="C3", lw=2)
    ax.set_yticks(range(len(systems))[::-1], systems)
    ax.set_xlabel(f"mean {measure} over the queries, one dot per training seed")
    ax.set_title(f"{measure} per training seed")
    return save_figure(fig, path)


def length_bucket_plot(by_bucket: pd.DataFrame, systems: Sequence[str], path, measure: str = "nDCG@10") -> Path:
    """Grouped bars: mean ``measure`` per query bucket (median relevant-document length) per system."""
    buckets = [str(b) for b in by_bucket.index]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(buckets) + 2), 3.8))
    width = 0.8 / max(1, len(systems))
    colors = _colors(systems)
    x = np.arange(len(buckets))
    for i, s in enumerate(systems):
        ax.bar(
            x + (i - (len(systems) - 1) / 2) * width,
            by_bucket[s].to_numpy(dtype=float),
            width,
            label=s,
            color=colors[s],
        )
    ax.set_xticks(x, [f"{b}\n({n} q)" for b, n in zip(buckets, by_bucket["queries"])])
    ax.set_xlabel("median length (words) of the query's relevant documents")
    ax.set_ylabel(f"mean {measure}")
    ax.set_title(f"{measure} by document-length bucket")
    ax.legend(fontsize=7, ncol=min(4, len(systems)), frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    return save_figure(fig, path)


def length_bias_plot(
    dist: pd.DataFrame,
    models: Sequence[str],
    path,
    depth: int = 30,
    baseline: str | None = None,
    why: Callable[[str, str], str] | None = None,
) -> Plot:
    """TKL Fig. 1: share of relevant vs retrieved-in-top-``depth`` documents per length bucket, one panel per model.
    The note names the panels that are empty or plot the same curve as another panel or as ``baseline`` (``why``
    says why: ``panel_check``)."""
    n = len(models)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False, sharey=True)
    x = np.arange(len(dist))
    labels = [f"{int(lo)}–{int(hi)}" for lo, hi in zip(dist["lo"], dist["hi"])]
    for ax, model in zip(axes.flat, models):
        ax.plot(x, dist["relevant"], "-o", color="k", ms=3, label="P(rel | length)")
        ax.plot(x, dist[model], "-s", color="C3", ms=3, label=f"P(ret@{depth} | length), {model}")
        if baseline and baseline in dist.columns and baseline != model:
            ax.plot(x, dist[baseline], "--", color="0.5", lw=1, label=f"P(ret@{depth} | length), {baseline}")
        ax.set_title(model)
        ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
        ax.set_xlabel("document length (words), collection deciles")
        ax.legend(fontsize=6.5, frameon=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("share of documents in bucket")
    fig.suptitle("Relevance vs retrieval by document length (TKL Fig. 1 style)")
    reference = dist[baseline] if baseline and baseline in dist.columns else None
    note = panel_check({m: dist[m] for m in models}, reference, why)
    return Plot(save_figure(fig, path), note)


def maxlen_plot(
    points: pd.DataFrame,
    path,
    measure: str = "nDCG@10",
    baseline: float | None = None,
    baseline_label: str = "first stage",
) -> Path:
    """TKL Fig. 2 style: ``measure`` vs the maximum document length a model reads; one line per model type.

    ``points`` columns: type, system, max_doc_len, mean, ci_low, ci_high.
    """
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    for i, (mtype, grp) in enumerate(points.sort_values("max_doc_len").groupby("type", sort=True)):
        err = np.vstack([grp["mean"] - grp["ci_low"], grp["ci_high"] - grp["mean"]])
        ax.errorbar(grp["max_doc_len"], grp["mean"], yerr=err, fmt="-o", capsize=3, color=f"C{i}", label=mtype)
        for _, r in grp.iterrows():
            ax.annotate(
                r["system"], (r["max_doc_len"], r["mean"]), textcoords="offset points", xytext=(4, 4), fontsize=7
            )
    if baseline is not None:
        ax.axhline(baseline, color="0.4", ls="--", lw=1, label=baseline_label)
    ax.set_xscale("log", base=2)
    ticks = sorted(points["max_doc_len"].unique())
    ax.set_xticks(ticks, [str(int(t)) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("maximum document length read by the model (tokens, log scale)")
    ax.set_ylabel(f"mean {measure} (95% CI)")
    ax.set_title(f"{measure} vs maximum document length")
    ax.legend(frameon=False)
    return save_figure(fig, path)


def efficiency_plot(points: pd.DataFrame, path, measure: str = "nDCG@10") -> Path:
    """MIR Fig. 5 style: effectiveness vs throughput (drawn in docs/s, log x). ``points``: system, docs_per_ms, mean,
    and optionally low and high (docs/ms of the slowest and fastest timed pass: a horizontal bar)."""
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    colors = _colors(list(points["system"]))
    for _, r in points.iterrows():  # documents per second: the neural rerankers' rates read as whole numbers
        if "low" in r and "high" in r and r["high"] > r["low"]:
            x = 1000 * r["docs_per_ms"]
            xerr = [[x - 1000 * r["low"]], [1000 * r["high"] - x]]
            ax.errorbar(x, r["mean"], xerr=xerr, fmt="none", ecolor=colors[r["system"]], capsize=3, lw=1, zorder=2)
        ax.scatter(1000 * r["docs_per_ms"], r["mean"], s=40, color=colors[r["system"]], zorder=3)
        ax.annotate(
            r["system"], (1000 * r["docs_per_ms"], r["mean"]), textcoords="offset points", xytext=(5, 3), fontsize=8
        )
    if (points["docs_per_ms"] > 0).all():
        ax.set_xscale("log")  # ticks at 1-2-5 steps in plain numbers: matplotlib's minor 10^x labels overlap
        ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel("throughput (documents / s, log scale)")
    ax.set_ylabel(f"mean {measure}")
    ax.set_title("Effectiveness vs efficiency")
    return save_figure(fig, path)


def training_plot(
    curves: Mapping[str, pd.DataFrame],
    path,
    references: Mapping[str, float],
    measure: str = "nDCG@10",
    dev: str = "dev",
) -> Path:
    """Dev ``measure`` against training step, one line per trained model (fold 0), with the dev scores of
    untrained references (the first stage, a zero-shot floor) as dashed lines: where a curve peaks is the kept model."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    colors = _colors(list(curves))
    for name, log in curves.items():
        ax.plot(log["step"], log["dev_ndcg10"], "-o", ms=3, color=colors[name], label=name)
        best = log.loc[log["dev_ndcg10"].idxmax()]
        ax.plot([best["step"]], [best["dev_ndcg10"]], "*", ms=10, color=colors[name])
    for i, (name, value) in enumerate(references.items()):  # greys from dark to light, however many references
        grey = 0.15 + 0.6 * i / max(1, len(references) - 1)
        ax.axhline(value, color=f"{grey:.2f}", ls="--", lw=1, label=f"{name} (untrained)")
    ax.set_xlabel("training step")
    ax.set_ylabel(f"{dev} {measure}")
    ax.set_title(f"{dev[0].upper() + dev[1:]} {measure} during training (star: the kept weights)")
    ax.legend(frameon=False, fontsize=7, ncol=2)
    return save_figure(fig, path)


def attention_scaling_plot(
    measured: Sequence[Mapping], skipped: Sequence[Mapping], path, labels: Mapping[str, str]
) -> Plot:
    """NDRM Fig. 2 brought up to date: peak training memory (left) and forward+backward time (right) against
    sequence length, one curve per attention (rows of bench/attention_scaling.json). Log-log axes, so growth
    as n^k is a straight line of slope k; dotted guides of slope 1 and 2 start at the smallest length's lowest
    point. Configurations skipped (by the memory estimate, or out of memory) are named in the legend."""
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.8))
    names = [a for a in labels if any(r["attention"] == a for r in measured)]
    colors = _colors(list(labels))
    for ax, key, ylabel in (
        (axes[0], "peak_mb", "peak training memory (MB, log)"),
        (axes[1], "seconds", "forward+backward time (s, log)"),
    ):
        for a in names:
            pts = sorted((r["length"], r[key]) for r in measured if r["attention"] == a and r[key] and r[key] > 0)
            gone = sorted(r["length"] for r in skipped if r["attention"] == a)
            label = labels[a] + (f" (skipped at {', '.join(f'{n:,}' for n in gone)})" if gone else "")
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], "-o", ms=4, color=colors[a], label=label)
        lengths = sorted({r["length"] for r in measured})
        lows = [r[key] for r in measured if r["length"] == lengths[0] and r[key] and r[key] > 0]
        if len(lengths) > 1 and lows:
            x = np.array([lengths[0], lengths[-1]], dtype=float)
            for k, style in ((1, ":"), (2, "-.")):
                ax.plot(x, min(lows) * (x / x[0]) ** k, style, color="0.6", lw=1, label=f"∝ n{'²' if k == 2 else ''}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(lengths, [f"{n:,}" for n in lengths])
        ax.minorticks_off()
        ax.set_xlabel("sequence length n (positions, log)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7, frameon=False)
    axes[0].set_title("Memory by length")
    axes[1].set_title("Time by length")
    drawn = {
        title: [float(r[key]) if r[key] and r[key] > 0 else np.nan for r in measured]
        for title, key in (("peak memory", "peak_mb"), ("time", "seconds"))
    }

    def why(kind: str, title: str) -> str:
        return (
            "no measured configuration has a positive value (each was skipped, or measured 0)"
            if kind == "empty"
            else ""
        )

    return Plot(save_figure(fig, path), panel_check(drawn, None, why))
