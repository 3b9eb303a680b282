"""Section: where the top-3 regions of TKL's scores start, against a uniform placement (TKL Fig. 3 style)."""

from __future__ import annotations

import math
from pathlib import Path

from longrank.evaluate.lengths import region_positions, uniform_region_share
from longrank.report import plots
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
        tkl = [m for m, spec in inp.models.items() if spec.get("type") == "tkl"]
        return sec.not_run(
            f"the details files of {', '.join(tkl)} hold no region positions (runs/<model>.details.jsonl is empty)"
            if tkl
            else no_model_reason(inp, "writes region positions", "only TKL's scores come with them")
        )
    positions = {
        model: region_positions(path, inp.run(model), inp.evaluated_qids, top_docs=10)
        for model, path in details.items()
    }
    plot = plots.region_plot(positions, ctx.fig_dir / "fig_regions.png")
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
