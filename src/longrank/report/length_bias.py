"""Section: probability of relevance vs of retrieval by document length, per reranker (TKL Fig. 1 style)."""

from __future__ import annotations

import functools
import statistics

from longrank.evaluate.lengths import length_distributions
from longrank.report import plots
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import no_model_reason, rerank_depth, stage_label


def section(ctx: Context) -> Section:
    inp = ctx.inp
    sec = Section("Probability of relevance vs retrieval by document length")
    systems = ctx.cmp.systems
    rerankers = [s for s in systems if inp.is_reranker(s)]
    cands = inp.candidates()
    if not rerankers:
        return sec.not_run(no_model_reason(inp, "re-ranks candidates"))
    runs = {s: inp.run(s) for s in rerankers}
    baseline = inp.default_first_stage
    runs[baseline] = cands  # the first stage's own ranking, for reference
    # TKL's Fig. 1 looks at the top 30 of 100 reranked candidates. A model that reranks only its top n
    # leaves the set of its top n unchanged, so look at most at half the shallowest rerank depth.
    depth = max(1, min(30, min(rerank_depth(inp, s) for s in rerankers) // 2))
    dist = length_distributions(cands, inp.qrels, runs, inp.lengths, inp.evaluated_qids, depth=depth)
    why = functools.partial(panel_reason, inp, runs, depth, baseline)
    plot = plots.length_bias_plot(
        dist, rerankers, ctx.fig_dir / "fig_length_bias.png", depth=depth, baseline=baseline, why=why
    )
    sec.text(
        "Length buckets are deciles of the collection's document lengths (equal numbers of documents), so "
        "the share of relevant candidates in a bucket is proportional to P(rel | length) and the share of a "
        f"model's top-{depth} documents to P(ret@{depth} | length). A retrieval curve below the relevance curve on the "
        f"right means the model under-retrieves long documents. (Top {depth}: half the shallowest rerank depth, "
        "since reranking the top n cannot change which documents are in it.)"
    )
    sec.image(
        plot.path,
        f"Relevance vs retrieval (top {depth}) by document length, per re-ranker (TKL Fig. 1 style).",
        plot.note,
    )
    return sec


def panel_reason(inp, runs: dict, depth: int, baseline: str, kind: str, model: str) -> str:
    """Why ``model``'s panel is empty, repeats another's, or draws its first stage's curve: the test queries on which
    its first stage handed it no more than ``depth`` candidates (its top ``depth`` there is the whole list, whatever
    it scores), else whether its top ``depth`` holds the same documents as the first stage's on every query."""
    qids = list(inp.evaluated_qids)
    stage = inp.stage_of(model)
    cands = inp.candidates(stage) or {}
    run = runs.get(model) or {}
    if kind == "empty":
        scored = sum(1 for q in qids if run.get(q))
        return f"its run ranks documents for {scored} of the {len(qids)} test queries"
    n, counts = len(qids), [len(cands.get(q, {})) for q in qids]
    short = sum(1 for c in counts if c <= depth)
    label = stage_label(stage) if stage else "the first stage"
    returned = f"median {statistics.median(counts) if counts else 0:g} candidates, top_k {top_k_of(inp, stage)}"
    same = sum(1 for q in qids if set(top(run, q, depth)) == set(top(cands, q, depth)))
    kept = f"{model}'s top {depth} holds the same documents as {label}'s on {same} of the {n} test queries"
    if short == n:
        return (
            f"{label} returned no more candidates than the plot's depth ({depth}) on all {n} test queries "
            f"({returned}), so a model's top {depth} is the whole candidate list, whatever it scores"
        )
    if short:
        return (
            f"{label} returned no more than {depth} candidates on {short} of the {n} test queries ({returned}), where "
            f"a model's top {depth} is the whole candidate list; elsewhere {kept}"
        )
    return f"{kept} (it reorders them, but the plot counts which documents are in the top {depth})"


def top(run: dict, qid: str, depth: int) -> list[str]:
    docs = run.get(qid) or {}
    return [d for d, _ in sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]]


def top_k_of(inp, stage: str | None) -> str:
    return str((inp.first_stages.get(stage) or {}).get("top_k", "?")) if stage else "?"
