"""Section: MIR's ablations (the paper's Tables 2-4) and its query groups by document length (Fig. 6).

Ablations: every configured ``mir`` entry against the reference entry (the one named ``mir``, else the first
in the report's order), with the keys it changes, each measure's mean and its relative change, and the paired
Wilcoxon test of the primary measure (Holm across all the report's pairs). Query groups: the test queries split
by the length of their relevant documents (the median, in words, where a query has several; the paper's
MS MARCO queries have one positive, measured in tokens) into all, <= 512, 512-2K and > 2K, with each MIR
row's, the BERT rows' and the first stages' mean primary measure per group.
"""

from __future__ import annotations

from longrank.evaluate.lengths import relevant_median_length
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import PRIMARY, first_stages, no_model_reason
from longrank.report.verdicts import pair_row, verdict
from longrank.tables import Cell, fmt, fmt_p

ABLATION_MEASURES = ["nDCG@10", "RR@10", "AP@100"]  # the paper's Tables 2-4 (MRR@10, MAP@100)


def mir_models(models: dict, resolved: dict) -> list[str]:
    """The enabled entries that read a graph set (config.json's ``resolved_models``: what their classes declare)."""
    return [name for name in models if resolved[name]["capabilities"]["reads_graph_set"]]


def reference(models: dict, names: list[str]) -> str:
    """The entry the ablations are compared with (``names``: at least one)."""
    return "mir" if "mir" in names else names[0]


# workflow keys that do not change what the model learns or ranks
UNCHANGING = {"interpolate", "enabled"}


