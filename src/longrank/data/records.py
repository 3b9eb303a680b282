"""Per-document JSON records in one SQLite table, ``<table>(doc_id TEXT PRIMARY KEY, record TEXT)``: the
annotations of stage ``annotate`` (``annotations.sqlite``) and the graphs of stage ``graphs`` (``graphs.sqlite``).

Why SQLite: as for the document store (``data/docstore.py``), one file that the model reads a few records of
per batch by id (a B-tree lookup each), from any number of processes at once (read-only connections), while the
stage writes it streaming, one document at a time, with memory that does not grow with the collection.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from collections.abc import Iterator

from longrank.errors import InputError
from longrank.io.json_yaml import read_json

GRAPHS = "graphs.sqlite"
SETTINGS = "settings.json"


class RecordWriter:
    """Writes records into a new table of a new file inside a stage's staging directory (a failed stage removes
    the directory, so the writer needs no journal of its own). Use as a context manager: records are committed
    when the block ends without an error."""

    def __init__(self, path: str | os.PathLike, table: str):
        self.path, self.table = Path(path), table
        self._db = sqlite3.connect(self.path)
        # a half-written file is never read (the staging directory is dropped), so durability buys nothing here
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA synchronous = OFF")
        self._db.execute(f"CREATE TABLE {table} (doc_id TEXT PRIMARY KEY, record TEXT)")

    def add(self, doc_id: str, record: dict) -> None:
        self.add_text(doc_id, json.dumps(record, separators=(",", ":")))

    def add_text(self, doc_id: str, text: str) -> None:
        """A record as another table stores it (``Records.rows``): copied as it is, never parsed and written again."""
        try:
            self._db.execute(f"INSERT INTO {self.table} VALUES (?, ?)", (doc_id, text))
        except sqlite3.IntegrityError:
            raise InputError(f"document {doc_id!r} given twice to {self.path}") from None

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self._db.commit()
        self._db.close()


class Records:
    """``doc_id -> record`` (a dict) of one table, read-only. The connection opens on first use in each process,
    so the reader can be pickled into DataLoader workers (``__getstate__``) and used across fork."""

    def __init__(self, path: str | os.PathLike, table: str, what: str, how_to_build: str):
        self.path, self.table, self.what = Path(path), table, what
        if not self.path.exists():
            raise InputError(f"{what} {self.path.parent}: {self.path.name} not found; {how_to_build}")
        self._pid: int | None = None
        self._db: sqlite3.Connection | None = None

    def _open(self) -> sqlite3.Connection:
        if self._db is None or self._pid != os.getpid():
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            self._pid = os.getpid()
        return self._db

    def __getitem__(self, doc_id: str) -> dict:
        row = self._open().execute(f"SELECT record FROM {self.table} WHERE doc_id = ?", (doc_id,)).fetchone()
        if row is None:
            raise InputError(
                f"{self.what} {self.path.parent} has no record of document {doc_id!r} "
                "(built for another collection, or before the document was added?)"
            )
        return json.loads(row[0])

    def __contains__(self, doc_id) -> bool:
        return (
            isinstance(doc_id, str)
            and self._open().execute(f"SELECT 1 FROM {self.table} WHERE doc_id = ?", (doc_id,)).fetchone() is not None
        )

    def __len__(self) -> int:
        return self._open().execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0]

    def __iter__(self) -> Iterator[str]:
        for (doc_id,) in self._open().execute(f"SELECT doc_id FROM {self.table} ORDER BY doc_id"):
            yield doc_id

    def rows(self) -> Iterator[tuple[str, str]]:
        """``(doc_id, record as stored)`` in the order they were written (the table's rowids: a writer only inserts)."""
        yield from self._open().execute(f"SELECT doc_id, record FROM {self.table} ORDER BY rowid")

    def __getstate__(self):  # pickled into a worker process: reopen there
        return {**self.__dict__, "_pid": None, "_db": None}


class GraphStore(Records):
    """A graph set directory (stage ``graphs``): ``store[doc_id]`` is the document's record (see
    ``mir_graphs/graphs.py``), ``store.settings`` the set's settings with the tokenizer's special ids."""

    def __init__(self, directory: str | os.PathLike):
        directory = Path(directory)
        super().__init__(directory / GRAPHS, "graphs", "graph set", "build it with `longrank graphs`")
        self.settings: dict = read_json(directory / SETTINGS)
