"""Section: attention scaling (NDRM paper Fig. 2, RQ2, brought up to date) from ``bench/attention_scaling.json``
(stage ``attention_scaling``): peak training memory and forward+backward time of the same Conformer stack with
materialised attention (Eq. 1 written out, the 2020 Transformer), fused SDPA (Eq. 1 without the n x n matrix)
and the Conformer's separable attention (Eq. 2), by sequence length.

The paper's claim is about memory against the 2020 Transformer; fused attention stores no n x n matrix either,
so the memory advantage is reported against materialised attention only and the time advantage against fused
SDPA, and the text names the comparison beside every number. The section is left out when the file is absent.
"""

from __future__ import annotations

import math

from longrank.results.stage_outputs import SPREAD_LIMIT, AttentionScaling, Timing
from longrank.report.efficiency import NOISY_MARK
from longrank.report import plots
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.tables import Cell, fmt

ATTENTIONS = ("materialised", "sdpa", "separable")
LABELS = {"materialised": "materialised softmax(QKᵀ)V", "sdpa": "fused SDPA", "separable": "separable (Conformer)"}
MEMORY_AT = 2000  # the issue's headline ratios: memory materialised / separable at 2,000 positions ...
TIME_AT = 4000  # ... and time fused SDPA / separable at 4,000 (the paper's document length)


def linear_fit(xs, ys) -> dict | None:
    """Least-squares line y = slope . x + intercept with its R^2 (1 - residual / total sum of squares); None with
    fewer than two distinct x. With two points R^2 is 1 by construction (``points`` says how many there were)."""
    pts = [(float(x), float(y)) for x, y in zip(xs, ys)]
    if len({x for x, _ in pts}) < 2:
        return None
    n = len(pts)
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sxx
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for _, y in pts)
    ss_res = sum((y - slope * x - intercept) ** 2 for x, y in pts)
    return {"slope": slope, "intercept": intercept, "r2": 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0, "points": n}


def _exponent(xs, ys) -> float | None:
    """Slope of log y against log x: the power of n the curve grows with (1 linear, 2 quadratic)."""
    pts = [(x, y) for x, y in zip(xs, ys) if x > 0 and y > 0]
    fit = linear_fit([math.log(x) for x, _ in pts], [math.log(y) for _, y in pts])
    return fit["slope"] if fit else None


def _ratio(a, b) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


def summarise(data: dict) -> dict:
    """The section's numbers from the stage's JSON: per length the ratios to the separable attention, the
    headline ratios, the straight-line fits of the separable attention's memory and time in length, and the
    growth exponent of every attention's memory and time."""
    measured = {(r["attention"], int(r["length"])): r for r in data.get("rows") or [] if not r.get("skipped")}
    lengths = sorted({int(r["length"]) for r in data.get("rows") or []})

    def value(attention, length, key):
        row = measured.get((attention, length))
        return None if row is None else row.get(key)

    ratios = []
    for n in lengths:
        sep_mem, sep_time = value("separable", n, "peak_mb"), value("separable", n, "seconds")
        ratios.append(
            {
                "length": n,
                "memory_materialised": _ratio(value("materialised", n, "peak_mb"), sep_mem),
                "memory_sdpa": _ratio(value("sdpa", n, "peak_mb"), sep_mem),
                "time_sdpa": _ratio(value("sdpa", n, "seconds"), sep_time),
                "time_materialised": _ratio(value("materialised", n, "seconds"), sep_time),
            }
        )
    at = {r["length"]: r for r in ratios}
    separable = sorted((n, r) for (a, n), r in measured.items() if a == "separable")
    growth = {}
    for attention in ATTENTIONS:
        pts = sorted((n, r) for (a, n), r in measured.items() if a == attention)
        if len(pts) >= 2:
            growth[attention] = {
                key: _exponent([n for n, _ in pts], [r[key] for _, r in pts]) for key in ("peak_mb", "seconds")
            }
    return {
        "lengths": lengths,
        "ratios": ratios,
        "memory_materialised_at": (at.get(MEMORY_AT) or {}).get("memory_materialised"),
        "time_sdpa_at": (at.get(TIME_AT) or {}).get("time_sdpa"),
        "fit_memory": linear_fit([n for n, _ in separable], [r["peak_mb"] for _, r in separable]),
        "fit_time": linear_fit([n for n, _ in separable], [r["seconds"] for _, r in separable]),
        "growth": growth,
    }


