"""The prepared documents by id, without loading the collection: ``docs.jsonl`` (one ``{"doc_id", "text"}`` per
line, as the data stage writes it) plus ``docs.index.sqlite``, a table ``doc_id -> byte offset`` of each line.

A stage that scores a few thousand candidates reads those lines only (a B-tree lookup and a seek each); a stage
that must see every document (the vocabulary, BM25's index, word2vec, an impact index) streams the file once.
Either way memory does not grow with the collection's text: MS MARCO's 3.2M documents are ~22 GB of text,
which as one Python dict would not fit a 32 GB training job.

Why SQLite for the index: it is in the standard library, one file, a B-tree on disk that any number of jobs
may read at once (read-only connections), and it needs no size set in advance (lmdb's map size) and no second
index for random access by id (an Arrow file). The text stays in ``docs.jsonl``, which the word2vec stage and
users read as it is; the index is ~40 bytes per document.

The index records the size and modification time of the ``docs.jsonl`` it was built from; an index that does
not match its file (a data directory from before the index existed, or a ``docs.jsonl`` rewritten by hand) is
rebuilt on first use, atomically, so concurrent jobs never read a half-written index.
"""

from __future__ import annotations

import json
import os
import sqlite3
from itertools import islice
from typing import BinaryIO
from collections.abc import Iterator, Mapping
from pathlib import Path
from collections.abc import Iterable

from longrank.errors import InputError
from longrank.io.atomic import atomic_path
from longrank.io.ids import ID_RULE, id_problem

INDEX_NAME = "docs.index.sqlite"


def write_docs(path: str | os.PathLike, docs: Iterable[tuple[str, str]]) -> int:
    """Write ``docs`` (``(doc_id, text)`` pairs, streamed) to ``path`` (docs.jsonl) and its index beside it;
    returns the number written. A repeated doc id is an InputError naming it, and nothing is written."""
    path = Path(path)
    with atomic_path(path) as tmp_docs, atomic_path(path.parent / INDEX_NAME) as tmp_index:
        count = 0
        with open(tmp_docs, "wb") as f:

            def offsets():
                nonlocal count
                for doc_id, text in docs:
                    problem = id_problem(doc_id)  # ids from a source no reader of io.py checked (ir_datasets)
                    if problem is not None:
                        raise InputError(
                            f"document id {doc_id!r} (the collection's document {count + 1}) {problem}; {ID_RULE}"
                        )
                    yield doc_id, f.tell()
                    f.write((json.dumps({"doc_id": doc_id, "text": text}) + "\n").encode("utf-8"))
                    count += 1

            _write_index(tmp_index, offsets(), path)
        _stamp(tmp_index, tmp_docs)  # renaming keeps the size and time the stamp records
    return count


def _write_index(index: Path, offsets: Iterable[tuple[str, int]], docs: Path) -> None:
    index.unlink(missing_ok=True)
    db = sqlite3.connect(index)
    try:
        db.execute("CREATE TABLE docs (doc_id TEXT PRIMARY KEY, offset INTEGER NOT NULL) WITHOUT ROWID")
        for doc_id, offset in offsets:  # one statement per row, so that a repeated id is the one named
            try:
                db.execute("INSERT INTO docs VALUES (?, ?)", (doc_id, offset))
            except sqlite3.IntegrityError:
                raise InputError(f"duplicate document id {doc_id!r} in the collection ({docs.name})") from None
        db.commit()
    finally:
        db.close()


def _stamp(index: Path, docs: Path) -> None:
    stat = docs.stat()
    db = sqlite3.connect(index)
    try:
        db.execute("CREATE TABLE source (size INTEGER, mtime_ns INTEGER)")
        db.execute("INSERT INTO source VALUES (?, ?)", (stat.st_size, stat.st_mtime_ns))
        db.commit()
    finally:
        db.close()


def _stamp_matches(index: Path, docs: Path) -> bool:
    if not index.exists():
        return False
    try:
        db = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT size, mtime_ns FROM source").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return False
    stat = docs.stat()
    return row == (stat.st_size, stat.st_mtime_ns)


