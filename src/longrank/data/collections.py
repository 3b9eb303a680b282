"""Reading a collection: any ir_datasets id, or local files (the adapter IRLeD and your own data go through).

Local formats, chosen by file name:
- documents: ``.jsonl`` / ``.jsonl.gz`` (``{"doc_id", "text"}``; other field names via ``id_field`` /
  ``text_fields``), ``.tsv`` (``id<TAB>text``, no header), ``.trec`` / ``.sgml`` / anything else with
  ``<DOC><DOCNO>..</DOCNO> ... </DOC>`` blocks (all text inside the DOC, markup tags stripped)
- queries: ``.jsonl`` / ``.jsonl.gz`` (``{"query_id", "text"}``) or ``.tsv`` (``id<TAB>text``)
- qrels: TREC ``qid iter docid grade``

The formats' strict readers are in ``longrank.io`` (file, line and what was expected in every error); this module picks
one by file name and names the config key of a missing file.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from collections.abc import Iterator

from longrank.data.bundled import ir_datasets_cache, seed_ir_datasets_cache
from longrank.errors import InputError
from longrank.io.text_files import check_file_size, check_regular_file
from longrank.io.trec_files import read_qrels
from longrank.io.text_records import read_id_text_jsonl, read_id_text_tsv, read_trec_docs
from longrank.config.schema import schema_default

#: dataset.max_file_gb's default (the schema's): a local collection file larger than this is refused before it is
#: read. MS MARCO's documents are ~22 GB as one .tsv; /dev/zero or a sparse file of a terabyte is not a collection.
MAX_FILE_GB = schema_default("dataset.max_file_gb")


def _stem_suffix(path: Path) -> str:
    return Path(path.stem).suffix if path.suffix == ".gz" else path.suffix


def max_file_bytes(dataset: dict) -> int:
    """The byte bound of a collection file (``dataset.max_file_gb``)."""
    return int(dataset.get("max_file_gb", MAX_FILE_GB) * 1e9)


def read_local_docs(
    path: str | os.PathLike,
    id_field: str | None = None,
    text_fields: list[str] | None = None,
    max_bytes: int | None = int(MAX_FILE_GB * 1e9),
) -> Iterator[tuple[str, str]]:
    """``(doc id, text)`` of a local documents file, by its format (the readers of ``longrank.io.text_records``), reading at most
    ``max_bytes``."""
    path = Path(path)
    kind = _stem_suffix(path)
    if kind == ".jsonl":
        return read_id_text_jsonl(
            path,
            "document",
            [id_field] if id_field else ["doc_id", "docno", "id"],
            text_fields or ["text"],
            max_bytes=max_bytes,
        )
    if kind == ".tsv":
        return read_id_text_tsv(path, "document", max_bytes=max_bytes)
    return read_trec_docs(path, max_bytes)


def read_local_queries(
    path: str | os.PathLike,
    id_field: str | None = None,
    text_fields: list[str] | None = None,
    max_bytes: int | None = int(MAX_FILE_GB * 1e9),
) -> Iterator[tuple[str, str]]:
    """``(query id, text)`` of a local queries file. A query without text is an error naming its line: it would rank
    nothing and score 0 without a word (an empty document, by contrast, is dropped: ``dataset.empty_documents``)."""
    path = Path(path)
    kind = _stem_suffix(path)
    if kind == ".jsonl":
        return read_id_text_jsonl(
            path,
            "query",
            [id_field] if id_field else ["query_id", "qid", "id"],
            text_fields or ["text"],
            text_required=True,
            max_bytes=max_bytes,
        )
    if kind == ".tsv":
        return read_id_text_tsv(path, "query", text_required=True, max_bytes=max_bytes)
    raise InputError(f"dataset.queries: {path} must be .jsonl(.gz) or .tsv")


def local_file(dataset: dict, key: str) -> Path:
    """The path under ``dataset[key]``, which must be a regular file no larger than ``dataset.max_file_gb``: else an
    InputError naming the key, before a byte is read (paths are relative to the working directory). A device
    (``/dev/zero``) or a named pipe is refused: neither has a size to check, and the first reads without end."""
    path = Path(dataset[key])
    if not path.exists():
        raise InputError(
            f"dataset.{key}: file {path} not found (paths are relative to the working directory, {Path.cwd()})"
        )
    check_regular_file(path, f"dataset.{key}")
    try:
        check_file_size(path, max_file_bytes(dataset))
    except InputError as err:
        raise InputError(f"dataset.{key}: {err}") from None
    return path


@contextlib.contextmanager
def ir_datasets_downloads(dataset_id: str):
    """ir_datasets downloads a collection's files the first time they are read; offline, that ends in its raw
    ``RuntimeError('All download sources failed', ...)``. Say instead which collection, where its files go,
    and how to provide them."""
    try:
        yield
    except RuntimeError as err:
        if not err.args or err.args[0] != "All download sources failed":
            raise
        cache = ir_datasets_cache(dataset_id)
        failures = err.args[1] if len(err.args) > 1 and isinstance(err.args[1], list) else []
        sources = ", ".join(getattr(source, "url", str(source)) for source, *_ in failures) or "its sources"
        raise InputError(
            f"dataset.id: ir_datasets could not download {dataset_id!r} from {sources} (no network?). "
            f"Put its files in {cache} as ir_datasets caches them (https://ir-datasets.com/{dataset_id.split('/')[0]}.html "
            "lists the downloads), or set IR_DATASETS_HOME to a directory that holds them, then run again"
        ) from None


def load_ir_datasets(dataset_id: str, doc_fields: list[str] | None, query_field: str | None):
    """(docs iterator, queries iterator, qrels dict, qrels definitions) for an ir_datasets id. A collection
    shipped with the package (``data/bundled.py``: Cranfield) is copied into ir_datasets' cache first, so it
    is read offline."""
    import ir_datasets

    seed_ir_datasets_cache(dataset_id)
    try:
        ds = ir_datasets.load(dataset_id)
    except KeyError:
        raise InputError(f"dataset.id: {dataset_id!r} is not an ir_datasets id (see https://ir-datasets.com)") from None
    for part in ("docs", "queries", "qrels"):
        if not getattr(ds, f"has_{part}")():
            raise InputError(
                f"dataset.id: ir_datasets {dataset_id!r} has no {part}; pick a subset that has docs, queries and qrels"
            )
    doc_cls = ds.docs_cls()
    fields = doc_fields or [f for f in doc_cls._fields if f != "doc_id" and doc_cls.__annotations__.get(f) is str]
    bad = [f for f in fields if f not in doc_cls._fields]
    if bad:
        raise InputError(
            f"dataset.doc_fields: {bad} not in {dataset_id!r} documents; available: {list(doc_cls._fields)}"
        )
    q_fields = ds.queries_cls()._fields
    qf = query_field or ("text" if "text" in q_fields else "title")
    if qf not in q_fields:
        raise InputError(f"dataset.query_field: {qf!r} not in {dataset_id!r} queries; available: {list(q_fields)}")

    def docs():
        with ir_datasets_downloads(dataset_id):
            for d in ds.docs_iter():
                yield d.doc_id, "\n".join(getattr(d, f) for f in fields if getattr(d, f))

    def queries():
        with ir_datasets_downloads(dataset_id):
            for q in ds.queries_iter():
                yield q.query_id, getattr(q, qf)

    qrels: dict[str, dict[str, int]] = {}
    with ir_datasets_downloads(dataset_id):
        for qr in ds.qrels_iter():
            qrels.setdefault(qr.query_id, {})[qr.doc_id] = qr.relevance
    return docs(), queries(), qrels, ds.qrels_defs(), ds.docs_count()


def load_local(cfg: dict):
    for key in ("docs", "queries", "qrels"):
        if key not in cfg:
            raise InputError(f"dataset.{key}: a local collection needs docs, queries and qrels paths")
    limit = max_file_bytes(cfg)
    docs = read_local_docs(local_file(cfg, "docs"), cfg.get("id_field"), cfg.get("doc_fields"), limit)
    queries = read_local_queries(local_file(cfg, "queries"), None, cfg.get("query_fields"), limit)
    return docs, queries, read_qrels(local_file(cfg, "qrels"), limit), None, None


def read_field(dataset: dict, field: str) -> dict[str, str]:
    """doc id -> the ``field`` of each document (a title), from the configured source collection: its loader,
    reading that one field (pseudo-queries from titles, HDCT's title targets)."""
    if dataset.get("source", schema_default("dataset.source")) == "ir_datasets":
        docs, *_ = load_ir_datasets(dataset["id"], [field], dataset.get("query_field"))
    else:
        docs, *_ = load_local({**dataset, "doc_fields": [field]})
    return dict(docs)
