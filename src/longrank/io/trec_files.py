"""TREC runs and qrels, one strict reader each for the files a user brings as for the ones a stage wrote:

- TREC run: ``qid Q0 docid rank score tag`` (whitespace separated), ranked by score per query (``read_run``,
  ``read_ranked_run`` for another system's run, ``write_run``).
- qrels: TREC ``qid 0 docid grade`` (``read_qrels``, ``write_qrels``).

Each error names the file, the line and what was expected; ids are checked as they are read (``longrank.io.ids``)."""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Iterator, Mapping

from longrank.errors import InputError
from longrank.io.atomic import write_text
from longrank.io.ids import ID_RULE, check_id, id_problem
from longrank.io.text_files import numbered_lines


Run = dict[str, dict[str, float]]  # query id -> doc id -> score


def ranked(scores: Mapping[str, float], first_stage: Mapping[str, float] | None = None) -> list[tuple[str, float]]:
    """``scores`` (doc id -> score) as a ranking: descending score, ties in ``first_stage``'s order (its own ranking,
    ``top_candidates``), then by doc id. A reranker that cannot tell documents apart (a query with no word it knows
    scores every document alike) leaves them as the first stage ranked them, not in doc-id order."""
    position = {} if first_stage is None else {d: i for i, d in enumerate(in_order(first_stage))}
    last = len(position)
    return sorted(scores.items(), key=lambda kv: (-kv[1], position.get(kv[0], last), kv[0]))


def in_order(scores: Mapping[str, float]) -> list[str]:
    """Doc ids by descending score, ties by doc id: a first stage's own ranking (``runs.top_candidates``)."""
    return [d for d, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]


def write_run(
    path: str | os.PathLike,
    run: Mapping[str, Mapping[str, float]],
    tag: str,
    first_stage: Mapping[str, Mapping[str, float]] | None = None,
) -> None:
    """Write a TREC run: per query, documents by descending score; ties in ``first_stage``'s order where the run
    reranks one (``ranked``), else by doc id for determinism."""
    lines = []
    problem = id_problem(tag)
    if problem is not None:  # the 6th column: a tag "my run" made a line of 7 columns, "x\ny" injected a line
        raise InputError(f"{path}: the run's tag {tag!r} {problem}; a tag is the 6th column of a TREC run")
    for qid in sorted(run):
        _check_written_ids(path, qid, run[qid])
        order = ranked(run[qid], None if first_stage is None else first_stage.get(qid, {}))
        for rank, (docid, score) in enumerate(order, start=1):
            lines.append(f"{qid} Q0 {docid} {rank} {score:.8g} {tag}\n")
    write_text(path, "".join(lines))


def _check_written_ids(path, qid: str, doc_ids) -> None:
    """Never write a run that reads back otherwise: an id with whitespace would shift its line's columns. The
    readers refuse such ids with their file and line; this names one that came another way."""
    bad = next((rid for rid in (qid, *doc_ids) if id_problem(rid) is not None), None)
    if bad is not None:
        raise InputError(
            f"{path}: cannot write id {bad!r} (query {qid!r}) into a TREC run: it {id_problem(bad)}; {ID_RULE}"
        )


def _fields(
    path: str | os.PathLike, expected: str, columns: int, max_bytes: int | None = None
) -> Iterator[tuple[int, list[str]]]:
    """``(line number, whitespace-separated fields)`` of each non-blank line; a line with another number of
    fields is an InputError naming the file, the line and ``expected``."""
    for lineno, line in numbered_lines(path, max_bytes):
        parts = line.split()
        if parts and len(parts) != columns:
            raise InputError(f"{path}:{lineno}: expected {expected}, got {line.strip()!r}")
        if parts:
            yield lineno, parts


def _run_lines(path: str | os.PathLike) -> Iterator[tuple[int, str, str, str, float]]:
    """``(line, query id, doc id, rank column, score)`` of each line of a TREC run, each checked: six columns, ids
    (``check_id``), a finite score, no document twice for a query."""
    seen: dict[str, set[str]] = defaultdict(set)
    for lineno, parts in _fields(path, "a TREC run line 'qid Q0 docid rank score tag'", 6):
        try:
            score = float(parts[4])
        except ValueError:
            raise InputError(f"{path}:{lineno}: the score (5th column) must be a number, got {parts[4]!r}") from None
        if not math.isfinite(score):
            raise InputError(f"{path}:{lineno}: the score (5th column) must be a finite number, got {parts[4]!r}")
        check_id(parts[0], path, lineno, "query")
        check_id(parts[2], path, lineno, "document")
        if parts[2] in seen[parts[0]]:
            raise InputError(f"{path}:{lineno}: document {parts[2]!r} is ranked twice for query {parts[0]!r}")
        seen[parts[0]].add(parts[2])
        yield lineno, parts[0], parts[2], parts[3], score


def read_run(path: str | os.PathLike) -> Run:
    """A TREC run as its scores (the project's own runs: ``write_run`` gives distinct ranks distinct scores). A run
    another system wrote is read with ``read_ranked_run``, which keeps its rank order."""
    run: Run = defaultdict(dict)
    for _, qid, docid, _, score in _run_lines(path):
        run[qid][docid] = score
    return dict(run)