def _x(v) -> str:
    return "–" if v is None else f"{v:.2f}×" if v < 10 else f"{v:.1f}×"


def _signed(v: float, spec: str) -> str:
    return f"{'+' if v >= 0 else '−'} {format(abs(v), spec)}"


def _measure_cells(data: dict, key: str, digits: int) -> tuple[list[str], list[list[Cell]]]:
    rows = {(r["attention"], int(r["length"])): r for r in data.get("rows") or []}
    attentions = [a for a in ATTENTIONS if any(k[0] == a for k in rows)]
    table = []
    for n in sorted({k[1] for k in rows}):
        cells = [Cell(f"{n:,}")]
        for a in attentions:
            r = rows.get((a, n))
            if r is None:
                cells.append(Cell(""))
            elif r.get("skipped"):
                cells.append(Cell("skipped"))
            else:
                timing = Timing.from_json(r["timing"]) if key == "seconds" and r.get("timing") else None
                cells.append(Cell(fmt(r[key], digits), NOISY_MARK if timing and timing.noisy else ""))
        table.append(cells)
    return ["length"] + [LABELS[a] for a in attentions], table


def section(ctx: Context) -> Section:
    path = ctx.inp.manifest.attention_scaling
    sec = Section("Attention scaling: memory and time by sequence length")
    if path is None:
        return sec.not_run(not_run_reason(ctx.inp))
    data = AttentionScaling.read(path).to_json()
    s = summarise(data)
    cfg = data.get("config") or {}
    _describe(sec, data, cfg)
    _headlines(sec, s)
    headers, rows = _measure_cells(data, "peak_mb", 0)
    sec.table(headers, rows, caption="Peak training memory (MB above weights and inputs)")
    headers, rows = _measure_cells(data, "seconds", 3)
    sec.table(headers, rows, caption=f"Forward+backward time (s, median of {cfg.get('repeats', '?')})")
    _spread_note(sec, data)
    _ratio_tables(sec, s)
    skipped = [r for r in data.get("rows") or [] if r.get("skipped")]
    if skipped:
        sec.note(
            "Not measured: "
            + "; ".join(
                f"{LABELS.get(r['attention'], r['attention'])} at {int(r['length']):,} ({r.get('reason')})"
                for r in skipped
            )
            + "."
        )
    measured = [r for r in data.get("rows") or [] if not r.get("skipped")]
    if measured:
        plot = plots.attention_scaling_plot(measured, skipped, ctx.fig_dir / "fig_attention_scaling.png", LABELS)
        sec.image(
            plot.path,
            "Peak training memory (left) and forward+backward time (right) against sequence length, log-log: "
            "a slope of 1 is linear growth, 2 quadratic (dotted guides). Skipped configurations are listed in the legend.",
            plot.note,
        )
    if data.get("method"):
        sec.note(str(data["method"]))
    return sec


def not_run_reason(inp) -> str:
    """Why the stage did not run (workflow/rules/attention_scaling.smk): its switch, or no enabled model asks for it."""
    if not (inp.config.get("attention_scaling") or {}).get("enabled", False):
        return (
            "attention_scaling.enabled: false (the default: it takes minutes per length on a CPU; "
            "config/studies/ndrm.yaml and config/trec-dl.yaml set it)"
        )
    askers = [
        m
        for m, spec in inp.resolved.items()
        if m in inp.models and spec["capabilities"].get("speed_bench") == "attention_scaling"
    ]
    if not askers:
        return "no enabled model asks for it (an NDRM entry: its class's speed_bench is attention_scaling)"
    return "no bench/attention_scaling.json among the report's inputs"


