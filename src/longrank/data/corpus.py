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

import json
from collections.abc import Iterator, Mapping
from functools import cached_property
from pathlib import Path

from longrank.data.docstore import DocStore
from longrank.io.json_yaml import read_json
from longrank.io.trec_files import read_qrels
from longrank.io.text_records import read_tsv_dict


class Corpus:
    def __init__(self, data_dir: str | Path):
        self.dir = Path(data_dir)
        self.queries_dir = self.dir  # where queries.tsv, qrels.txt and folds.json are read (PseudoQueryCorpus: its set)
        self._vocabularies: dict = {}

    @cached_property
    def docs(self) -> Mapping[str, str]:
        """doc id -> text, read from disk by id (``data/docstore.py``): never the whole collection in memory."""
        return DocStore(self.dir / "docs.jsonl")

    @cached_property
    def queries(self) -> dict[str, str]:
        return read_tsv_dict(self.queries_dir / "queries.tsv")

    @cached_property
    def qrels(self) -> dict[str, dict[str, int]]:
        return read_qrels(self.queries_dir / "qrels.txt")

    @cached_property
    def folds(self) -> list[dict[str, list[str]]]:
        return read_json(self.queries_dir / "folds.json")

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
            # the collection's own queries, also under a pseudo-query view: pre-trained weights fit the fine-tuned model
            queries = read_tsv_dict(self.dir / "queries.tsv")
            self._vocabularies[key] = Vocabulary.load(
                self.dir / "word_doc_freq.tsv", self.stats["num_docs"], queries.values(), min_doc_freq, max_words
            )
        return self._vocabularies[key]

    def test_queries(self) -> list[str]:
        """Every query some fold tests on (all folds together cover the evaluated query set)."""
        return sorted({q for fold in self.folds for q in fold["test"]})


class PseudoQueryCorpus(Corpus):
    """The collection with a pseudo-query set (stage ``pseudo_queries``, ``train/pseudo_queries.py``) in place of
    its queries, judgments and folds, and each pseudo-query's positive read without the text the query came
    from (``overrides.jsonl``): what pre-training trains on. The vocabulary stays the collection's own."""

    def __init__(self, data_dir: str | Path, pseudo_dir: str | Path):
        super().__init__(data_dir)
        self.pseudo_dir = self.queries_dir = Path(pseudo_dir)

    @cached_property
    def docs(self) -> _Overridden:
        overrides = {}
        with open(self.pseudo_dir / "overrides.jsonl", encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                overrides[record["doc_id"]] = record["text"]
        return _Overridden(DocStore(self.dir / "docs.jsonl"), overrides)

    @cached_property
    def excluded(self) -> dict[str, set[str]]:
        return {}


class _Overridden(Mapping[str, str]):
    """A document store with some documents' texts replaced."""

    def __init__(self, store: DocStore, overrides: dict[str, str]):
        self.store, self.overrides = store, overrides

    def items_range(self, start: int, stop: int) -> Iterator[tuple[str, str]]:
        """Documents ``start`` to ``stop - 1`` of the store's order, as iterating gives them (a shard of a graph set
        built for pre-training, mir_graphs/graph_shards.py)."""
        for doc_id, text in self.store.items_range(start, stop):
            yield doc_id, self.overrides.get(doc_id, text)

    def __getitem__(self, doc_id: str) -> str:
        text = self.overrides.get(doc_id)
        return self.store[doc_id] if text is None else text

    def __contains__(self, doc_id) -> bool:
        return doc_id in self.store

    def __iter__(self):
        return iter(self.store)

    def __len__(self) -> int:
        return len(self.store)
