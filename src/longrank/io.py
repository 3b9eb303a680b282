"""File formats shared by every stage, and atomic writes so a failed job never leaves a file that looks complete.

Formats (all under ``results/{dataset}/``):
- TREC run: ``qid Q0 docid rank score tag`` (whitespace separated), ranked by score per query.
- qrels: TREC ``qid 0 docid grade``.
- ``*.tsv``: tab separated with a header row.
- ``*.json``: UTF-8 JSON.

One strict reader per format, used by every stage, for the files a user brings as for the ones a stage wrote:
TREC runs (``read_run``), qrels (``read_qrels``), ``id<TAB>text`` (``read_id_text_tsv``), JSON lines with an id
and text fields (``read_id_text_jsonl``) and TREC SGML documents (``read_trec_docs``). Each error names the file,
the line and what was expected. A UTF-8 byte-order mark at the start of a file is dropped. Ids are checked where
they are read (``check_id``): an id with whitespace would split into two columns of every run and qrels file
written from it, so it is refused there, with its file and line; an id read twice is named with its line.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import math
import numbers
import os
import re
import shutil
import stat
import tempfile
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Iterator, Mapping


class InputError(Exception):
    """Bad user input: the message names the offending key, file or id and what was expected."""


def load_yaml(stream):
    """``yaml.safe_load`` through libyaml's C parser where PyYAML has it, else the pure-Python parser: the same
    documents (one constructor, SafeLoader's), 8x faster on the config schema, which every config validation,
    dry run and test of a config reads."""
    import yaml

    return yaml.load(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


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
        with names_full_disk(path, tmp):
            yield tmp
            os.chmod(tmp, umask_mode())
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


@contextlib.contextmanager
def names_full_disk(path: str | os.PathLike, temporary: str | os.PathLike | None = None) -> Iterator[None]:
    """A full disk (ENOSPC, or a quota: EDQUOT) inside the block is raised naming the output being written, ``path``:
    ``write()`` and ``close()`` raise it without a file name (only ``open()`` has one), and the ``temporary`` name it
    is written under (a file, or a staging directory: its files are named under ``path``) would tell the user
    nothing. The error stays an ``OSError`` of the same errno (the stages' command line prints it as one line,
    ``longrank <stage>: error: no space left on the device writing <path>``)."""
    try:
        yield
    except OSError as err:
        if err.errno not in FULL_DISK:
            raise
        name = err.filename
        if name is None:
            name = str(path)
        elif temporary is not None and (name == str(temporary) or name.startswith(f"{temporary}{os.sep}")):
            name = str(path) + name[len(str(temporary)) :]
        if name == err.filename:
            raise
        raise OSError(err.errno, err.strerror or os.strerror(err.errno), name) from err


BOM = "\ufeff".encode("utf-8")
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


#: The longest line any reader takes: no document or query of text is a line of 256 MiB (a 150,000-word document is
#: about 1 MB), so a longer one is a file that is not text (zeros, a sparse file), refused before it fills memory.
MAX_LINE_BYTES = 256 * 2**20
#: The config key bounding a collection file's size (``dataset.max_file_gb``), named when a file passes it.
MAX_FILE_KEY = "dataset.max_file_gb"


def check_regular_file(path: str | os.PathLike, key: str | None = None) -> Path:
    """``path`` if it is a regular file (after symlinks); else an InputError naming the key (when given) and the
    file: a directory, a device (``/dev/zero`` reads without end), a named pipe (read once, with no size to
    check) or a socket is refused before a byte is read."""
    path = Path(path)
    where = f"{key}: " if key else ""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{where}file {path} not found") from None
    if stat.S_ISREG(mode):
        return path
    kind = next((name for test, name in _NOT_FILES if test(mode)), "not a regular file")
    if stat.S_ISDIR(mode):
        raise InputError(f"{where}{path} is a directory; expected a file")
    raise InputError(
        f"{where}{path} is {kind}, not a regular file; expected a file (a device or a named pipe has no size to "
        "check and may never end: write the text to a file; .gz files are read as they are)"
    )


_NOT_FILES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)


def check_file_size(path: str | os.PathLike, max_bytes: int | None, key: str = MAX_FILE_KEY) -> None:
    """An InputError naming the file and ``key`` when the regular file ``path`` is larger than ``max_bytes``."""
    size = Path(path).stat().st_size
    if max_bytes is not None and size > max_bytes:
        raise InputError(
            f"{path}: {_gb(size)} is larger than {key} ({_gb(max_bytes)}); raise {key} if this is the file you meant"
        )


def _gb(size: int) -> str:
    return f"{size / 1e9:.3g} GB"


def numbered_lines(path: str | os.PathLike, max_bytes: int | None = None) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a UTF-8 text file, gzip-compressed if it ends in ``.gz``. A line that is not
    UTF-8 or a file that is not gzip is an InputError naming the file and line (each line is decoded on its
    own, so the number is exact). Reads are bounded: a path that is not a regular file is refused before it is
    opened, and so is a file larger than ``max_bytes`` (``dataset.max_file_gb``); the bytes read (decompressed, for
    .gz) are counted, so a file that grows past it, or decompresses past it, is stopped there, and no line longer
    than ``MAX_LINE_BYTES`` is held."""
    path = check_regular_file(path)
    check_file_size(path, max_bytes)
    lineno, total = 0, 0
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
            while raw := f.readline(MAX_LINE_BYTES + 1):
                lineno += 1
                total += len(raw)
                if len(raw) > MAX_LINE_BYTES:
                    raise InputError(
                        f"{path}:{lineno}: a line longer than {MAX_LINE_BYTES // 2**20} MiB; expected lines of text "
                        "(is this a text file?)"
                    )
                if max_bytes is not None and total > max_bytes:
                    raise InputError(
                        f"{path}:{lineno}: the file grew (or decompressed) past {MAX_FILE_KEY} ({_gb(max_bytes)}) "
                        f"while it was read; raise {MAX_FILE_KEY} if this is the file you meant"
                    )
                if lineno == 1 and raw.startswith(BOM):  # editors on Windows write one; it is no part of the first id
                    raw = raw[len(BOM) :]
                yield lineno, raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"{path}:{lineno}: not UTF-8 text (byte {err.object[err.start]:#04x} at column {err.start + 1}); "
            "convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8`"
        ) from None
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
    return json.loads(check_regular_file(path).read_text(encoding="utf-8"))


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


