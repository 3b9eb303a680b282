"""Sanity references of the report: what a trained reranker must beat before any other number matters.

- the expected nDCG@10 of a *random* order of the first stage's top k, computed exactly, at every rerank
  depth of the config (reference rows of the effectiveness table);
- a verdict of each trained reranker against the untrained lexical reranker ``query_term_matches`` (distinct query
  words over whole documents, at the global rerank depth), against its own floor (the same count over the words the
  model reads, at its own depth: ``query_term_matches@…``, src/longrank/retrieval/sanity.py), and a flag when it is
  not above the random-order expectation at its own depth;
- the weight an interpolation chose on dev (a weight of 0 in every fold means the run *is* the first stage's).
"""

from __future__ import annotations

import math
from pathlib import Path
from collections.abc import Mapping, Sequence

import pandas as pd

from longrank.errors import InputError
from longrank.io.trec_files import Run
from longrank.report.inputs import PRIMARY, default_first_stage, first_stages, interpolations, rerank_depth, stage_of
from longrank.config.model_entries import is_enabled, is_zero_shot
from longrank.report.verdicts import verdict_rows
from longrank.retrieval.sanity_floor import NAME as SANITY
from longrank.retrieval.sanity_floor import Floor
from longrank.runs import top_candidates
from longrank.tables import Cell, fmt, read_table

CUTOFF = 10  # of the primary measure


def stage_depths(inp) -> dict[str, list[int]]:
    """First stage -> the rerank depths of the enabled models on it (and the global depth, on the default one)."""
    default = default_first_stage(inp.config)
    depths: dict[str, set[int]] = {default: {rerank_depth(inp, "")}} if default else {}
    for m, spec in inp.models.items():
        if is_enabled(spec) and (stage := stage_of(inp, m)) is not None:
            depths.setdefault(stage, set()).add(rerank_depth(inp, m))
    order = list(first_stages(inp.config))
    return {s: sorted(depths[s]) for s in sorted(depths, key=lambda s: order.index(s) if s in order else len(order))}


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


def random_order_expectations(
    candidates: Run, qrels: Mapping[str, Mapping[str, int]], qids: Sequence[str], depths: Sequence[int]
) -> dict[int, float]:
    """Depth -> mean over ``qids`` of the expected nDCG@10 of a random order of the top ``depth`` candidates."""
    ranked = {q: top_candidates(candidates, q, len(candidates.get(q, {}))) for q in qids}
    return {
        k: sum(expected_random_ndcg(ranked[q], qrels.get(q, {}), k) for q in qids) / max(1, len(qids)) for k in depths
    }


def random_order(inp) -> dict[str, dict[int, float]]:
    """First stage -> depth -> the expectation on the report's evaluated test queries."""
    out = {}
    for stage, depths in stage_depths(inp).items():
        cands = inp.candidates(stage)
        if cands is not None:
            out[stage] = random_order_expectations(cands, inp.qrels, inp.evaluated_qids, depths)
    return out


def random_order_label(stage: str, k) -> str:
    return f"expected, random order of {stage}'s top {k}"


def random_order_rows(expected: Mapping[str, Mapping[int, float]], headers: Sequence[str], primary: str) -> list[list]:
    """Reference rows for the effectiveness table: only the nDCG@10 column holds a value; every other cell (the
    letter, the other measures, budgets, speeds, weights) says "–": the row is no system."""

    def cell(h: str, stage: str, k: int, v: float):
        if h == "System":
            return random_order_label(stage, k)
        return Cell(fmt(v) if h == primary else "–")

    return [
        [cell(h, stage, k, v) for h in headers] for stage, by_k in expected.items() for k, v in sorted(by_k.items())
    ]


def reference_note(inp) -> str:
    stages = list(first_stages(inp.config))
    if len(stages) == 1:
        fs = stages[0]
        label, its, combined, own = random_order_label(fs, "k"), f"{fs}'s", f"model+{fs}", f"{fs}'s own ranking"
    else:
        label, its = random_order_label("{first stage}", "k"), "that first stage's"
        combined, own = "model+{first stage}, the first stage it reranked", "the first stage's own ranking"
    return (
        f"Rows '{label}' are no system: each is the exact expected {PRIMARY} if {its} top k "
        f"(k a rerank depth of the config) were shuffled at random, the floor a reranker at that depth must clear. "
        f"{SANITY} ranks the default first stage's top {rerank_depth(inp, '')} (the global rerank depth) by the number "
        f"of distinct query words (stop words removed) in the whole document; {SANITY}@{{first stage}}-top{{k}}-first"
        f"{{n}}w counts them in the first n words only, over the top k a model reranks: the floor of a model that "
        f"reads n words at depth k (on long documents the whole-document count is partly a length prior, and the "
        f"count over the words a model reads can be far above it). "
        f"'w (dev)' is the model's weight in {combined}, chosen on dev queries (the mean over folds, each fold's in "
        f"brackets when they differ); w = 0 means the row is {own}."
    )


def interpolation_weights(inp) -> dict[str, list[float]]:
    """``{model}+{its first stage}`` -> the weight chosen on dev in each fold (its runs/*.interpolation.json)."""
    return {system: [f.weight for f in info.folds] for _, system, info in interpolations(inp)}


