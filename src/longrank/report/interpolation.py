"""Section: each model interpolated with the first stage it reranked, the weight chosen on dev queries."""

from __future__ import annotations

from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import interpolations, model_stage, no_model_reason, stage_label
from longrank.tables import Cell, fmt
from longrank.config.model_entries import interpolates


def section(ctx: Context) -> Section:
    inp = ctx.inp
    found = interpolations(inp)
    stages = list(dict.fromkeys(model_stage(inp, model) for model, _, _ in found)) or [inp.default_first_stage]
    one = stages[0] if len(stages) == 1 and stages[0] else None  # every model mixed with the same first stage
    sec = Section(
        f"Interpolation with {stage_label(one) if one else 'the first stage'} (weights chosen on dev queries)"
    )
    if not found:
        return sec.not_run(
            no_model_reason(inp, "is interpolated")
            if not inp.models
            else f"every enabled model has interpolate: false ({', '.join(inp.models)})"
            if not any(interpolates(spec) for spec in inp.models.values())
            else "no runs/{model}+{first stage}.interpolation.json among the report's inputs (models with "
            f"interpolate: true: {', '.join(m for m, spec in inp.models.items() if interpolates(spec))})"
        )
    rows = []
    for model, _, info in found:
        # per fold: the weight chosen on its dev queries and the dev nDCG@10 there; the mean over folds
        dev = sum(f.dev_ndcg10 for f in info.folds) / len(info.folds)
        tried = sorted({w for f in info.folds for w in f.dev_ndcg10_by_weight}, key=float)
        rows.append(
            [
                model,
                *([] if one else [model_stage(inp, model) or "–"]),
                Cell(fmt(info.weight, 3)),
                Cell(fmt(dev)),
                Cell(f"{len(tried)} ({tried[0]}–{tried[-1]})"),
            ]
        )
    mixed = stage_label(one) if one else "first stage, where the first stage is the one the model reranked"
    sec.text(
        f"score = w · model + (1 − w) · {mixed} (as implemented by the interpolate stage); w maximises dev nDCG@10 "
        "in each fold (weight and dev nDCG@10: the mean over folds)."
    )
    return sec.table(
        ["Model", *([] if one else ["First stage"]), "Weight w", "Dev nDCG@10 at w", "Weights tried"], rows
    )
