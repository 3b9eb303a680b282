"""Section: the primary measure against the maximum document length a model reads, one line per length sweep
(TKL Fig. 2 style)."""

from __future__ import annotations

import json

import pandas as pd

from longrank.report import plots
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import PRIMARY, stage_label

COLUMNS = ["type", "system", "max_doc_len", "mean", "ci_low", "ci_high"]


def sweep_key(spec: dict, resolved: dict) -> str:
    """What a model entry is besides its maximum length: its keys with the model's and the training loop's defaults
    filled in (config.json's ``resolved_models``), so a key spelled out at its default is the same as one left out."""
    workflow = {
        k: v
        for k, v in spec.items()
        if k not in {"max_doc_len", "enabled", "interpolate", "checkpoint_of", "like", "train"}
    }
    architecture = {k: v for k, v in resolved["architecture"].items() if k != "max_doc_len"}
    return json.dumps({**workflow, **architecture, "train": resolved["train"]}, sort_keys=True, default=str)


def sweep_points(ctx: Context) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per model of a sweep: entries that differ in max_doc_len only, the primary measure's rows)."""
    inp, cmp = ctx.inp, ctx.cmp
    pts, prim = [], cmp.table[cmp.table.measure == PRIMARY].set_index("system")
    for s in cmp.systems:
        spec = inp.models.get(s) or {}
        if inp.is_reranker(s) and s in prim.index and spec.get("max_doc_len") and spec.get("type"):
            pts.append(
                {
                    "type": spec["type"],
                    "system": s,
                    "max_doc_len": int(spec["max_doc_len"]),
                    "mean": prim.loc[s, "mean"],
                    "ci_low": prim.loc[s, "ci_low"],
                    "ci_high": prim.loc[s, "ci_high"],
                }
            )
    pts = pd.DataFrame(pts, columns=COLUMNS)
    # One line per sweep: entries that differ in max_doc_len only (not saturation, training, depth, ...).
    pts["sweep"] = [sweep_key(inp.models[s], inp.resolved[s]) for s in pts["system"]]
    lengths = pts.groupby("sweep")["max_doc_len"].nunique() if len(pts) else pd.Series(dtype=int)
    pts = pts[pts["sweep"].isin(lengths[lengths >= 2].index)].copy()
    per_type = pts.groupby("type")["sweep"].nunique()
    pts["type"] = [
        t if per_type[t] == 1 else f"{t} ({pts[pts.sweep == k].system.iloc[0]} ...)"
        for t, k in zip(pts["type"], pts["sweep"])
    ]
    return pts, prim


def section(ctx: Context) -> Section:
    sec = Section(f"{PRIMARY} vs maximum document length")
    pts, prim = sweep_points(ctx)
    if pts.empty:
        return sec.not_run(
            "no two enabled model entries differ in max_doc_len only (a length sweep is entries of one type whose "
            "resolved settings are the same but for max_doc_len, e.g. tkl at 200 and at 2,000 words)"
        )
    stage = ctx.inp.default_first_stage
    base = float(prim.loc[stage, "mean"]) if stage in prim.index else None
    png = plots.maxlen_plot(
        pts, ctx.fig_dir / "fig_maxlen.png", PRIMARY, base, stage_label(stage) if stage else "first stage"
    )
    return sec.image(png, f"{PRIMARY} against the number of document tokens the model reads (TKL Fig. 2 style).")
