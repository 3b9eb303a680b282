"""NCG@k, Normalised Cumulative Gain (the TREC Deep Learning track's measure; the Conformer-Kernel paper's Table 1
reports NCG@100), which ir-measures 0.4.3 does not provide: the gains of a query's top ``k`` documents over the largest
sum of ``k`` gains its judgments allow. Gains are the judged grades (negative ones count 0), as nDCG's in trec_eval;
ties in score are broken as trec_eval breaks them (document id descending). A query without a positive judgment has
no NCG (metrics.per_query leaves such queries out for every measure)."""

from __future__ import annotations

import re
from collections.abc import Mapping

NAME = re.compile(r"NCG@([1-9]\d*)")


def cutoff(name: str) -> int | None:
    """k of a measure named ``NCG@k``; None for any other name."""
    match = NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def ncg(ranked: Mapping[str, float], judged: Mapping[str, int], k: int) -> float:
    """NCG@k of one query: ``ranked`` doc id -> score, ``judged`` doc id -> grade."""
    ideal = sum(sorted((g for g in judged.values() if g > 0), reverse=True)[:k])
    if ideal == 0:
        return float("nan")
    top = sorted(ranked.items(), key=lambda item: (item[1], item[0]), reverse=True)[:k]
    return sum(max(judged.get(doc, 0), 0) for doc, _ in top) / ideal
