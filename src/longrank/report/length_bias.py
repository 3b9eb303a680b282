"""Section: probability of relevance vs of retrieval by document length, per reranker (TKL Fig. 1 style)."""

from __future__ import annotations

from longrank.evaluate.lengths import length_distributions
from longrank.report import plots
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import no_model_reason


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
    depths = [(inp.models.get(s) or {}).get("rerank_depth") or inp.config.get("rerank_depth") or 100 for s in rerankers]
    depth = max(1, min(30, min(depths) // 2))
    dist = length_distributions(cands, inp.qrels, runs, inp.lengths, inp.evaluated_qids, depth=depth)
    png = plots.length_bias_plot(dist, rerankers, ctx.fig_dir / "fig_length_bias.png", depth=depth, baseline=baseline)
    sec.text(
        "Length buckets are deciles of the collection's document lengths (equal numbers of documents), so "
        "the share of relevant candidates in a bucket is proportional to P(rel | length) and the share of a "
        f"model's top-{depth} documents to P(ret@{depth} | length). A retrieval curve below the relevance curve on the "
        f"right means the model under-retrieves long documents. (Top {depth}: half the shallowest rerank depth, "
        "since reranking the top n cannot change which documents are in it.)"
    )
    sec.image(png, f"Relevance vs retrieval (top {depth}) by document length, per re-ranker (TKL Fig. 1 style).")
    return sec
