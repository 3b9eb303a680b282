"""File formats shared by every stage, and atomic writes so a failed job never leaves a file that looks complete.

Formats (all under ``results/{dataset}/``):
- TREC run: ``qid Q0 docid rank score tag`` (whitespace separated), ranked by score per query.
- qrels: TREC ``qid 0 docid grade``.
- ``*.tsv``: tab separated with a header row.
- ``*.json``: UTF-8 JSON.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import shutil
import tempfile
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Iterator, Mapping


class InputError(Exception):
    """Bad user input: the message names the offending key, file or id and what was expected."""


def umask_mode(base: int = 0o666) -> int:
    """The mode ``open()`` (base 0666) or ``mkdir`` (base 0777) gives a new file: ``base`` less the process
    umask (read by setting it, so set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return base & ~mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` only if the block succeeds. The file
    gets the umask's permissions like any other output (``mkstemp`` makes it 0600, which would leave a report
    on a shared cluster file system readable by its writer only)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.chmod(tmp, umask_mode())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def numbered_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a UTF-8 text file, gzip-compressed if it ends in ``.gz``. A line that is not
    UTF-8 or a file that is not gzip is an InputError naming the file and line (each line is decoded on its
    own, so the number is exact)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"file {path} not found")
    lineno = 0
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):
                yield lineno, raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}:{lineno}: not UTF-8 text (byte {err.object[err.start]:#04x} at column {err.start + 1}); "
                         "convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8`") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise InputError(f"{path}: not a complete gzip file ({err}); its name ends in .gz") from None


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(obj):
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"cannot serialise {type(obj).__name__} to JSON")


def json_object(text: str, what: str) -> dict:
    """An inline JSON object given on a command line (a stage's settings), or an InputError naming ``what``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{what}: not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise InputError(f"{what}: expected a JSON object of settings, got {value!r}")
    return value


def read_json(path: str | os.PathLike):
    return json.loads(Path(path).read_text(encoding="utf-8"))


Run = dict[str, dict[str, float]]  # query id -> doc id -> score


def write_run(path: str | os.PathLike, run: Mapping[str, Mapping[str, float]], tag: str) -> None:
    """Write a TREC run: per query, documents by descending score (ties broken by doc id for determinism)."""
    lines = []
    for qid in sorted(run):
        ranked = sorted(run[qid].items(), key=lambda kv: (-kv[1], kv[0]))
        for rank, (docid, score) in enumerate(ranked, start=1):
            lines.append(f"{qid} Q0 {docid} {rank} {score:.8g} {tag}\n")
    write_text(path, "".join(lines))


def _fields(path: str | os.PathLike, expected: str, columns: int) -> Iterator[tuple[int, list[str]]]:
    """``(line number, whitespace-separated fields)`` of each non-blank line; a line with another number of
    fields is an InputError naming the file, the line and ``expected``."""
    for lineno, line in numbered_lines(path):
        parts = line.split()
        if parts and len(parts) != columns:
            raise InputError(f"{path}:{lineno}: expected {expected}, got {line.strip()!r}")
        if parts:
            yield lineno, parts


def read_run(path: str | os.PathLike) -> Run:
    run: Run = defaultdict(dict)
    for lineno, parts in _fields(path, "a TREC run line 'qid Q0 docid rank score tag'", 6):
        try:
            score = float(parts[4])
        except ValueError:
            raise InputError(f"{path}:{lineno}: the score (5th column) must be a number, got {parts[4]!r}") from None
        if not math.isfinite(score):
            raise InputError(f"{path}:{lineno}: the score (5th column) must be a finite number, got {parts[4]!r}")
        if parts[2] in run[parts[0]]:
            raise InputError(f"{path}:{lineno}: document {parts[2]!r} is ranked twice for query {parts[0]!r}")
        run[parts[0]][parts[2]] = score
    return dict(run)


def read_qrels(path: str | os.PathLike) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for lineno, parts in _fields(path, "a TREC qrels line 'qid iter docid grade'", 4):
        try:
            grade = int(parts[3])
        except ValueError:
            raise InputError(f"{path}:{lineno}: relevance grade {parts[3]!r} is not an integer") from None
        if parts[2] in qrels[parts[0]] and qrels[parts[0]][parts[2]] != grade:
            raise InputError(f"{path}:{lineno}: document {parts[2]!r} is judged twice for query {parts[0]!r}, "
                             f"with grades {qrels[parts[0]][parts[2]]} and {grade}")
        qrels[parts[0]][parts[2]] = grade
    return dict(qrels)


def write_qrels(path: str | os.PathLike, qrels: Mapping[str, Mapping[str, int]]) -> None:
    lines = [f"{qid} 0 {docid} {grade}\n" for qid in sorted(qrels) for docid, grade in sorted(qrels[qid].items())]
    write_text(path, "".join(lines))


def read_tsv_dict(path: str | os.PathLike) -> dict[str, str]:
    """Read a two-column ``id<TAB>text`` file with a header row."""
    out = {}
    with open(path, encoding="utf-8") as f:
        next(f, None)
        for line in f:
            key, _, value = line.rstrip("\n").partition("\t")
            out[key] = value
    return out


def replace_directory(new: Path, out: Path) -> None:
    """Put the complete directory ``new`` at ``out``; an existing ``out`` is moved aside first and removed
    only after the rename succeeded (put back if it failed)."""
    old = None
    if out.exists() or out.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
        os.rmdir(old)
        os.replace(out, old)
    try:
        os.replace(new, out)
    except BaseException:
        if old is not None:
            os.replace(old, out)
        raise
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()