def _index_existing(docs: Path) -> None:
    """Build the index of a ``docs.jsonl`` written without one (one pass, offsets only)."""

    def offsets():
        with open(docs, "rb") as f:
            offset = 0
            for lineno, line in enumerate(f, start=1):
                try:
                    doc_id = json.loads(line)["doc_id"]
                except (ValueError, KeyError, TypeError):  # edited by hand, or not the data stage's file
                    raise InputError(
                        f"{docs}:{lineno}: expected a JSON object with doc_id and text, as the data stage "
                        "writes them; run the data stage again"
                    ) from None
                yield doc_id, offset
                offset += len(line)

    with atomic_path(docs.parent / INDEX_NAME) as tmp_index:
        _write_index(tmp_index, offsets(), docs)
        _stamp(tmp_index, docs)


class DocStore(Mapping[str, str]):
    """``doc_id -> text`` over ``docs.jsonl`` and its index: a read-only Mapping, so code written for a dict
    works unchanged. ``values()`` and ``items()`` stream the file in its order; ``keys()`` and iteration come
    from the index, in the same order. Connections are opened per process (safe across fork)."""

    def __init__(self, docs: str | os.PathLike):
        self.path = Path(docs)
        if not self.path.exists():
            raise InputError(f"file {self.path} not found; run the data stage first")
        self.index_path = self.path.parent / INDEX_NAME
        if not _stamp_matches(self.index_path, self.path):
            _index_existing(self.path)
        self._pid: int | None = None
        self._len: int | None = None

    def _open(self) -> tuple[sqlite3.Connection, BinaryIO]:
        if self._pid != os.getpid():
            self._db = sqlite3.connect(f"file:{self.index_path}?mode=ro", uri=True, check_same_thread=False)
            self._file = open(self.path, "rb")  # noqa: SIM115 (held open across reads, closed by close())
            self._pid = os.getpid()
        return self._db, self._file

    def __getitem__(self, doc_id: str) -> str:
        db, f = self._open()
        row = db.execute("SELECT offset FROM docs WHERE doc_id = ?", (doc_id,)).fetchone()
        if row is None:
            raise KeyError(doc_id)
        f.seek(row[0])
        return json.loads(f.readline())["text"]

    def __contains__(self, doc_id) -> bool:
        db, _ = self._open()
        return (
            isinstance(doc_id, str)
            and db.execute("SELECT 1 FROM docs WHERE doc_id = ?", (doc_id,)).fetchone() is not None
        )

    def __iter__(self) -> Iterator[str]:
        db, _ = self._open()
        for (doc_id,) in db.execute("SELECT doc_id FROM docs ORDER BY offset"):
            yield doc_id

    def __len__(self) -> int:
        if self._len is None:
            db, _ = self._open()
            self._len = db.execute("SELECT COUNT(*) FROM docs").fetchone()[0]
        return self._len

    def items(self) -> Iterator[tuple[str, str]]:  # type: ignore[override]  # streams the file, not a view
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                yield record["doc_id"], record["text"]

    def items_range(self, start: int, stop: int) -> Iterator[tuple[str, str]]:
        """Documents ``start`` to ``stop - 1`` of the file's order, as ``items()`` gives them: the file is read from
        the first one's offset (the index), not from its beginning (a shard of annotate, mir_graphs/annotate.py)."""
        db, _ = self._open()
        first = db.execute("SELECT offset FROM docs ORDER BY offset LIMIT 1 OFFSET ?", (start,)).fetchone()
        if first is None or stop <= start:
            return
        with open(self.path, "rb") as f:
            f.seek(first[0])
            for line in islice(f, stop - start):
                record = json.loads(line)
                yield record["doc_id"], record["text"]

    def values(self) -> Iterator[str]:  # type: ignore[override]  # streams the file, not a view
        return (text for _, text in self.items())

    def __getstate__(self):  # pickled into a worker process: reopen there
        return {"path": self.path, "index_path": self.index_path, "_pid": None, "_len": self._len}
