"""Document and query ids, checked where they are read (``check_id``) and written: an id with whitespace would
split into two columns of every run and qrels file written from it, so it is refused there, with its file and
line."""

from __future__ import annotations

import numbers
import os
import re

from longrank.errors import InputError


_WHITESPACE = re.compile(r"\s")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # Unicode's control characters (category Cc), exactly


def id_problem(identifier) -> str | None:
    """Why ``identifier`` cannot be a document or query id, or None: the one id check of every stage,
    for the ids a reader reads (``check_id``), the ones a run file brings (``read_run``), the ones an ir_datasets
    collection gives (the docstore) and the ones written (``write_run``). An id is a column of TREC run and qrels
    files, so it must be non-empty and without whitespace ("d 1" would read back as two columns); a control
    character (NUL, ESC, DEL, ...) is invisible in every table and log and ends a C string. Ids a table reader
    would turn into something else ('NA', 'nan', 'null', '001') are accepted: every table with ids is read as
    strings with no missing-value conversion (``longrank.tables.read_id_table``)."""
    if not isinstance(identifier, str):
        return f"is {type(identifier).__name__} {identifier!r}, not text"
    if not identifier:
        return "is empty"
    if _WHITESPACE.search(identifier):
        return "is not one word"
    bad = _CONTROL.search(identifier)
    if bad is not None:
        return f"holds the control character {bad.group()!r}"
    return None


ID_RULE = (
    "ids are columns of TREC run and qrels files, so they must be non-empty, without whitespace or control characters"
)


def check_id(identifier: str, path: str | os.PathLike, lineno: int, what: str) -> str:
    """``identifier`` if it can be an id (``id_problem``), else an InputError naming the file, the line and the id."""
    problem = id_problem(identifier)
    if problem is not None:
        raise InputError(f"{path}:{lineno}: {what} id {identifier!r} {problem}; {ID_RULE}")
    return identifier


def column_ids(values, what: str, where: str) -> list[str]:
    """The ids of a table column another program gave (a PyTerrier frame's ``qid`` / ``docno``), each checked as
    ``check_id`` checks a file's: an integer is its digits; a missing value (NaN, None), a float or anything else
    that is no id is an InputError naming the row (``astype(str)`` made NaN the id 'nan')."""
    out = []
    for row, value in enumerate(values):
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            value = str(value)
        problem = id_problem(value)
        if problem is not None:
            raise InputError(f"{where}: row {row}: {what} id {value!r} {problem}; {ID_RULE}")
        out.append(value)
    return out
