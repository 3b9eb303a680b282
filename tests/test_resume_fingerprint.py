"""A finished or interrupted training state is reused only for exactly the inputs it was made from: a
changed judgment, query text, document or embedding file retrains, saying which changed; nothing
changed reuses the finished model without drawing a batch."""

from __future__ import annotations

import logging

import pytest
import torch

from longrank.data import words
from longrank.data.corpus import Corpus
from longrank.data.data import prepare
from longrank.io.trec_files import read_qrels, read_run
from longrank.io.text_records import read_tsv_dict
from longrank.train import train as train_stage
from longrank.train.sampling import PairSampler
from conftest import synthetic_collection, write_local_collection

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

KNRM = {
    "type": "knrm",
    "max_doc_len": 60,
    "train": {"steps": 16, "batch_size": 4, "lr": 0.01, "eval_every": 8, "patience": 5},
}


def train(tiny_data, out_name: str, cfg=KNRM, data: str = "data") -> bytes:
    out = tiny_data / out_name / "model.safetensors"
    train_stage.train(
        "knrm", cfg, Corpus(tiny_data / data), read_run(tiny_data / "bm25.run"), 0, 30, torch.device("cpu"), out
    )
    return out.read_bytes()


@pytest.fixture
def count_batches(monkeypatch):
    """How many training batches were drawn since the fixture started (0: the saved state was reused)."""
    drawn = []
    original = PairSampler.batch

    def counting(self, step, batch_size):
        drawn.append(step)
        return original(self, step, batch_size)

    monkeypatch.setattr(PairSampler, "batch", counting)
    return drawn


def discarded(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("discarding the training state")]


def first_training_query(tiny_data) -> str:
    return Corpus(tiny_data / "data").folds[0]["train"][0]


def test_nothing_changed_reuses_the_finished_model(tiny_data, count_batches, caplog):
    caplog.set_level(logging.INFO, logger="longrank.train")
    first = train(tiny_data, "run")
    assert count_batches, "the first run trained"
    count_batches.clear()
    assert train(tiny_data, "run") == first
    assert count_batches == [] and discarded(caplog) == []


def test_a_changed_judgment_retrains_and_says_so(tiny_data, count_batches, caplog):
    caplog.set_level(logging.INFO, logger="longrank.train")
    first = train(tiny_data, "run")
    # one training query's judged-relevant document becomes not relevant: its positives change
    qrels_path = tiny_data / "data" / "qrels.txt"
    qid = first_training_query(tiny_data)
    relevant = sorted(d for d, g in read_qrels(qrels_path)[qid].items() if g > 0)
    lines = qrels_path.read_text().splitlines(keepends=True)
    changed = [
        line.replace(" 1\n", " 0\n") if line.split()[0] == qid and line.split()[2] == relevant[0] else line
        for line in lines
    ]
    assert changed != lines
    qrels_path.write_text("".join(changed))
    count_batches.clear()
    retrained = train(tiny_data, "run")
    assert count_batches, "the state made with the old judgments was reused"
    assert retrained != first
    assert retrained == train(tiny_data, "from_scratch"), "not what a fresh training on the new judgments gives"
    (message,) = discarded(caplog)
    assert "changed since it was saved: judgments" in message and "documents" not in message


def test_a_changed_query_text_retrains(tiny_data, count_batches, caplog):
    caplog.set_level(logging.INFO, logger="longrank.train")
    train(tiny_data, "run")
    queries_path = tiny_data / "data" / "queries.tsv"
    qid = first_training_query(tiny_data)
    queries = read_tsv_dict(queries_path)
    text = queries_path.read_text()
    queries_path.write_text(text.replace(f"{qid}\t{queries[qid]}\n", f"{qid}\t{queries[qid]} supersonic\n"))
    count_batches.clear()
    train(tiny_data, "run")
    assert count_batches
    (message,) = discarded(caplog)
    assert "query texts" in message


def test_a_changed_document_retrains(tiny_data, count_batches, caplog):
    """The data stage run again over a collection where one document's text changed (ids, queries, judgments and
    split as before)."""
    caplog.set_level(logging.INFO, logger="longrank.train")
    train(tiny_data, "run")
    docs, queries, qrels = synthetic_collection()
    first_doc = sorted(docs)[0]
    docs[first_doc] += " laminar"
    dataset = write_local_collection(tiny_data / "src_changed", docs, queries, qrels)
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.25, "test": 0.25}, tiny_data / "data_changed")
    assert Corpus(tiny_data / "data_changed").folds == Corpus(tiny_data / "data").folds
    count_batches.clear()
    train(tiny_data, "run", data="data_changed")
    assert count_batches
    (message,) = discarded(caplog)
    assert "documents" in message and "judgments" not in message and "query texts" not in message


def test_a_changed_embeddings_file_retrains(tiny_data, count_batches, caplog):
    caplog.set_level(logging.INFO, logger="longrank.train")
    vectors = tiny_data / "vectors.txt"
    vectors.write_text("wing 0.1 0.2 0.3 0.4\nlift 0.5 0.1 0.0 0.2\nairfoil 0.3 0.3 0.1 0.0\n")
    cfg = {**KNRM, "embeddings": str(vectors)}
    train(tiny_data, "run", cfg)
    vectors.write_text("wing 0.1 0.2 0.3 0.4\nlift 0.5 0.1 0.0 0.2\nairfoil 0.3 0.3 0.1 0.9\n")
    words._glove_table.cache_clear()  # the table is cached per path in a process; each train job is a fresh one
    count_batches.clear()
    train(tiny_data, "run", cfg)
    assert count_batches
    (message,) = discarded(caplog)
    assert "initial weights" in message and "vocabulary" not in message


def test_an_interrupted_state_of_other_judgments_is_not_resumed(tiny_data, monkeypatch, caplog):
    """The same holds for a state a killed run left: it resumes only for its own judgments."""
    caplog.set_level(logging.INFO, logger="longrank.train")
    original = PairSampler.batch

    def dies_at_step_10(self, step, batch_size):
        if step == 10:
            raise KeyboardInterrupt("simulated kill")
        return original(self, step, batch_size)

    monkeypatch.setattr(PairSampler, "batch", dies_at_step_10)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_data, "run")
    monkeypatch.setattr(PairSampler, "batch", original)
    qrels_path = tiny_data / "data" / "qrels.txt"
    qid = first_training_query(tiny_data)
    unjudged = next(d for d in sorted(read_run(tiny_data / "bm25.run")[qid]) if d not in read_qrels(qrels_path)[qid])
    qrels_path.write_text(qrels_path.read_text() + f"{qid} 0 {unjudged} 1\n")  # a candidate judged relevant
    resumed = train(tiny_data, "run")
    assert resumed == train(tiny_data, "from_scratch")
    assert [m for m in discarded(caplog) if "judgments" in m]
