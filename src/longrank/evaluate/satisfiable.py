"""Stage ``satisfiable``: a measure no judgment can satisfy is refused once the judgments' gains are known.
``P(rel=5)@10`` over gains 0-2 counts no document relevant, and would show 0.0000 for every system without a word.

The workflow runs this stage right after the data stage, at the highest priority, and every training waits for it
(through an ``ancient`` input, so that changing the measures reruns this check and the evaluations, never a training):
a config asking for such a measure stops seconds after the data is read, before any model trains. The evaluate stage
checks again (it can be run alone). Torch-free."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterable, Mapping

from longrank.errors import InputError
from longrank.io.json_yaml import write_json
from longrank.io.trec_files import read_qrels

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--qrels", required=True, help="the prepared data's TREC qrels")
    parser.add_argument("--measures", nargs="+", required=True, help="ir_measures names (evaluation.measures)")
    parser.add_argument("--out", required=True, help="JSON: the measures checked and the gains the judgments hold")


def run(args: argparse.Namespace) -> None:
    gains = check_satisfiable(args.measures, read_qrels(args.qrels), args.qrels)
    write_json(args.out, {"measures": list(args.measures), "gains": gains})
    log.info("every measure (%s) can be satisfied by the judgments' gains %s", ", ".join(args.measures), gains)


def relevance_level(measure: str) -> int | None:
    """The gain a measure counts as relevant when it names one (ir-measures' ``rel=`` parameter), else None."""
    import ir_measures

    from longrank.evaluate.ncg import cutoff

    if cutoff(measure):  # NCG@k (evaluate/ncg.py): no relevance level of its own
        return None
    level = dict(ir_measures.parse_measure(measure).params).get("rel")
    return level if isinstance(level, int) else None


def check_satisfiable(measures: Iterable[str], qrels: Mapping[str, Mapping[str, int]], where: str) -> list[int]:
    """Refuse a measure whose relevance level is above every gain the judgments ``qrels`` hold, naming the measure
    and the gains present; returns those gains, ascending."""
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
    return gains
