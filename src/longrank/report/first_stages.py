"""Section on the first stages: the recall of their candidates (the ceiling of every reranker on them) and,
when the config has several, their own effectiveness with paired significance between them. Where the
candidates stage left ``candidates/{name}.stats.json``, what each first stage costs joins its row: query
latency, index size and index build time (BM25's indexing, or a model's impact index built from its trained
weights: the Conformer-Kernel paper's fullrank setting)."""

from __future__ import annotations

from longrank.evaluate.metrics import per_query
from longrank.io.json_yaml import read_json
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import stage_label
from longrank.report.verdicts import pair_row, verdict
from longrank.tables import Cell, fmt, fmt_p

CUTOFFS = (10, 100, 1000)


def top_k(inp, stage: str, cands) -> int:
    """The candidates' depth: the first stage's top_k, else the longest list in its run."""
    depth = max((len(d) for d in cands.values()), default=0)
    return int((inp.first_stages.get(stage) or {}).get("top_k") or depth)


def recall(inp, stage: str, cands, cutoffs) -> tuple[dict[str, float], int]:
    """(R@k -> mean over the test queries, the number of test queries) of the first stage's candidates."""
    frame = per_query(cands, inp.qrels, inp.test_qids, [f"R@{c}" for c in cutoffs], name=f"{stage} candidates")
    return {c: float(frame[c].mean()) for c in frame.columns}, len(frame)


COST_HEADERS = ["Latency (ms/query)", "Index size (MB)", "Build time (s)"]


def costs(inp, stages) -> dict[str, list]:
    """First stage -> [latency ms/query, index MB, build/index seconds] from candidates/{stage}.stats.json (``–`` for
    what a stage did not measure, e.g. a run file's cost)."""
    found = {stage: read_json(inp.manifest.candidate_stats[stage]) for stage in stages}

    def num(value, scale=1.0, digits=2):
        return Cell(f"{float(value) * scale:,.{digits}f}") if isinstance(value, (int, float)) else Cell("–")

    out = {}
    for stage in stages:
        st = found.get(stage, {})
        # bm25 times its indexing (index_seconds); a model's impact index its per-fold build (build_seconds)
        build = st.get("build_seconds", st.get("index_seconds"))
        out[stage] = [
            once(num(st.get("query_ms_per_query"), digits=3)),
            num(st.get("index_bytes"), 1e-6),
            build_cell(build, [f["build_seconds"] for f in st.get("per_fold") or [] if "build_seconds" in f]),
        ]
    return out


def once(cell: Cell) -> Cell:
    """A timing measured in one run (one pass over the queries, one indexing): said beside it, not a spread."""
    return Cell(f"{cell.text} (1 run)") if cell.text != "–" else cell


def build_cell(seconds, per_fold: list[float]) -> Cell:
    """Build time: a model's impact index is built once per fold, so its mean has the folds' range beside it."""
    if not isinstance(seconds, (int, float)):
        return Cell("–")
    if len(per_fold) > 1:
        return Cell(f"{seconds:,.1f} (mean; {min(per_fold):,.1f}–{max(per_fold):,.1f} over {len(per_fold)} folds)")
    return Cell(f"{seconds:,.1f} (1 run)")


COST_NOTE = (
    "Latency: retrieval time per query with the index in memory (BM25: its batched retrieval of all queries "
    "divided by their number; a model: scoring and cutting each query's ranking from its impact index). Index "
    "size: the index in memory, 10⁶ bytes (a model's impact index: the sparse arrays of one fold's index). Build "
    "time: indexing the collection (a model: building one fold's impact index from its trained weights, "
    "training not included). Latency and build time are each one run (one pass over the queries, one indexing), so they "
    "carry no spread; an index built per fold gives the folds' range. – : not measured."
)


