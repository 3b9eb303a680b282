"""word2vec stage: IN ‖ OUT vectors (Conformer-Kernel paper Sec. 4) on a tiny collection, deterministic, and read
by the word embedder through ``embeddings: word2vec``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from longrank.data import word2vec as stage
from longrank.data.corpus import Corpus
from longrank.data.words import count_doc_freq, write_doc_freq
from longrank.errors import InputError
from longrank.io.atomic import write_text
from longrank.models.modules.word_embedder import WordEmbedder

from conftest import REPO

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

TOPICS = {
    "aero": "wing lift drag airfoil flow boundary layer pressure",
    "heat": "heat transfer temperature conduction flux wall surface",
    "shock": "shock wave mach supersonic nozzle compression",
}
KEYS = {"dim": 8, "window": 3, "epochs": 3, "min_count": 2, "seed": 7}


@pytest.fixture()
def data_dir(tmp_path):
    """A prepared-data directory: docs.jsonl of 60 short documents over three topics, and a few queries."""
    rng = np.random.default_rng(0)
    lines = []
    for i in range(60):
        words = list(TOPICS.values())[i % 3].split()
        text = " ".join(rng.choice(words, 40)) + " The Results"  # capitals: the tokeniser lower-cases
        lines.append(json.dumps({"doc_id": f"d{i}", "text": text}) + "\n")
    directory = tmp_path / "data"
    write_text(directory / "docs.jsonl", "".join(lines))
    write_text(directory / "queries.tsv", "query_id\ttext\nq1\twing lift\nq2\tunseenword heat\n")
    write_doc_freq(directory / "word_doc_freq.tsv", count_doc_freq(json.loads(line)["text"] for line in lines))
    write_text(directory / "stats.json", json.dumps({"num_docs": len(lines)}))
    return directory


def read_vectors(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    n, width = map(int, lines[0].split())
    rows = {line.split(" ")[0]: np.array(line.split(" ")[1:], dtype=np.float32) for line in lines[1:]}
    assert len(rows) == n == len(lines) - 1
    return width, rows


def test_vectors_are_in_and_out_concatenated(data_dir):
    stage.build(data_dir / "docs.jsonl", data_dir / "word2vec.txt", **KEYS)
    width, rows = read_vectors(data_dir / "word2vec.txt")
    assert width == 2 * KEYS["dim"] and all(len(v) == width for v in rows.values())
    vocabulary = set(" ".join(TOPICS.values()).split()) | {"the", "results"}
    assert set(rows) == vocabulary  # lower-cased, every word occurs more than min_count times
    # The halves are word2vec's two matrices, read from the model itself.
    model = stage.train_word2vec(data_dir / "docs.jsonl", **KEYS)
    for word in ("wing", "heat", "the"):
        i = model.wv.key_to_index[word]
        np.testing.assert_allclose(rows[word][:8], model.wv.vectors[i], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(rows[word][8:], model.syn1neg[i], rtol=1e-6, atol=1e-7)
        assert not np.allclose(rows[word][:8], rows[word][8:], atol=1e-3)  # IN and OUT are different vectors


def test_same_collection_and_keys_give_the_same_file_in_another_process(data_dir, tmp_path):
    """workers=1 and a seed: byte-identical output, also from a fresh interpreter with another hash seed
    (the CLI the workflow's rule calls)."""
    stage.build(data_dir / "docs.jsonl", tmp_path / "a.txt", **KEYS)
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO / "src")}
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in KEYS.items()]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "longrank",
            "word2vec",
            "--docs",
            str(data_dir / "docs.jsonl"),
            *flags,
            "--out",
            str(tmp_path / "b.txt"),
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()
    stage.build(data_dir / "docs.jsonl", tmp_path / "c.txt", **{**KEYS, "seed": 8})
    assert (tmp_path / "a.txt").read_bytes() != (tmp_path / "c.txt").read_bytes()


def test_long_documents_are_trained_on_beyond_gensims_sentence_limit(tmp_path):
    """gensim drops a sentence's words after its 10,000th: a document is cut into pieces instead."""
    from gensim.models.word2vec import MAX_WORDS_IN_BATCH

    text = " ".join(["filler"] * MAX_WORDS_IN_BATCH + ["tailword", "tailword", "other"] * 3)
    write_text(tmp_path / "docs.jsonl", json.dumps({"doc_id": "d", "text": text}) + "\n")
    pieces = list(stage.DocumentSentences(tmp_path / "docs.jsonl", MAX_WORDS_IN_BATCH))
    assert [len(p) for p in pieces] == [MAX_WORDS_IN_BATCH, 9]
    model = stage.train_word2vec(tmp_path / "docs.jsonl", dim=4, epochs=1, min_count=1)
    assert "tailword" in model.wv.key_to_index


def test_the_embedder_loads_the_collections_vectors(data_dir):
    stage.build(data_dir / "docs.jsonl", data_dir / "word2vec.txt", **KEYS)
    _, rows = read_vectors(data_dir / "word2vec.txt")
    corpus = Corpus(data_dir)
    embedder = WordEmbedder.for_corpus(corpus, embeddings="word2vec", train_embeddings=False)
    vocab = corpus.word_vocabulary()
    assert embedder.dim == 2 * KEYS["dim"]
    for word in ("wing", "heat", "results"):
        np.testing.assert_array_equal(embedder.embedding.weight[vocab.index[word]].numpy(), rows[word])
    assert "unseenword" in vocab.index and "unseenword" not in rows  # a query word without a vector: random init
    assert embedder.coverage == pytest.approx(len(rows) / (len(vocab) - 2))
    # other keys reach the constructor as they would without word2vec
    assert embedder.remove_query_stopwords and not embedder.embedding.weight.requires_grad


def test_a_missing_word2vec_file_names_the_file_and_the_stage(data_dir):
    with pytest.raises(InputError) as err:
        WordEmbedder.for_corpus(Corpus(data_dir), embeddings="word2vec")
    assert str(data_dir / "word2vec.txt") in str(err.value) and "word2vec stage" in str(err.value)
    with pytest.raises(InputError, match="for_corpus"):  # the bare constructor cannot know the collection
        WordEmbedder(Corpus(data_dir).word_vocabulary(), embeddings="word2vec")


def test_the_stage_refuses_a_missing_collection_and_an_empty_vocabulary(tmp_path):
    with pytest.raises(InputError, match="docs.jsonl not found"):
        stage.build(tmp_path / "docs.jsonl", tmp_path / "w.txt")
    write_text(tmp_path / "docs.jsonl", json.dumps({"doc_id": "d", "text": "once only"}) + "\n")
    with pytest.raises(InputError, match="min_count=5"):
        stage.build(tmp_path / "docs.jsonl", tmp_path / "w.txt", min_count=5)
    assert not (tmp_path / "w.txt").exists()
