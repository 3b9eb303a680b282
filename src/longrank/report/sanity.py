"""Sanity references of the report: what a trained reranker must beat before any other number matters.

- the expected nDCG@10 of a *random* order of the first stage's top k, computed exactly, at every rerank
  depth of the config (reference rows of the effectiveness table);
- a verdict of each trained reranker against the untrained lexical reranker ``query_term_matches`` and a
  flag when it is not above the random-order expectation at its own depth;
- the weight an interpolation chose on dev (a weight of 0 in every fold means the run *is* the first stage's).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import pandas as pd

from longrank.io import Run, read_json
from longrank.report.tables import Cell, fmt
from longrank.report.verdicts import is_zero_shot, verdict_rows
from longrank.retrieval.lexical import NAME as SANITY
from longrank.scoring import top_candidates

CUTOFF, PRIMARY = 10, "nDCG@10"  # the report's primary measure


def first_stage(inp) -> str:
    # The schema fills in first_stage.method; a config.json without it comes from before the first stage had
    # a choice, when it was BM25.
    return (inp.config.get("first_stage") or {}).get("method") or "bm25"


def rerank_depth(inp, system: str) -> int:
    """How many first-stage candidates ``system`` scored: its own rerank_depth, else the global one (schema default 100)."""
    return int((inp.models.get(system) or {}).get("rerank_depth") or inp.config.get("rerank_depth") or 100)


def config_depths(inp) -> list[int]:
    """The global rerank depth and every enabled model's."""
    models = [m for m, spec in inp.models.items() if spec.get("enabled", True)]
    return sorted({rerank_depth(inp, "")} | {rerank_depth(inp, m) for m in models})


def trained_rerankers(inp, systems: Sequence[str]) -> list[str]:
    """Model rows that learned something: not +interpolation rows, not zero-shot (train.steps 0) models."""
    return [s for s in systems if s in inp.models and not is_zero_shot(inp.models[s])]


def expected_random_ndcg(ranked: Sequence[str], qrels: Mapping[str, int], k: int, cutoff: int = CUTOFF) -> float:
    """Exact E[nDCG@cutoff] when positions 1..k of ``ranked`` are shuffled uniformly and k+1.. keep their order.

    Each of the top k lands at each of positions 1..k with probability 1/k, so every position i <= min(cutoff, k)
    expects the mean gain of the top k; positions k+1..cutoff keep their document. Gain is the qrel grade
    (negative grades count 0), the linear gain of trec_eval's nDCG that ir_measures computes; the ideal DCG
    is the query's best possible from its qrels."""
    gain = [max(qrels.get(d, 0), 0) for d in ranked]
    discount = [1 / math.log2(i + 2) for i in range(cutoff)]
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:cutoff]
    idcg = sum(g * w for g, w in zip(ideal, discount))
    k = min(k, len(ranked))
    if idcg == 0 or k == 0:
        return 0.0
    shuffled = sum(gain[:k]) / k * sum(discount[: min(cutoff, k)])
    kept = sum(gain[i] * discount[i] for i in range(k, min(cutoff, len(ranked))))
    return (shuffled + kept) / idcg


def random_order_expectations(candidates: Run, qrels: Mapping[str, Mapping[str, int]], qids: Sequence[str],
                              depths: Sequence[int]) -> dict[int, float]:
    """Depth -> mean over ``qids`` of the expected nDCG@10 of a random order of the top ``depth`` candidates."""
    ranked = {q: top_candidates(candidates, q, len(candidates.get(q, {}))) for q in qids}
    return {k: sum(expected_random_ndcg(ranked[q], qrels.get(q, {}), k) for q in qids) / max(1, len(qids))
            for k in depths}


def random_order(inp) -> dict[int, float]:
    """The expectations on the report's evaluated test queries ({} when an input is missing)."""
    cands = inp.candidates()
    if cands is None or inp.qrels is None or inp.evaluated_qids is None:
        return {}
    return random_order_expectations(cands, inp.qrels, inp.evaluated_qids, config_depths(inp))