def read_tsv_dict(path: str | os.PathLike, what: str = "row") -> dict[str, str]:
    """A two-column ``id<TAB>text`` file with a header row, as a dict (a stage's own ``queries.tsv``,
    ``doc_lengths.tsv``)."""
    return dict(read_id_text_tsv(path, what, header=True))


def read_id_text_tsv(
    path: str | os.PathLike, what: str, header: bool = False, text_required: bool = False, max_bytes: int | None = None
) -> Iterator[tuple[str, str]]:
    """``(id, text)`` of each non-blank ``id<TAB>text`` line (``header``: the first line names the columns). A line
    without a tab, an id that ``check_id`` refuses, an id given twice or (``text_required``) an empty text is an
    InputError naming the line; ``what`` names the records in the message (document, query)."""

    def records():
        for lineno, line in numbered_lines(path, max_bytes):
            if (header and lineno == 1) or not line.strip():
                continue
            rid, sep, text = line.rstrip("\r\n").partition("\t")
            if not sep:
                raise InputError(f"{path}:{lineno}: expected '{what} id<TAB>text', got {line.strip()[:80]!r}")
            yield lineno, check_id(rid, path, lineno, what), _text(text, path, lineno, what, text_required)

    return _each_id_once(records(), path, what)


def read_id_text_jsonl(
    path: str | os.PathLike,
    what: str,
    id_keys: list[str],
    text_keys: list[str],
    text_required: bool = False,
    max_bytes: int | None = None,
) -> Iterator[tuple[str, str]]:
    """``(id, text)`` of each non-blank line, a JSON object with the first of ``id_keys`` it has and any of
    ``text_keys`` (joined by newlines, in that order). Errors name the file, the line and the fields expected; an
    id that is null, an array or an object is named as such (not as a missing field)."""

    def records():
        for lineno, line in numbered_lines(path, max_bytes):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(
                    f"{path}:{lineno}: not valid JSON ({err.msg}); expected one JSON object per line"
                ) from None
            if not isinstance(rec, dict):
                raise InputError(
                    f"{path}:{lineno}: expected a JSON object with an id and a text field, got {type(rec).__name__}"
                )
            id_key = next((k for k in id_keys if k in rec), None)
            if id_key is None:
                raise InputError(f"{path}:{lineno}: no {what} id field; expected one of {id_keys}")
            rid = rec[id_key]
            if isinstance(rid, int) and not isinstance(rid, bool):
                rid = str(rid)  # a number written without quotes: its digits are the id
            if not isinstance(rid, str):  # null, true, 1.5, a list: no one id a writer meant
                kind = {type(None): "null", bool: "a JSON boolean", list: "a JSON array", dict: "a JSON object"}
                raise InputError(
                    f"{path}:{lineno}: the {what} id ({id_key!r}) is {kind.get(type(rid)) or json.dumps(rid)}"
                    "; expected a string (or an integer)"
                )
            if all(k not in rec for k in text_keys):
                raise InputError(f"{path}:{lineno}: no text field; expected {text_keys}")
            text = "\n".join(str(rec[k]) for k in text_keys if rec.get(k))
            yield lineno, check_id(rid, path, lineno, what), _text(text, path, lineno, what, text_required)

    return _each_id_once(records(), path, what)


