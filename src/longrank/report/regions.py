"""Section: where the top-3 regions of TKL's scores start, against a uniform placement (TKL Fig. 3 style)."""

from __future__ import annotations

import math
from pathlib import Path
from collections.abc import Mapping, Sequence

from longrank.evaluate.lengths import region_positions, uniform_region_share
import numpy as np

from longrank.report import plots
from longrank.report.panels import panel_check
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import no_model_reason
from longrank.tables import Cell


def section(ctx: Context) -> Section:
    inp = ctx.inp
    sec = Section("Positions of the top-3 regions (TKL)")
    # Every rerank writes a details file; only models that explain their scores (TKL) fill it.
    details = {model: Path(p) for model, p in inp.manifest.details.items() if Path(p).stat().st_size > 0}
    if not details:
        return sec.not_run(
            f"the details files of {', '.join(inp.models)} hold no region positions (runs/<model>.details.jsonl is "
            "empty: only TKL's scores come with them)"
            if inp.models
            else no_model_reason(inp, "writes region positions")
        )
    positions = {
        model: region_positions(path, inp.run(model), inp.evaluated_qids, top_docs=10)
        for model, path in details.items()
    }
    plot = region_plot(positions, ctx.fig_dir / "fig_regions.png")
    sec.image(
        plot.path,
        "Start offsets of the rank-1, -2 and -3 regions over each test query's top-10 documents "
        "(log-log; dotted line at token 500).",
        plot.note,
    )
    rows = []
    for model, pos in positions.items():
        spec = inp.models.get(model) or {}
        uniform = None
        if inp.lengths is not None and spec.get("max_doc_len") and spec.get("type"):
            region_size = inp.resolved[model]["architecture"].get("region_size", 1)
            uniform = uniform_region_share(
                inp.run(model), inp.evaluated_qids, inp.lengths, int(spec["max_doc_len"]), int(region_size)
            )
        for r, ps in sorted(pos.items()):
            share = sum(p >= 500 for p in ps) / len(ps) if ps else float("nan")
            rows.append(
                [
                    model,
                    f"rank-{r}",
                    len(ps),
                    Cell(f"{100 * share:.1f}%" if ps else "–"),
                    Cell("–" if uniform is None or math.isnan(uniform) else f"{100 * uniform:.1f}%"),
                ]
            )
    sec.table(["Model", "Region", "Regions", "Starting at token ≥ 500", "Same, if regions were placed uniformly"], rows)
    return sec.note(
        "The last column is the share a region placed at random in the part of each document the model "
        "reads would have: on a collection of long documents most of the text lies beyond token 500, so "
        "compare the two columns rather than reading the first alone."
    )


def region_plot(positions: Mapping[str, Mapping[int, Sequence[int]]], path) -> plots.Plot:
    """TKL Fig. 3: histogram (log-log) of region start offsets, rank-1..3 regions separately, one panel per model.
    The note names an empty panel (no region of the model among the documents counted) and panels that repeat."""
    models = list(positions)
    fig, axes = plots.plt.subplots(1, len(models), figsize=(5.0 * len(models), 3.6), squeeze=False)
    for ax, model in zip(axes.flat, models):
        allpos = [p for ps in positions[model].values() for p in ps]
        top = max(allpos) + 2 if allpos else 10
        bins = np.logspace(0, math.log10(top), 30)
        for r, ps in sorted(positions[model].items()):
            if ps:
                ax.hist(np.asarray(ps) + 1, bins=bins, histtype="step", lw=1.5, label=f"rank-{r} region (n={len(ps)})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axvline(501, color="0.5", ls=":", lw=1)
        ax.set_xlabel("region start (token offset + 1, log scale)")
        ax.set_ylabel("regions (log scale)")
        ax.set_title(f"{model}: positions of the top-3 regions")
        ax.legend(fontsize=7, frameon=False)

    def why(kind: str, model: str) -> str:
        if kind == "empty":
            return "none of its scored documents among those counted has a region position in its details file"
        return "the models' top-3 regions start at the same offsets"

    counts = {m: _region_histogram(positions[m]) for m in models}
    return plots.Plot(plots.save_figure(fig, path), panel_check(counts, None, why))


def _region_histogram(by_rank: Mapping[int, Sequence[int]]) -> list[float]:
    """The panel's data as one comparable series: each rank's count of regions per start offset."""
    return [float(len(ps)) for ps in by_rank.values()] + [
        float(p) for _, ps in sorted(by_rank.items()) for p in sorted(ps)
    ]