def random_order_label(inp, k) -> str:
    return f"expected, random order of {first_stage(inp)}'s top {k}"


def random_order_rows(inp, expected: Mapping[int, float], headers: Sequence[str], measures: Sequence[str],
                      primary: str) -> list[list]:
    """Reference rows for the effectiveness table: only the nDCG@10 column is filled (– in the other measures)."""
    def cell(h: str, k: int, v: float):
        if h == "System":
            return random_order_label(inp, k)
        return Cell(fmt(v) if h == primary else "–" if h in measures else "")
    return [[cell(h, k, v) for h in headers] for k, v in sorted(expected.items())]


def reference_note(inp) -> str:
    fs = first_stage(inp)
    return (f"Rows '{random_order_label(inp, 'k')}' are no system: each is the exact expected {PRIMARY} if {fs}'s top k "
            f"(k a rerank depth of the config) were shuffled at random, the floor a reranker at that depth must clear. "
            f"'w (dev)' is the model's weight in model+{fs}, chosen on dev queries (the mean over folds, each fold's in "
            f"brackets when they differ); w = 0 means the row is {fs}'s own ranking.")


def interpolation_weights(inp) -> dict[str, list[float]]:
    """``{model}+{first stage}`` -> the weight chosen on dev in each fold (runs/{model}.interpolation.json)."""
    runs = inp.root / "runs"
    out = {}
    for path in sorted(runs.glob("*.interpolation.json")) if runs.exists() else []:
        info = read_json(path)
        folds = [float(f["weight"]) for f in info.get("folds") or []]
        out[f"{path.name[: -len('.interpolation.json')]}+{first_stage(inp)}"] = folds or [float(info["weight"])]
    return out


def weight_column(weights: Mapping[str, list[float]], extra: dict[str, dict], column: str = "w (dev)") -> list[str]:
    """Fill ``extra[system][column]`` with the mean chosen weight (and each fold's when they differ)."""
    for system, ws in weights.items():
        text = fmt(sum(ws) / len(ws), 2) + (f" ({', '.join(fmt(w, 2) for w in ws)})" if len(set(ws)) > 1 else "")
        extra.setdefault(system, {})[column] = text
    return [column] if weights else []


def zero_weight_verdicts(weights: Mapping[str, list[float]], label: str) -> dict[str, str]:
    """An interpolation that chose weight 0 in every fold ranks by the first stage alone: no test needed."""
    return {s: f"identical to {label}: weight 0 chosen on dev" for s, ws in weights.items() if all(w == 0 for w in ws)}


def sanity_table(inp, table: pd.DataFrame, pairs: pd.DataFrame, systems: Sequence[str], primary: str, alpha: float,
                 expected: Mapping[int, float]) -> tuple[list[str], list[list]]:
    """Each trained reranker against ``query_term_matches`` (Holm-corrected Wilcoxon from compare's pairs) and
    against the random-order expectation at its own depth."""
    means = table[table.measure == primary].set_index("system")["mean"]
    rows = []
    for s in trained_rerankers(inp, systems):
        vs = verdict_rows(pairs, primary, [(s, SANITY)], SANITY, alpha) if SANITY in systems else []
        k = rerank_depth(inp, s)
        rand = expected.get(k)
        if rand is None or s not in means.index:
            flag = "–"
        elif means[s] > rand:
            flag = f"above random order of its top {k} ({fmt(float(means[s]))} > {fmt(rand)})"
        else:
            flag = f"NOT above random order of its top {k} ({fmt(float(means[s]))} ≤ {fmt(rand)})"
        rows.append((vs[0] if vs else [s, Cell("–"), Cell("–"), Cell("–")]) + [Cell(flag)])
    headers = ["System", f"vs {SANITY} on {primary}", "Mean difference", "p (Wilcoxon, Holm)", "vs random order"]
    return headers, rows
