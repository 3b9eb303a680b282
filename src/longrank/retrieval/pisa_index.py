"""Stage ``pisa_index`` (rule ``pisa_index``): PISA's BM25 index of the collection for a first stage of method
``pisa``, built once per collection and index settings by streaming ``docs.jsonl`` line by line into PISA (memory does
not grow with the collection's text). The method itself (its settings, the index's manifest, retrieval from the index
for the ``candidates`` stage) is :mod:`longrank.retrieval.pisa`.

The index settings are the stemmer and BM25's k1 and b: the stemmer is applied when PISA parses documents, and PISA
keeps per-block score upper bounds (block-max WAND) and its compressed postings for one (k1, b), which it would
otherwise write into the index directory on the first query. Building writes everything into a temporary directory
beside the output, records :data:`~longrank.retrieval.pisa.MANIFEST` last, and renames the directory into place: an
index without its manifest is half-written and never read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from collections.abc import Iterator

from longrank.errors import InputError
from longrank.io.atomic import names_full_disk, replace_directory, umask_mode
from longrank.io.json_yaml import write_json
from longrank.retrieval.pisa import MANIFEST, MANIFEST_FORMAT, QUERY_ALGORITHM, Bm25sAnalyser, PisaSettings, engine

log = logging.getLogger(__name__)

#: documents PISA parses and inverts per batch (pyterrier-pisa's default): the index build's memory grows with the one
#: batch until it is full, then far more slowly (merging batches, the lexicon; benchmarks/scaling.py,
#: docs/studies/scaling.md)
BATCH_DOCUMENTS = 100_000
#: what retrieval reads: the term and document lexicons and, named bm25.k1-<k1>.b-<b>.*, the block-max data and the
#: compressed postings; the rest of what PISA writes while building (the forward index, the uncompressed postings
#: it compresses from) is removed from a finished index
_RETRIEVAL_FILES = {"fwd.termlex", "fwd.doclex", "pt_meta.json", MANIFEST}
_SCORED_FILES_PREFIX = "bm25."


def add_arguments(parser):
    parser.add_argument("--data", required=True, help="results/{dataset}/data (its docs.jsonl is streamed)")
    parser.add_argument(
        "--settings",
        required=True,
        help="the index settings as JSON (stemmer, k1, b: index_settings_of the first stage's entry)",
    )
    parser.add_argument("--threads", type=int, default=1, help="PISA's indexing threads")
    parser.add_argument("--out", required=True, help="the index directory, results/{dataset}/pisa/{first_stage}")


def run(args):
    settings = PisaSettings.from_spec(json.loads(args.settings), "pisa_index --settings")
    manifest = build_index(Path(args.data) / "docs.jsonl", settings, Path(args.out), threads=args.threads)
    log.info(
        "pisa index of %d documents in %.1f s, %.1f MB: %s",
        manifest["documents"],
        manifest["index_seconds"],
        manifest["index_bytes"] / 1e6,
        args.out,
    )


def build_index(docs_path: Path, settings: PisaSettings, out: Path, threads: int = 1) -> dict:
    """Index ``docs_path`` (the data stage's ``docs.jsonl``, streamed) for ``settings`` into ``out``, replacing
    whatever is there only once the new index is complete. Returns the manifest written into it."""
    pyterrier_pisa = engine()

    docs_path, out = Path(docs_path), Path(out)
    if not docs_path.exists():
        raise InputError(f"file {docs_path} not found; run the data stage first")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        with names_full_disk(out, tmp):  # a full disk names the output, not the staging name
            os.chmod(tmp, umask_mode(0o777))
            started = time.perf_counter()
            source = _DocStream(docs_path, Bm25sAnalyser.of(settings))
            index = pyterrier_pisa.PisaIndex(
                str(tmp),
                text_field="text",
                stemmer=settings.engine_stemmer(),
                threads=threads,
                batch_size=BATCH_DOCUMENTS,
                overwrite=True,
            )
            index.index(source)
            source.check_read_whole()
            inverted = time.perf_counter()
            # PISA writes the block-max data and the compressed postings for (k1, b) when a retriever first opens the
            # index: open one here, so that retrieval finds them and never writes into the index.
            index.bm25(
                k1=settings.k1, b=settings.b, num_results=1, query_algorithm=QUERY_ALGORITHM, query_weighted=True
            )
            for path in tmp.iterdir():
                if path.name not in _RETRIEVAL_FILES and not path.name.startswith(_SCORED_FILES_PREFIX):
                    path.unlink()
            manifest = {
                "format": MANIFEST_FORMAT,
                "settings": settings.index_settings(),
                "collection": {"path": str(docs_path), "size": source.size, "sha256": source.sha256.hexdigest()},
                "documents": source.count,
                "index_seconds": time.perf_counter() - started,
                "invert_seconds": inverted - started,
                "index_bytes": directory_bytes(tmp),
                "pyterrier_pisa": _version(),
            }
            write_json(tmp / MANIFEST, manifest)
            replace_directory(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return manifest


class _DocStream:
    """``docs.jsonl`` as pyterrier-pisa's ``{"docno", "text"}`` records, one line at a time, hashing the bytes it
    reads (the manifest's record of the collection) and counting documents.

    pyterrier-pisa reads it in a thread of its own that feeds PISA through a pipe: an error there only ends the
    pipe, and PISA indexes what came before it. So the stream keeps its error and whether it reached the end, and
    :meth:`check_read_whole` raises after indexing, before anything is renamed into place."""

    def __init__(self, path: Path, analyser=None):
        self.path = path
        self.analyse = analyser or (lambda text: text)
        self.sha256 = hashlib.sha256()
        self.count = 0
        self.size = 0
        self.error: BaseException | None = None
        self.finished = False

    def __iter__(self) -> Iterator[dict]:
        try:
            yield from self._records()
        except Exception as error:  # raised again in the indexing thread by check_read_whole
            self.error = error
            return
        self.finished = True

    def _records(self) -> Iterator[dict]:
        with open(self.path, "rb") as f:
            for lineno, line in enumerate(f, start=1):
                self.sha256.update(line)
                self.size += len(line)
                try:
                    record = json.loads(line)
                    doc_id, text = record["doc_id"], record["text"]
                except (ValueError, KeyError, TypeError):
                    raise InputError(
                        f"{self.path}:{lineno}: expected a JSON object with doc_id and text, as the data stage writes "
                        "them; run the data stage again"
                    ) from None
                self.count += 1
                if self.count % 100_000 == 0:
                    log.info("pisa: %d documents streamed", self.count)
                yield {"docno": doc_id, "text": self.analyse(text)}

    def check_read_whole(self) -> None:
        if self.error is not None:
            raise self.error
        if not self.finished:
            raise InputError(f"{self.path}: PISA stopped reading after {self.count} documents; the index is not built")
        if self.count == 0:
            raise InputError(f"{self.path}: no documents to index")


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def _version() -> str:
    import importlib.metadata

    return importlib.metadata.version("pyterrier-pisa")


def index_settings_of(spec: dict) -> dict:
    """The index settings of a resolved ``pisa`` entry: the pisa_index rule's parameter, so that changing them (and
    only them) rebuilds the index."""
    return PisaSettings.from_spec(spec, f"first_stages.{spec['name']}").index_settings()
