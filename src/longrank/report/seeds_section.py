"""Section: training seeds (an entry's ``train.seeds``). Each seeded model's mean and spread over its seeds, and beside
each significant-or-not difference of the comparison the range that difference takes over the seeds' pairs.

The comparison's paired tests see one training run as the model; a second seed can move a model by as much as the
differences they call significant. The main table already compares each query's mean over the seeds (rule evaluate);
this section shows how far the seeds themselves go, so that a reader sees which differences a reseeding would reverse.
"""

from __future__ import annotations

from itertools import product

import pandas as pd

from longrank.evaluate.metrics import read_eval_tsv
from longrank.evaluate.comparison_tables import write_csv
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.plots import seeds_plot
from longrank.tables import Cell, fmt_p

SEEDS_CSV = "seeds.csv"
COLUMNS = ["system", "seed", "measure", "mean", "n_queries"]


def per_seed_means(seed_evals: dict[str, dict[str, str]], measures: list[str]) -> pd.DataFrame:
    """One row per seeded system, seed and measure: the mean over the evaluated queries (COLUMNS)."""
    rows = []
    for system, by_seed in seed_evals.items():
        for seed, path in by_seed.items():
            frame = read_eval_tsv(path)
            rows += [[system, int(seed), m, float(frame[m].mean()), len(frame)] for m in measures if m in frame]
    return pd.DataFrame(rows, columns=COLUMNS)


def spread(seed_means: pd.DataFrame, system: str, measure: str) -> dict[int, float]:
    """A seeded system's mean of ``measure`` by seed ({} for a system without seeds)."""
    rows = seed_means[(seed_means.system == system) & (seed_means.measure == measure)]
    return dict(zip(rows["seed"], rows["mean"]))


def difference_range(a: dict[int, float], b: dict[int, float], same_training: bool) -> tuple[float, float]:
    """The difference a - b over the seeds' pairs: every pair for two trainings, seed with seed for one training's
    two systems (a model and its interpolation), whose seeds are the same draws."""
    if same_training:
        diffs = [a[seed] - b[seed] for seed in a]
    else:
        diffs = [x - y for x, y in product(a.values(), b.values())]
    return min(diffs), max(diffs)


def section(ctx: Context) -> Section:
    sec = Section("Training seeds")
    seed_evals = ctx.inp.manifest.seed_evals
    if not seed_evals:
        return sec.not_run(
            "no model trains more than one seed (models.<name>.train.seeds: 3 trains three, each its own jobs; "
            "this section then gives each model's spread over its seeds)"
        )
    measures, primary = ctx.cmp.measures, ctx.cmp.primary
    seed_means = per_seed_means(seed_evals, measures)
    write_csv(ctx.fig_dir.parent / SEEDS_CSV, seed_means)
    sec.howto(
        "Each seeded model trained once per seed, everything else equal. The comparison's table and its tests read "
        "each query's mean over the seeds; here each seed's mean over the queries. A difference whose range over the "
        "seeds' pairs includes 0 is within the spread of training seeds: some pair of seeds reverses it, whatever "
        f"its p-value. Per-seed rows: {SEEDS_CSV}. The sections that read one ranking (lengths, regions, the "
        "documents) read each model's first seed."
    )
    rows = []
    for system in seed_evals:
        cells = []
        for m in measures:
            values = pd.Series(list(spread(seed_means, system, m).values()))
            cells.append(
                Cell(f"{values.mean():.4f} ± {values.std(ddof=1):.4f} ({values.min():.4f}–{values.max():.4f})")
            )
        rows.append([system, ", ".join(seed_evals[system]), *cells])
    sec.table(["System", "Seeds", *measures], rows, caption="Mean ± sd (min–max) over the seeds")
    headers, pairs = _differences(ctx, seed_means, primary)
    significant = [row for row in pairs if row[1].text.endswith("*")]
    reversed_ = [row for row in significant if row[4].text.startswith("within")]
    sec.text(
        f"{len(significant)} of the {len(pairs)} differences in {primary} with a seeded system are significant "
        f"(Holm-corrected Wilcoxon, p < {ctx.cmp.alpha}); {len(reversed_)} of them "
        f"{'is' if len(reversed_) == 1 else 'are'} within the spread of training seeds"
        + (f": {', '.join(row[0] for row in reversed_)}." if reversed_ else ".")
    )
    sec.table(headers, pairs, caption=f"Differences in {primary} beside the seeds' spread")
    plot = seeds_plot(seed_means[seed_means.measure == primary], primary, ctx.fig_dir / "seeds.png")
    return sec.image(plot, caption=f"{primary} of every seed (dots) and their mean (bar), per seeded system")


def _differences(ctx: Context, seed_means: pd.DataFrame, measure: str) -> tuple[list[str], list[list]]:
    """Every compared pair with a seeded system in it, the significant ones first: the difference of the seeds'
    means, its Holm-corrected p, the range over the seeds' pairs and what that range says."""
    seeded = set(ctx.inp.manifest.seed_evals)
    pairs = ctx.cmp.pairs[ctx.cmp.pairs.measure == measure]
    rows = []
    for r in pairs.sort_values("wilcoxon_p_holm", kind="stable").itertuples():
        if r.system_a not in seeded and r.system_b not in seeded:
            continue
        a = spread(seed_means, r.system_a, measure) or {0: float(r.mean_a)}
        b = spread(seed_means, r.system_b, measure) or {0: float(r.mean_b)}
        same = _training(ctx, r.system_a) == _training(ctx, r.system_b)
        low, high = difference_range(a, b, same_training=same)
        significant = float(r.wilcoxon_p_holm) < ctx.cmp.alpha
        rows.append(
            [
                f"{r.system_a} − {r.system_b}",
                Cell(f"{r.mean_diff:+.4f}" + (" *" if significant else "")),
                Cell(fmt_p(float(r.wilcoxon_p_holm))),
                Cell(f"{low:+.4f} to {high:+.4f}"),
                Cell(
                    "within the spread of training seeds"
                    if low <= 0 <= high
                    else "the same sign for every pair of seeds"
                ),
            ]
        )
    return ["Pair", "Difference (* significant)", "p (Holm)", "Over the seeds' pairs", "Reading"], rows


def _training(ctx: Context, system: str) -> str:
    """The entry whose trainings a system's seeds are: its model's, or the one whose weights it shares (MORES Reuse
    scores with MORES's weights, seed by seed)."""
    model = ctx.inp.base_model(system)
    return (ctx.inp.models.get(model) or {}).get("checkpoint_of") or model
