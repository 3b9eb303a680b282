"""The prepared collection of one dataset, as the ``data`` stage wrote it under ``results/{dataset}/data/``:

- ``docs.jsonl``: one ``{"doc_id", "text"}`` per line, and ``docs.index.sqlite``: its lines by doc id
- ``queries.tsv``: ``query_id<TAB>text`` (already formulated: long queries cut to terms)
- ``qrels.txt``: TREC qrels, gains already mapped (> 0 relevant)
- ``folds.json``: ``[{"train": [...], "dev": [...], "test": [...]}, ...]`` (one entry unless k-fold)
- ``doc_lengths.tsv``: ``doc_id<TAB>words``
- ``excluded.tsv``: ``query_id<TAB>doc_id`` documents taken out of that query's rankings (``dataset.exclude_grades``)
- ``word_doc_freq.tsv``: ``word<TAB>doc_freq``, every word of the documents (the word models' vocabulary)
- ``stats.json``: counts and length statistics
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from longrank.data.docstore import DocStore
from longrank.io import read_json, read_qrels, read_tsv_dict


class Corpus:
    def __init__(self, data_dir: str | Path):
        self.dir = Path(data_dir)
        self._vocabularies: dict = {}

    @cached_property
    def docs(self) -> DocStore:
        """doc id -> text, read from disk by id (``data/docstore.py``): never the whole collection in memory."""
        return DocStore(self.dir / "docs.jsonl")

    @cached_property
    def queries(self) -> dict[str, str]:
        return read_tsv_dict(self.dir / "queries.tsv")

    @cached_property
    def qrels(self) -> dict[str, dict[str, int]]:
        return read_qrels(self.dir / "qrels.txt")

    @cached_property
    def folds(self) -> list[dict[str, list[str]]]:
        return read_json(self.dir / "folds.json")

    @cached_property
    def doc_lengths(self) -> dict[str, int]:
        return {k: int(v) for k, v in read_tsv_dict(self.dir / "doc_lengths.tsv").items()}

    @cached_property
    def excluded(self) -> dict[str, set[str]]:
        """Per query, the documents no ranking may contain (absent file: none, as data written before it)."""
        path = self.dir / "excluded.tsv"
        out: dict[str, set[str]] = {}
        if path.exists():
            with open(path, encoding="utf-8") as f:
                next(f, None)
                for line in f:
                    qid, _, doc_id = line.rstrip("\n").partition("\t")
                    out.setdefault(qid, set()).add(doc_id)
        return out

    @cached_property
    def stats(self) -> dict:
        return read_json(self.dir / "stats.json")

    def word_vocabulary(self, min_doc_freq: int = 1, max_words: int | None = None):
        """The word vocabulary of documents + queries, read from ``word_doc_freq.tsv`` with the filters of
        ``Vocabulary.from_doc_freq`` (one per filter setting; models of the same setting share it)."""
        from longrank.data.words import Vocabulary

        key = (min_doc_freq, max_words)
        if key not in self._vocabularies:
            self._vocabularies[key] = Vocabulary.load(self.dir / "word_doc_freq.tsv", self.stats["num_docs"],
                                                      self.queries.values(), min_doc_freq, max_words)
        return self._vocabularies[key]

    def test_queries(self) -> list[str]:
        """Every query some fold tests on (all folds together cover the evaluated query set)."""
        return sorted({q for fold in self.folds for q in fold["test"]})