def weight_column(weights: Mapping[str, list[float]], extra: dict[str, dict], column: str = "w (dev)") -> list[str]:
    """Fill ``extra[system][column]`` with the mean chosen weight (and each fold's when they differ)."""
    for system, ws in weights.items():
        text = fmt(sum(ws) / len(ws), 2) + (f" ({', '.join(fmt(w, 2) for w in ws)})" if len(set(ws)) > 1 else "")
        extra.setdefault(system, {})[column] = text
    if weights:  # a system that interpolates nothing has no weight: "–" (not applicable), not an empty cell
        for cells in extra.values():
            cells.setdefault(column, "–")
    return [column] if weights else []


def zero_weight_verdicts(weights: Mapping[str, list[float]], label: str) -> dict[str, str]:
    """An interpolation that chose weight 0 in every fold ranks by the first stage alone: no test needed."""
    return {s: f"identical to {label}: weight 0 chosen on dev" for s, ws in weights.items() if all(w == 0 for w in ws)}


def own_floors(inp) -> dict[str, str]:
    """Trained model -> the system name of its own floor (the manifest's ``read_floors``: the run the sanity stage
    wrote for it, ``runs/{floor}.run``)."""
    return {m: Path(path).stem for m, path in inp.manifest.read_floors.items()}


def floor_pairs(inp) -> pd.DataFrame:
    """compare_floors' pairs: each model against its own floor, Holm-corrected among themselves only."""
    if inp.manifest.floor_pairs is None:
        return pd.DataFrame(columns=["measure", "system_a", "system_b"])
    return read_table(inp.manifest.floor_pairs)


def own_floor_label(inp, model: str, floor: Floor) -> str:
    """How the verdict names a model's own floor: the words it counts in, and the depth."""
    if floor.words is None:
        return f"the whole-document count at its depth {floor.depth} (it reads whole documents)"
    if (inp.resolved.get(model) or {}).get("on_pretrained_encoder"):  # its budget is in WordPiece tokens
        tokens = f"it reads {floor.words} WordPiece tokens"
        return f"the count over the first {floor.words} words ({tokens}), at depth {floor.depth}"
    return f"the count over the {floor.words} words it reads, at depth {floor.depth}"


def own_floor_cells(inp, pairs: pd.DataFrame, model: str, floor: str | None, primary: str, alpha: float) -> list:
    """[its floor, verdict, mean difference, Holm p] of ``model`` against the count over the words it reads."""
    if floor is None:
        return [Cell("–")] * 4
    if floor == SANITY:  # it reads whole documents of the default first stage at the global depth: no second floor
        same = f"the same as {SANITY}: it reads whole documents at the global depth"
        return [Cell(SANITY), Cell(same), Cell("–"), Cell("–")]
    parsed = Floor.parse(floor)
    if parsed is None:
        raise InputError(f"the read floor of {model}, {floor!r}, is neither {SANITY} nor a floor's name")
    rows = verdict_rows(pairs, primary, [(model, floor)], own_floor_label(inp, model, parsed), alpha)
    name = floor
    ranked = inp.run(floor)
    if ranked is not None and ranked == inp.run(SANITY):  # e.g. no candidate longer than what the model reads
        why = f": each candidate's first {parsed.words} words hold all the query words it has" if parsed.words else ""
        name += f" (ranks as {SANITY}{why})"
    return [Cell(name)] + (rows[0][1:] if rows else [Cell("–")] * 3)


def sanity_table(
    inp,
    table: pd.DataFrame,
    pairs: pd.DataFrame,
    systems: Sequence[str],
    primary: str,
    alpha: float,
    expected: Mapping[int, float],
    others: Mapping[str, Mapping[int, float]] | None = None,
) -> tuple[list[str], list[list]]:
    """Each trained reranker against ``query_term_matches`` and against its own floor (the manifest's
    ``read_floors``), by Holm-corrected Wilcoxon from compare's pairs and compare_floors' pairs (a family of their
    own), and against the random-order expectation
    at its own depth: ``expected`` (depth -> value) of the default first stage's candidates, ``others[stage]`` of
    another first stage's."""
    default = default_first_stage(inp.config)
    floors, own_pairs = own_floors(inp), floor_pairs(inp)
    means = table[table.measure == primary].set_index("system")["mean"]
    rows = []
    for s in trained_rerankers(inp, systems):
        vs = verdict_rows(pairs, primary, [(s, SANITY)], SANITY, alpha) if SANITY in systems else []
        k, stage = rerank_depth(inp, s), stage_of(inp, s)
        rand = (expected if stage in (None, default) else (others or {}).get(stage, {})).get(k)
        if rand is None or s not in means.index:
            flag = "–"
        elif means[s] > rand:
            flag = f"above random order of its top {k} ({fmt(float(means[s]))} > {fmt(rand)})"
        else:
            flag = f"NOT above random order of its top {k} ({fmt(float(means[s]))} ≤ {fmt(rand)})"
        own = own_floor_cells(inp, own_pairs, s, floors.get(s), primary, alpha)
        rows.append((vs[0] if vs else [s, Cell("–"), Cell("–"), Cell("–")]) + own + [Cell(flag)])
    headers = [
        "System",
        f"vs {SANITY} (whole documents, top {rerank_depth(inp, '')}) on {primary}",
        "Mean difference",
        "p (Wilcoxon, Holm)",
        "Own floor (the words it reads, its depth)",
        "vs own floor",
        "Mean difference vs own floor",
        "p vs own floor (Wilcoxon, Holm over these)",
        "vs random order",
    ]
    return headers, rows