def section(ctx: Context) -> Section:
    inp = ctx.inp
    stages = {s: inp.candidates(s) for s in inp.first_stages}
    if len(stages) > 1:
        return comparison_section(ctx, stages)
    sec = Section("First-stage candidate recall")
    stage = inp.default_first_stage
    cands = stages[stage]
    k = top_k(inp, stage, cands)
    means, n = recall(inp, stage, cands, sorted({c for c in CUTOFFS if c < k} | {k}))
    label = stage_label(stage)
    sec.text(
        f"Recall of the {label} candidates over the {n} test queries: a re-ranker can only "
        f"find relevant documents among the top {k} that {label} hands it (R@{k} is its ceiling)."
    )
    cost = costs(inp, [stage])
    sec.table(
        ["First stage", *means, *(COST_HEADERS if cost else [])], [[stage, *means.values(), *cost.get(stage, [])]]
    )
    if cost:
        sec.note(COST_NOTE)
    return sec


def comparison_section(ctx: Context, stages: dict) -> Section:
    """Every first stage's recall at the candidate depths, its primary measure and the first stages it beats."""
    inp, cmp = ctx.inp, ctx.cmp
    sec = Section("First stages compared")
    depths = {s: top_k(inp, s, c) for s, c in stages.items()}
    cutoffs = sorted({c for c in CUTOFFS if c < max(depths.values())} | set(depths.values()))
    recalls = {s: recall(inp, s, c, cutoffs) for s, c in stages.items()}
    n = next(iter(recalls.values()))[1]
    ranked = [s for s in stages if s in cmp.systems]
    primary = cmp.primary
    means = cmp.means(primary) if ranked else {}
    better = {s: [o for o in ranked if o != s and beats(cmp, primary, s, o)] for s in ranked}
    sec.howto(
        f"Recall of each first stage's candidates over the {n} test queries: a re-ranker can only find "
        "relevant documents among the candidates its first stage hands it (R@k at the candidates' depth k is "
        "its ceiling; a first stage with fewer than k candidates keeps its recall beyond its depth). "
        + (
            f"{primary} is the first stage's own ranking; 'Better than' names the first stages it beats on "
            f"{primary}: two-sided paired Wilcoxon signed-rank test, Holm-corrected across all pairs of the "
            f"effectiveness table, p < {cmp.alpha}."
            if ranked
            else ""
        )
    )
    headers = ["First stage", "Candidates", *recalls[next(iter(recalls))][0]]
    if ranked:
        headers += [primary, f"Better than ({primary})"]
    cost = costs(inp, list(stages))
    headers += COST_HEADERS if cost else []
    rows = []
    for s, (rec, _) in recalls.items():
        row = [s, depths[s], *rec.values()]
        if ranked:
            row += [
                Cell(fmt(float(means[s])) if s in ranked else "–"),
                Cell(", ".join(better.get(s, [])) or ("none" if s in ranked else "–")),
            ]
        rows.append(row + cost.get(s, []))
    sec.table(headers, rows)
    if cost:
        sec.note(COST_NOTE)
    if len(ranked) > 1:
        sec.warning(cmp.too_few_queries)
        _against_each_other(sec, cmp, ranked)
    return sec


def _against_each_other(sec: Section, cmp, ranked: list[str]) -> None:
    """Each ranked first stage against each earlier one, on the primary measure."""
    primary = cmp.primary
    lines = []
    for i, a in enumerate(ranked):
        for b in ranked[i + 1 :]:
            pr = pair_row(cmp.pairs, primary, b, a)
            if pr is not None:
                diff, p_holm, _ = pr
                lines.append(
                    [
                        b,
                        a,
                        Cell(verdict(diff, p_holm, stage_label(a), cmp.alpha)),
                        Cell(f"{diff:+.4f}"),
                        Cell(fmt_p(p_holm)),
                    ]
                )
    sec.table(
        ["First stage", "Against", f"Verdict on {primary}", "Mean difference", "p (Wilcoxon, Holm)"],
        lines,
        caption=f"First stages against each other ({primary})",
    )


def beats(cmp, measure: str, a: str, b: str) -> bool:
    pr = pair_row(cmp.pairs, measure, a, b)
    return pr is not None and pr[0] > 0 and pr[1] < cmp.alpha
