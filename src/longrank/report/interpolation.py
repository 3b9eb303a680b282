"""Section: each model interpolated with the first stage it reranked, the weight chosen on dev queries."""

from __future__ import annotations

from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import interpolations, model_stage, stage_label
from longrank.tables import Cell, fmt


def section(ctx: Context) -> Section:
    inp = ctx.inp
    found = interpolations(inp)
    stages = list(dict.fromkeys(model_stage(inp, model) for model, _, _ in found)) or [inp.default_first_stage]
    one = stages[0] if len(stages) == 1 and stages[0] else None  # every model mixed with the same first stage
    sec = Section(f"Interpolation with {stage_label(one) if one else 'the first stage'} (weights chosen on dev queries)")
    if not found:
        return sec.note("Skipped: no runs/*.interpolation.json.")
    rows = []
    for model, _, info in found:
        by_w = info.get("dev_ndcg10_by_weight") or {}
        w = info.get("weight")
        best = by_w.get(str(w), by_w.get(w)) if by_w else None
        rows.append([model, *([] if one else [model_stage(inp, model) or "–"]),
                     Cell(fmt(float(w), 3) if w is not None else "–"),
                     Cell(fmt(float(best)) if best is not None else "–"), len(by_w)])
    mixed = stage_label(one) if one else "first stage, where the first stage is the one the model reranked"
    sec.text(f"score = w · model + (1 − w) · {mixed} (as implemented by the interpolate stage); w maximises dev nDCG@10.")
    return sec.table(["Model", *([] if one else ["First stage"]), "Weight w", "Dev nDCG@10 at w", "Weights tried"], rows)