def changed_keys(name: str, ref: str, models: dict, resolved: dict) -> str:
    """What an ablation changes: the keys whose values differ from the reference entry's, each entry with the model's
    and the training loop's defaults filled in (config.json's ``resolved_models``: an entry that leaves a key out
    has its default)."""

    def flat(n: str) -> dict:
        own = {k: v for k, v in models[n].items() if k not in {"train", "like"} | UNCHANGING}
        return {**resolved[n]["architecture"], **own, **{f"train.{k}": v for k, v in resolved[n]["train"].items()}}

    a, b = flat(name), flat(ref)
    return ", ".join(f"{k}: {a.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)) or "(same entry)"


def section(ctx: Context) -> Section:
    inp, cmp = ctx.inp, ctx.cmp
    configured = mir_models(inp.models, inp.resolved)
    names = [m for m in configured if m in cmp.systems]
    sec = Section("MIR: ablations and query groups")
    if not configured:
        return sec.not_run(no_model_reason(inp, "reads a MIR graph set", "an entry of type mir does"))
    if not names:
        return sec.not_run(f"{', '.join(configured)} not among the compared systems (compare/table.csv)")
    ref = reference(inp.models, names)
    measures = [m for m in ABLATION_MEASURES if m in cmp.measures]
    means = {m: cmp.means(m) for m in measures}
    sec.warning(cmp.too_few_queries)
    rows = []
    for name in [ref] + [n for n in names if n != ref]:
        row: list[str | Cell] = [
            name,
            "reference" if name == ref else changed_keys(name, ref, inp.models, inp.resolved),
        ]
        for m in measures:
            value, base = float(means[m][name]), float(means[m][ref])
            rel = "" if name == ref or base == 0 else f" ({100 * (value - base) / base:+.1f}%)"
            row.append(Cell(fmt(value) + rel))
        pair = pair_row(cmp.pairs, PRIMARY, name, ref) if name != ref else None
        row += (
            [Cell(fmt_p(pair[2])), Cell(fmt_p(pair[1])), Cell(verdict(pair[0], pair[1], ref, cmp.alpha))]
            if pair
            else [Cell("–"), Cell("–"), Cell("–")]
        )
        rows.append(row)
    sec.howto(
        "Ablations are config entries of type mir that differ from the reference in a key or two "
        "(config/studies/mir.yaml: graphs removed, shared parameters, no stacks, fully connected pivots, GCN / GIN / "
        "GraphSAGE aggregators, "
        "views removed, max / CNN / Transformer pooling); they read the same graph set."
    )
    sec.table(
        ["Model", "Changes", *measures, f"p {PRIMARY} (Wilcoxon)", "p (Holm)", "Verdict"],
        rows,
        caption=f"MIR ablations (the paper's Tables 2-4): test means, in brackets the change relative to {ref}.",
    )
    _query_groups(ctx, sec, names)
    _length_against_throughput(ctx, sec)
    return sec


def rate_text(bench, name: str) -> str:
    """Documents/s of ``name`` in ``bench`` with its range over the timed passes ("1 run" for one pass)."""
    if name in bench.rates:
        return bench.rates[name].describe(1000, 1)
    return f"{fmt(1000 * bench.docs_per_ms[name], 3)} (spread not recorded)"


def ratio_text(bench, a: str, b: str) -> str:
    """Throughput of ``a`` over ``b``: the ratio of their medians, and the range the passes allow (a's slowest over
    b's fastest, a's fastest over b's slowest); "1 run" where either was timed once."""
    figure = f"{bench.docs_per_ms[a] / bench.docs_per_ms[b]:.2f}"
    ra, rb = bench.rates.get(a), bench.rates.get(b)
    if ra is None or rb is None:
        return f"{figure} (spread not recorded)"
    if ra.runs == 1 or rb.runs == 1:
        return f"{figure} (1 run)"
    return f"{figure} ({ra.low / rb.high:.2f}–{ra.high / rb.low:.2f}, n={min(ra.runs, rb.runs)})"


def _length_against_throughput(ctx: Context, sec: Section) -> None:
    """Fig. 5's claim as numbers: every entry the side-by-side speed measurement timed (MIR at its lengths, BERT-MaxP
    over the same windows), then each MIR entry against each MaxP entry: the difference in the primary measure with
    its test, and the throughput ratio. The paper: MIR at 1,024 tokens above MaxP at 2,048, and faster."""
    cmp = ctx.cmp
    speed = next((b for b in ctx.inp.benches if b.side_by_side and b.timed_entries), None)
    if speed is None:
        sec.not_run(
            "effectiveness against throughput side by side (MIR Fig. 5): "
            + (
                "mir_speed.enabled: false"
                if not ctx.inp.bench_enabled("mir_speed")
                else "no bench/mir.speed.json among the report's inputs"
            )
        )
        return
    timed = {n: t for n, t in speed.timed_entries.items() if n in cmp.systems and n in speed.docs_per_ms}
    if not timed:
        sec.not_run(
            "effectiveness against throughput side by side (MIR Fig. 5): none of the entries mir_speed timed "
            f"({', '.join(speed.timed_entries) or 'none'}) is among the compared systems"
        )
        return
    means = cmp.means(PRIMARY)
    rows = [
        [n, t.model, t.tokens, Cell(rate_text(speed, n)), Cell(fmt(float(means[n])))]
        for n, t in sorted(timed.items(), key=lambda item: (item[1].model, item[1].tokens))
    ]
    sec.table(
        ["Model", "Reads", "Tokens", "Documents/s (median; slowest–fastest pass)", PRIMARY],
        rows,
        caption=f"Effectiveness and throughput measured side by side (MIR Fig. 5; {speed.device}).",
    )
    pairs = _mir_against_maxp(cmp, speed, timed)
    if pairs:
        sec.table(
            [
                "MIR vs MaxP (tokens)",
                f"Δ {PRIMARY}",
                "p (Wilcoxon)",
                "p (Holm)",
                "Verdict",
                "Throughput ratio (median; extremes of the passes)",
            ],
            pairs,
            caption="The paper's claim: MIR reading fewer tokens ranks better than MaxP reading more, at a throughput "
            "ratio above 1.",
        )


def _mir_against_maxp(cmp, speed, timed: dict) -> list[list]:
    """Each timed MIR entry against each timed MaxP entry the comparison paired: the difference, its tests, the
    verdict and the throughput ratio."""
    rows = []
    for mir, t in timed.items():
        for maxp, u in timed.items():
            pair = pair_row(cmp.pairs, PRIMARY, mir, maxp) if t.model == "MIR" and u.model == "MaxP" else None
            if pair:
                rows.append(
                    [
                        f"{mir} ({t.tokens}) vs {maxp} ({u.tokens})",
                        Cell(f"{pair[0]:+.4f}"),
                        Cell(fmt_p(pair[2])),
                        Cell(fmt_p(pair[1])),
                        Cell(verdict(pair[0], pair[1], maxp, cmp.alpha)),
                        Cell(ratio_text(speed, mir, maxp)),
                    ]
                )
    return rows


def _query_groups(ctx: Context, sec: Section, names: list[str]) -> None:
    inp, frames = ctx.inp, ctx.cmp.frames
    baselines = [s for s in first_stages(inp.config) if s in frames]
    baselines += [m for m in inp.models if inp.resolved[m]["capabilities"]["cross_encoder"] and m in frames]
    systems = baselines + [n for n in names if n in frames]
    qids = list(next(iter(frames.values())).index)
    med = relevant_median_length(inp.qrels, inp.lengths, qids)
    groups = [
        ("all", qids),
        ("<= 512", med.index[med <= 512]),
        ("512-2K", med.index[(med > 512) & (med <= 2048)]),
        ("> 2K", med.index[med > 2048]),
    ]
    # One row per system: twenty ablations as columns would run off the page.
    rows = [
        [s, *[Cell(fmt(float(frames[s].loc[list(ids), PRIMARY].mean())) if len(ids) else "–") for _, ids in groups]]
        for s in systems
    ]
    sec.table(
        ["Model", *[f"{label} ({len(ids)} queries)" for label, ids in groups]],
        rows,
        caption=f"Test {PRIMARY} by query group (MIR Fig. 6): the median length in words of a query's relevant "
        f"documents.",
    )
    if len(med) < len(qids):
        sec.note(
            f"{len(qids) - len(med)} test queries have no judged-relevant document with a length and are in 'all' only."
        )
