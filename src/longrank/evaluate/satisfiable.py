"""A measure no judgment can satisfy is refused once the judgments' gains are known: ``P(rel=5)@10`` over gains
0-2 counts no document relevant, and would show 0.0000 for every system without a word. Torch-free."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from longrank.errors import InputError


def relevance_level(measure: str) -> int | None:
    """The gain a measure counts as relevant when it names one (ir-measures' ``rel=`` parameter), else None."""
    import ir_measures

    from longrank.evaluate.ncg import cutoff

    if cutoff(measure):  # NCG@k (evaluate/ncg.py): no relevance level of its own
        return None
    level = dict(ir_measures.parse_measure(measure).params).get("rel")
    return level if isinstance(level, int) else None


def check_satisfiable(measures: Iterable[str], qrels: Mapping[str, Mapping[str, int]], where: str) -> None:
    """Refuse a measure whose relevance level is above every gain the judgments ``qrels`` hold, naming the measure
    and the gains present."""
    gains = sorted({int(g) for judged in qrels.values() for g in judged.values()})
    for measure in measures:
        level = relevance_level(measure)
        if level is not None and (not gains or level > gains[-1]):
            raise InputError(
                f"evaluation.measures: {measure} counts a document relevant at gain {level} or more, and the judgments "
                f"of {where} hold the gains {', '.join(map(str, gains)) or 'none'}: no judgment satisfies it, so "
                "every system would score 0; use a relevance level the judgments have (or map grades to gains with "
                "dataset.gains)"
            )
