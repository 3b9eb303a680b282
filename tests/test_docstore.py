"""The on-disk document store: documents by id from docs.jsonl and its SQLite index, the same mapping a dict
gave, rebuilt when the index does not match its file, usable from worker processes."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import re

import pytest

from longrank.data.corpus import Corpus
from longrank.data.docstore import INDEX_NAME, DocStore, write_docs
from longrank.data.data import prepare
from longrank.errors import InputError

from conftest import synthetic_collection, write_local_collection

DOCS = [("d2", "second document"), ("d1", "first, with unicode: Hofstätter 東京"), ("d3", "third\nwith a newline")]


def test_the_store_reads_like_the_dict_it_replaces(tmp_path):
    assert write_docs(tmp_path / "docs.jsonl", iter(DOCS)) == 3
    store = DocStore(tmp_path / "docs.jsonl")
    assert dict(store) == dict(DOCS) and list(store) == ["d2", "d1", "d3"] and len(store) == 3  # the source's order
    assert list(store.items()) == DOCS and list(store.values()) == [t for _, t in DOCS]
    assert store["d1"] == dict(DOCS)["d1"] and "d3" in store and "d4" not in store and 3 not in store
    with pytest.raises(KeyError):
        store["d4"]
    assert {"d1", "d4"} - store.keys() == {"d4"}
    assert sorted(os.listdir(tmp_path)) == ["docs.index.sqlite", "docs.jsonl"]


def test_a_repeated_id_is_an_error_and_leaves_the_earlier_files(tmp_path):
    write_docs(tmp_path / "docs.jsonl", iter(DOCS))
    before = {name: (tmp_path / name).read_bytes() for name in ("docs.jsonl", INDEX_NAME)}
    with pytest.raises(InputError, match=r"duplicate document id 'd1'"):
        write_docs(tmp_path / "docs.jsonl", iter(DOCS + [("d1", "again")]))
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    assert sorted(os.listdir(tmp_path)) == ["docs.index.sqlite", "docs.jsonl"]


@pytest.mark.parametrize("bad", ["d 4", "d\t4", "", "d\x004", "d\x1b4"])
def test_an_id_that_would_shift_a_run_file_s_columns_is_refused_and_leaves_the_earlier_files(tmp_path, bad):
    """Local files are checked by their readers (io.py, with file and line); ids from another source (ir_datasets)
    are checked here, before any is written."""
    write_docs(tmp_path / "docs.jsonl", iter(DOCS))
    before = {name: (tmp_path / name).read_bytes() for name in ("docs.jsonl", INDEX_NAME)}
    with pytest.raises(
        InputError,
        match=rf"document id {re.escape(repr(bad))} \(the collection's document 4\) (is empty|is not one word|holds the "
        r"control character)",
    ):
        write_docs(tmp_path / "docs.jsonl", iter(DOCS + [(bad, "text")]))
    assert {name: (tmp_path / name).read_bytes() for name in before} == before


def test_a_docs_file_edited_into_another_shape_is_named_with_its_line(tmp_path):
    write_docs(tmp_path / "docs.jsonl", iter(DOCS))
    with open(tmp_path / "docs.jsonl", "a") as f:
        f.write('{"id": "d4", "text": "no doc_id"}\n')  # the index no longer matches: it is rebuilt, and refused
    with pytest.raises(InputError, match=r"docs.jsonl:4: expected a JSON object with doc_id and text"):
        DocStore(tmp_path / "docs.jsonl")


def test_an_index_that_does_not_match_its_file_is_rebuilt(tmp_path):
    write_docs(tmp_path / "docs.jsonl", iter(DOCS))
    (tmp_path / "docs.jsonl").write_text('{"doc_id": "new", "text": "rewritten by hand"}\n')
    assert dict(DocStore(tmp_path / "docs.jsonl")) == {"new": "rewritten by hand"}
    (tmp_path / INDEX_NAME).unlink()  # a data directory written before the index existed
    assert DocStore(tmp_path / "docs.jsonl")["new"] == "rewritten by hand"
    (tmp_path / INDEX_NAME).write_bytes(b"not a database")
    assert DocStore(tmp_path / "docs.jsonl")["new"] == "rewritten by hand"


def _read_in_child(store, doc_id, queue):
    queue.put(store[doc_id])


@pytest.mark.stage
def test_the_store_works_in_forked_and_spawned_workers(tmp_path):
    write_docs(tmp_path / "docs.jsonl", iter(DOCS))
    store = DocStore(tmp_path / "docs.jsonl")
    assert store["d2"] == "second document"  # opened in the parent before the fork
    for method in ("fork", "spawn"):
        context = multiprocessing.get_context(method)
        queue = context.Queue()
        child = context.Process(target=_read_in_child, args=(store, "d3", queue))
        child.start()
        assert queue.get(timeout=60) == "third\nwith a newline"
        child.join()
    assert pickle.loads(pickle.dumps(store))["d1"] == dict(DOCS)["d1"]


def test_prepare_streams_documents_into_the_store_and_writes_nothing_on_failure(tmp_path):
    docs, queries, qrels = synthetic_collection()
    dataset = write_local_collection(tmp_path / "src", {**docs, "blank": "  "}, queries, qrels)
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.25, "test": 0.25}, tmp_path / "data")
    corpus = Corpus(tmp_path / "data")
    assert isinstance(corpus.docs, DocStore) and dict(corpus.docs) == docs  # the empty document dropped
    assert corpus.doc_lengths == {d: len(t.split()) for d, t in docs.items()}
    bad = write_local_collection(tmp_path / "bad", docs, {**queries, "q ghost": "wing"}, qrels)
    with pytest.raises(InputError, match="'q ghost' is not one word"):
        prepare(bad, {"method": "full"}, {"method": "holdout"}, tmp_path / "data")
    assert dict(Corpus(tmp_path / "data").docs) == docs  # the earlier data directory is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "data", "src"]  # no staging directory left
