"""Relevance grades and the gains they count for: the config's ``dataset.gains`` map (grade -> gain, unlisted grades
keeping their value) checked when the workflow is parsed (config.py) and again by the data stage against the grades
the qrels really hold (data/data.py), which records the map it applied."""

from __future__ import annotations

from longrank.errors import InputError


def integer_grades(gains: dict) -> dict[str, int]:
    """Grade keys as integers, whether YAML read them as numbers (``{1: 4}``) or strings (``{"1": 4}``); written
    back as strings in grade order, as JSON (config.json, the data rule's parameter) keeps them."""
    grades = {}
    for key in gains:
        try:
            grades[int(str(key).strip())] = gains[key]
        except ValueError:
            raise InputError(
                f"config key dataset.gains.{key}: a grade must be an integer (the qrels' relevance "
                f"column), e.g. gains: {{1: 4, 2: 3}}; got {key!r}"
            ) from None
    return {str(g): grades[g] for g in sorted(grades)}


def gain_of(gains: dict, grade: int) -> int:
    """The gain a judgment of ``grade`` counts for: the map's, or the grade itself where the map lists none."""
    return gains.get(str(grade), grade)


def order_reversals(gains: dict, grades) -> list[tuple[int, int]]:
    """Pairs of ``grades`` (lower, higher) whose gains the map puts in the other order."""
    ordered = sorted(set(grades))
    return [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :] if gain_of(gains, a) > gain_of(gains, b)]


def check_gain_order(dataset: dict, grades=None, where: str = "config key dataset.gains") -> None:
    """A gain map that gives a lower grade more gain than a higher one is applied only where the description says
    so (``reverses_grades: true``, Cranfield's 1 = best): the same map over 0-3 graded judgments (TREC DL) would
    invert every graded measure without a word. ``grades``: the grades to check, by default the map's own (the data
    stage passes the grades the qrels hold, unlisted ones keeping their value)."""
    gains = dataset.get("gains") or {}
    reversals = order_reversals(gains, grades if grades is not None else map(int, gains))
    says = bool(dataset.get("reverses_grades"))
    if reversals and not says:
        lower, higher = reversals[0]
        raise InputError(
            f"{where}: grade {lower} gets gain {gain_of(gains, lower)} and the higher grade {higher} gets "
            f"{gain_of(gains, higher)}: the map reverses the grades' order. If the collection's best grade is its "
            "lowest (as Cranfield's 1), say so with dataset.reverses_grades: true; otherwise fix the map"
        )
    if says and not reversals and grades is None:
        raise InputError(
            f"{where}: dataset.reverses_grades is true but the map keeps the grades' order; "
            "set reverses_grades: false or fix the map"
        )


def relevance_record(dataset: dict, grades_seen: dict[int, int], excluded: int) -> dict:
    """What the data stage applied, for stats.json, its log and the report's provenance: the grade -> gain map over
    every grade the qrels hold (unlisted grades at their own value), the excluded grades and the judgments by grade."""
    gains = dataset.get("gains") or {}
    return {
        "gains": {
            str(g): gain_of(gains, g) for g in sorted(grades_seen) if g not in set(dataset.get("exclude_grades") or ())
        },
        "configured_gains": dict(gains),
        "exclude_grades": sorted(int(g) for g in dataset.get("exclude_grades") or ()),
        "excluded_judgments": excluded,
        "reverses_grades": bool(dataset.get("reverses_grades")),
        "judgments_by_grade": {str(g): grades_seen[g] for g in sorted(grades_seen)},
    }