#: how a run file's score relates to its rank column (``first_stages[].scores``)
SCORE_ORDERS = ("descending", "ascending")


def read_ranked_run(path: str | os.PathLike, scores: str = "descending", key: str = "scores") -> tuple[Run, int]:
    """A TREC run another system wrote, read as its writer meant: each query's documents in the order of the rank
    column (4th; a tie of ranks by score), which every stage after this one keeps. Returns the run and how many
    documents had the score of the one ranked above them.

    - ``scores: descending`` (TREC's convention): the score must fall as the rank grows; a score that rises is an
      InputError naming the line (a file whose 5th column is a rank or a distance would otherwise be read upside
      down). ``scores: ascending``: lower is better; the scores are negated.
    - Scores tied across ranks (a rank-only file writes one score for all) are made distinct in the rank order,
      each tied score moved toward the next lower score of its query (so the spread of the scores, which
      interpolation normalises, stays), or, where written scores could not tell them apart, replaced by minus the
      rank. trec_eval ignores the rank column and orders tied scores by document id: it would evaluate another
      ranking than the file's.
    ``key`` names the setting in messages (``first_stages.<name>.scores``)."""
    if scores not in SCORE_ORDERS:
        raise InputError(f"config key {key}: {scores!r} is not one of {list(SCORE_ORDERS)}")
    sign = -1.0 if scores == "ascending" else 1.0
    lines: dict[str, list[tuple[int, float, int, str]]] = defaultdict(list)
    for lineno, qid, docid, rank, score in _run_lines(path):
        try:
            position = int(rank)
        except ValueError:
            raise InputError(f"{path}:{lineno}: the rank (4th column) must be a whole number, got {rank!r}") from None
        lines[qid].append((position, sign * score, lineno, docid))
    run: Run = {}
    ties = 0
    for qid, entries in lines.items():
        ordered = sorted(entries, key=lambda e: (e[0], -e[1], e[2]))
        for before, after in zip(ordered, ordered[1:]):
            if after[1] > before[1]:
                raise InputError(
                    f"{path}:{after[2]}: the score rises with the rank for query {qid!r} (rank {before[0]} scores "
                    f"{sign * before[1]:g} at line {before[2]}, rank {after[0]} scores {sign * after[1]:g}); a TREC run's "
                    f"score falls as its rank grows. If this file's 5th column is a rank or a distance (lower is "
                    f"better), set {key}: ascending; if its rank column is wrong, write one rank (e.g. 0) on every "
                    "line: its scores then order it"
                )
        tied = sum(after[1] == before[1] for before, after in zip(ordered, ordered[1:]))
        ties += tied
        values = [e[1] for e in ordered]
        run[qid] = dict(zip((e[3] for e in ordered), _distinct(values) if tied else values))
    return run, ties


def _distinct(scores: list[float]) -> list[float]:
    """Non-increasing ``scores`` made strictly decreasing, in the same order, as they read back from a run
    (``write_run`` writes 8 significant digits): each run of equal scores spread evenly down toward the next lower
    score (below the last, by its gap to the one above, or 1); minus the rank where that cannot be written apart."""
    out = list(scores)
    i = 0
    while i < len(out):
        j = i
        while j + 1 < len(out) and scores[j + 1] == scores[i]:
            j += 1
        if j > i:
            high = scores[i]
            low = scores[j + 1] if j + 1 < len(scores) else high - max(abs(high - scores[i - 1]) if i else 0.0, 1.0)
            for k in range(i, j + 1):
                out[k] = high - (high - low) * (k - i) / (j - i + 1)
        i = j + 1
    written = [float(f"{s:.8g}") for s in out]
    if all(a > b for a, b in zip(written, written[1:])):
        return written
    return [-float(rank) for rank in range(1, len(scores) + 1)]


def read_qrels(path: str | os.PathLike, max_bytes: int | None = None) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for lineno, parts in _fields(path, "a TREC qrels line 'qid iter docid grade'", 4, max_bytes):
        try:
            grade = int(parts[3])
        except ValueError:
            raise InputError(f"{path}:{lineno}: relevance grade {parts[3]!r} is not an integer") from None
        check_id(parts[0], path, lineno, "query")
        check_id(parts[2], path, lineno, "document")
        if parts[2] in qrels[parts[0]] and qrels[parts[0]][parts[2]] != grade:
            raise InputError(
                f"{path}:{lineno}: document {parts[2]!r} is judged twice for query {parts[0]!r}, "
                f"with grades {qrels[parts[0]][parts[2]]} and {grade}"
            )
        qrels[parts[0]][parts[2]] = grade
    return dict(qrels)


def write_qrels(path: str | os.PathLike, qrels: Mapping[str, Mapping[str, int]]) -> None:
    lines = [f"{qid} 0 {docid} {grade}\n" for qid in sorted(qrels) for docid, grade in sorted(qrels[qid].items())]
    write_text(path, "".join(lines))
