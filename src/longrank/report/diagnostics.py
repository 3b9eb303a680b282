"""What a reranker's scores follow: per query, the Spearman correlation of its scores over the candidates it
scored with document length, the number of distinct query terms matched, and the first-stage score.

A model can beat nothing and still look busy; these correlations say what it ranks by. A model that
learned "short documents first" shows a strongly negative length correlation and little match correlation.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from longrank.io.trec_files import Run
from longrank.io.text_records import read_tsv_dict
from longrank.report.context import Context
from longrank.report.html import Section
from longrank.report.inputs import rerank_depth
from longrank.report.sanity_references import SANITY
from longrank.retrieval.sanity import match_counts, read_docs
from longrank.runs import top_candidates

FEATURES = ["length", "matches", "first_stage"]


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rho; NaN where undefined (fewer than 2 pairs or a constant input)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    with warnings.catch_warnings():  # NaN stays NaN; nothing else to warn about
        warnings.simplefilter("ignore")
        return float(stats.spearmanr(x, y).statistic)


def score_correlations(
    run: Run,
    candidates: Run,
    qids: Sequence[str],
    depth: int,
    lengths: pd.Series,
    matches: Mapping[str, Mapping[str, int]],
) -> dict[str, tuple[float, int]]:
    """Feature -> (mean per-query Spearman rho of the run's scores with it, queries it is defined on).

    Only the query's top-``depth`` candidates count: the ones the system scored (below them a run keeps the
    first stage's order, which would say nothing about the model)."""
    per_query: dict[str, list[float]] = {f: [] for f in FEATURES}
    for q in qids:
        docs = [d for d in top_candidates(candidates, q, depth) if d in run.get(q, {})]
        scores = [run[q][d] for d in docs]
        with_len = [i for i, d in enumerate(docs) if d in lengths.index]  # lengths of every doc, normally
        features = {
            "length": ([scores[i] for i in with_len], [lengths[docs[i]] for i in with_len]),
            "matches": (scores, [matches.get(q, {}).get(d, 0) for d in docs]),
            "first_stage": (scores, [candidates[q][d] for d in docs]),
        }
        for f, (s, x) in features.items():
            rho = spearman(s, x)
            if not np.isnan(rho):
                per_query[f].append(rho)
    return {f: (float(np.mean(v)) if v else float("nan"), len(v)) for f, v in per_query.items()}


def section(ctx: Context) -> Section:
    inp = ctx.inp
    sec = Section("Diagnostics: what the scores follow")
    systems = ctx.cmp.systems
    stages = list(inp.first_stages)
    qids, data = inp.evaluated_qids, inp.manifest.data
    # Rerankers (not +interpolation rows), with the lexical sanity row and the first stages themselves for reference.
    names = [*stages, SANITY] + [s for s in systems if s in inp.models]
    runs = {s: inp.candidates(s) if s in stages else inp.run(s) for s in dict.fromkeys(names)}
    runs = {s: r for s, r in runs.items() if r is not None}
    depths = {s: rerank_depth(inp, s) for s in runs}
    stage = {s: inp.stage_of(s) for s in runs}
    # Each system is read over the candidates of the first stage it ranks, with that first stage's scores.
    deepest = {fs: max(depths[s] for s in runs if stage[s] == fs) for fs in dict.fromkeys(stage.values())}
    wanted = {d for fs, depth in deepest.items() for q in qids for d in top_candidates(inp.candidates(fs), q, depth)}
    queries = read_tsv_dict(data["queries.tsv"])
    docs = read_docs(data["docs.jsonl"], wanted)
    matches = {fs: match_counts(queries, docs, inp.candidates(fs), qids, depth) for fs, depth in deepest.items()}
    rows = []
    for s, run in runs.items():
        corr = score_correlations(run, inp.candidates(stage[s]), qids, depths[s], inp.lengths, matches[stage[s]])
        rows.append([s, depths[s], *[v for f in FEATURES for v in (corr[f][0], corr[f][1])]])
    sec.howto(
        "Mean over test queries of the Spearman correlation between a system's scores and a property of the "
        "candidates it scored (its top rerank-depth first-stage candidates); a query where the correlation is "
        "undefined (a constant score or property) is left out, and 'queries' says how many count. A strongly "
        "negative length correlation with a near-zero match correlation means the model learned a length "
        "shortcut (short documents first) rather than matching the query. "
        f"Matched terms: distinct query terms (stop words removed) in the document, what {SANITY} ranks by."
    )
    score = f"ρ {stages[0]} score" if len(stages) == 1 else "ρ first-stage score"
    sec.table(
        ["System", "Depth", "ρ length (words)", "queries", "ρ matched query terms", "queries", score, "queries"], rows
    )
    return sec