def _text(text: str, path, lineno: int, what: str, required: bool) -> str:
    if required and not text.strip():
        raise InputError(
            f"{path}:{lineno}: this {what} has no text; expected words (give it a text or remove the line)"
        )
    return text


# TREC SGML: <DOC> ... </DOC> blocks, each with one <DOCNO>. Markup is a tag with a tag name (<TEXT>, </HEADLINE>,
# <F P=105>), never a lone '<' or '>' of the text ("a < b > c" keeps its signs).
_DOC_TAG = re.compile(r"<(/?)DOC(?:\s[^<>]*)?>", re.I)
_DOCNO = re.compile(r"<DOCNO>(.*?)</DOCNO>", re.S | re.I)
_MARKUP = re.compile(r"</?[A-Za-z][\w.:-]*(?:\s[^<>]*)?/?>")


def read_trec_docs(path: str | os.PathLike, max_bytes: int | None = None) -> Iterator[tuple[str, str]]:
    """``(docno, text)`` of each ``<DOC>`` block, streamed: the text between the tags with the DOCNO element and
    markup taken out. An unclosed or nested ``<DOC>``, a ``</DOC>`` that closes none, text outside every block, a
    block without exactly one ``<DOCNO>`` or a DOCNO given twice is an InputError naming the file and line."""

    def records():
        opened, parts = None, []  # the line of the open <DOC> and its text so far
        for lineno, line in numbered_lines(path, max_bytes):
            start = 0
            for tag in _DOC_TAG.finditer(line):
                between, start = line[start : tag.start()], tag.end()
                closing = tag.group(1) == "/"
                if opened is None:
                    _outside(path, lineno, between)
                    if closing:
                        raise InputError(f"{path}:{lineno}: </DOC> closes no <DOC>; expected <DOC> first")
                    opened, parts = lineno, []
                    continue
                if not closing:
                    raise InputError(
                        f"{path}:{lineno}: <DOC> inside the <DOC> opened at line {opened}; "
                        "expected </DOC> first (is that one missing its </DOC>?)"
                    )
                parts.append(between)
                yield opened, *_trec_doc(path, opened, "".join(parts))
                opened = None
            if opened is None:
                _outside(path, lineno, line[start:])
            else:
                parts.append(line[start:])
        if opened is not None:
            raise InputError(f"{path}:{opened}: this <DOC> is never closed; expected </DOC> before the end of the file")

    return _each_id_once(records(), path, "document")


def _outside(path, lineno: int, text: str) -> None:
    if text.strip():
        raise InputError(f"{path}:{lineno}: text outside a <DOC> block ({text.strip()[:60]!r}); expected <DOC>")


def _trec_doc(path, lineno: int, block: str) -> tuple[str, str]:
    docnos = _DOCNO.findall(block)
    if len(docnos) != 1:
        raise InputError(
            f"{path}:{lineno}: the <DOC> opened here has {len(docnos) or 'no'} <DOCNO> elements; "
            "expected one <DOCNO>id</DOCNO>"
        )
    docno = check_id(docnos[0].strip(), path, lineno, "document")
    return docno, _MARKUP.sub(" ", _DOCNO.sub(" ", block)).strip()


def _each_id_once(records: Iterator[tuple[int, str, str]], path, what: str) -> Iterator[tuple[str, str]]:
    """``(id, text)`` of ``(line, id, text)`` records; an id seen before in the file is an InputError naming it."""
    seen: set[str] = set()
    for lineno, rid, text in records:
        if rid in seen:
            raise InputError(
                f"{path}:{lineno}: duplicate {what} id {rid!r} (given earlier in the file); ids must be distinct"
            )
        seen.add(rid)
        yield rid, text


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


def link_or_copy(source: str, target: str) -> None:
    """A hard link where the file system allows one, else a copy (``shutil.copytree``'s ``copy_function``): for a
    finished checkpoint set, whose files are never written in place (a new set is a new folder, a finished one only
    loses files), so two folders holding the same set share its blocks."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
