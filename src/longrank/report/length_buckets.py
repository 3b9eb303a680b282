"""Section: the primary measure by the length of the query's relevant documents (TKL Fig. 2 style)."""

from __future__ import annotations

from longrank.evaluate.lengths import ndcg_by_bucket, query_length_buckets, relevant_median_length
from longrank.report import plots
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import PRIMARY, measure_missing


def section(ctx: Context) -> Section:
    inp, frames = ctx.inp, ctx.cmp.frames
    sec = Section(f"{PRIMARY} by document-length bucket")
    if PRIMARY not in next(iter(frames.values())).columns:
        return sec.not_run(measure_missing(inp, list(next(iter(frames.values())).columns)))
    qids = list(next(iter(frames.values())).index)
    med = relevant_median_length(inp.qrels, inp.lengths, qids)
    buckets = query_length_buckets(med, ctx.n_length_buckets)
    by_bucket = ndcg_by_bucket(frames, buckets, PRIMARY)
    png = plots.length_bucket_plot(by_bucket, list(frames), ctx.fig_dir / "fig_length_buckets.png", PRIMARY)
    sec.text(
        "Test queries are split into quantile buckets by the median length (words) of their relevant "
        "documents; bars are each system's mean nDCG@10 within a bucket."
    )
    sec.image(png, f"{PRIMARY} by median relevant-document length (TKL Fig. 2 style).")
    sec.table(
        ["Bucket (words)", "Queries", *frames],
        [[str(b), int(r["queries"]), *[float(r[s]) for s in frames]] for b, r in by_bucket.iterrows()],
    )
    return sec