def _describe(sec: Section, data: dict, cfg: dict) -> None:
    """What was measured, and which comparison each claim is about."""
    sec.text(
        f"The same stack of {cfg.get('layers', '?')} Conformer layers (hidden {cfg.get('hidden', '?')}, "
        f"{cfg.get('heads', '?')} heads, batch {cfg.get('batch_size', '?')}) trained for one step (forward + backward) "
        f"with three attentions: materialised softmax(QKᵀ/√d)·V as the 2020 Transformer of the paper's Fig. 2 computes it "
        f"(an n×n matrix per head), PyTorch's fused scaled-dot-product attention (the same Eq. 1, no n×n matrix stored), "
        f"and the Conformer's separable attention (Eq. 2). Device: {data.get('device', '?')} ({data.get('device_name') or '?'})."
    )
    sec.howto(
        "The paper's memory claim is a comparison with materialised attention: only that one stores n×n. "
        "Fused SDPA has no n×n matrix either, so against it the separable attention's lasting advantage is time, "
        "not memory. Each number below names its comparison."
    )


def _headlines(sec: Section, s: dict) -> None:
    """The memory advantage over materialised attention, the time advantage over fused SDPA, and the line fits."""
    mat, sdpa = s["memory_materialised_at"], s["time_sdpa_at"]
    sec.text(
        f"Memory advantage (vs materialised attention only): peak training memory materialised / separable at "
        f"{MEMORY_AT:,} positions = {_x(mat)}" + ("" if mat is not None else " (not measured at that length)") + ". "
        f"Time advantage (vs fused SDPA): forward+backward time fused SDPA / separable at {TIME_AT:,} positions = "
        f"{_x(sdpa)}" + ("" if sdpa is not None else " (not measured at that length)") + "."
    )
    sdpa_mem = [r["memory_sdpa"] for r in s["ratios"] if r["memory_sdpa"] is not None]
    if sdpa_mem:
        sec.text(
            f"For contrast, memory fused SDPA / separable ranges {min(sdpa_mem):.2f}–{max(sdpa_mem):.2f}× over the "
            f"measured lengths: against fused attention the separable attention has no comparable memory advantage."
        )
    fm, ft = s["fit_memory"], s["fit_time"]
    if fm and ft:
        sec.text(
            f"Straight-line fit in length of the separable attention (least squares over {fm['points']} lengths): "
            f"memory {fm['slope'] * 1000:.1f} MB per 1,000 positions {_signed(fm['intercept'], '.1f')} MB, R² = {fm['r2']:.4f}; "
            f"time {ft['slope'] * 1000:.3g} s per 1,000 positions {_signed(ft['intercept'], '.3g')} s, R² = {ft['r2']:.4f}"
            + (" (two lengths: R² is 1 by construction)." if fm["points"] < 3 else ".")
        )


def _spread_note(sec: Section, data: dict) -> None:
    spreads = [(r, Timing.from_json(r["timing"])) for r in data.get("rows") or [] if r.get("timing")]
    if spreads:
        sec.note(
            "Spread of each median (min / max relative to it, IQR): "
            + "; ".join(
                f"{LABELS.get(r['attention'], r['attention'])} at {int(r['length']):,}: {t.describe()}"
                for r, t in spreads
            )
            + (
                f". {NOISY_MARK} marks a median whose passes spread (max − min) by more than {SPREAD_LIMIT:.0%} of it: "
                "one draw from a wide range, to read as approximate."
                if any(t.noisy for _, t in spreads)
                else "."
            )
        )


def _ratio_tables(sec: Section, s: dict) -> None:
    """Ratios to the separable attention at each length, and each attention's growth exponents."""
    keys = ("memory_materialised", "memory_sdpa", "time_sdpa", "time_materialised")
    sec.table(
        [
            "length",
            "memory: materialised / separable",
            "memory: fused SDPA / separable",
            "time: fused SDPA / separable",
            "time: materialised / separable",
        ],
        [[Cell(f"{r['length']:,}")] + [Cell(_x(r[k])) for k in keys] for r in s["ratios"]],
        caption="Ratios to the separable attention at each length (– where one side was not measured)",
    )
    if s["growth"]:
        sec.table(
            ["attention", "memory ∝ nᵏ, k =", "time ∝ nᵏ, k ="],
            [
                [
                    Cell(LABELS[a]),
                    Cell(fmt(g["peak_mb"], 2) if g["peak_mb"] is not None else "–"),
                    Cell(fmt(g["seconds"], 2) if g["seconds"] is not None else "–"),
                ]
                for a, g in s["growth"].items()
            ],
            caption="Growth exponents: slope of log measure against log length (1 linear, 2 quadratic)",
        )
