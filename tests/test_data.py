"""The data stage: tokenisation, vocabulary, splits, query formulation, collection adapters and their errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from longrank.data.corpus import Corpus
from longrank.data.data import prepare
from longrank.data.queries import formulate
from longrank.data.splits import make_folds
from longrank.data.words import OOV, PAD, Vocabulary, count_doc_freq, tokenize, write_doc_freq
from longrank.errors import InputError
from longrank.io.trec_files import read_qrels

from conftest import write_local_collection


def test_tokenize_lowercases_and_drops_punctuation():
    assert tokenize("Heat-Transfer, in a BOUNDARY layer (1958).") == [
        "heat",
        "transfer",
        "in",
        "a",
        "boundary",
        "layer",
        "1958",
    ]


def test_the_query_stop_words_are_scikit_learns_read_without_importing_it():
    """stop_words() reads scikit-learn's list from its module file: the same 318 words, and a process that asks
    for them has not imported scikit-learn (its import cost each word model's job ~2 s)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    probe = "from longrank.data.words import query_terms, stop_words; import sys; "
    probe += "print(len(stop_words()), query_terms('what is the heat flux'), 'sklearn' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[0] == "318 ['heat', 'flux'] False", done.stdout + done.stderr
    from longrank.data.words import stop_words

    assert stop_words() == ENGLISH_STOP_WORDS


def test_vocabulary_ids_padding_and_idf():
    vocab = Vocabulary.build(["a b b c", "b d"], extra_texts=["zeta"])
    assert vocab.words[:2] == ["<pad>", "<oov>"]
    assert vocab.ids("b unknownword zeta") == [vocab.index["b"], OOV, vocab.index["zeta"]]
    batch = vocab.encode_batch(["a b", "c"], max_len=5)
    assert batch.tolist() == [[vocab.index["a"], vocab.index["b"]], [vocab.index["c"], PAD]]
    assert vocab.encode_batch(["a b c d"], max_len=2).shape == (1, 2)
    idf = vocab.idf()
    # b occurs in both documents, a in one: rarer words weigh more; padding weighs nothing
    assert idf[vocab.index["a"]] > idf[vocab.index["b"]] > 0 and idf[PAD] == 0


def test_vocabulary_file_round_trip_and_caps(tmp_path):
    docs = ["a b b c", "b d", "b c e", "c f"]  # document frequencies: b 3, c 3, a 1, d 1, e 1, f 1
    write_doc_freq(tmp_path / "df.tsv", count_doc_freq(docs))
    full = Vocabulary.load(tmp_path / "df.tsv", len(docs), extra_texts=["zeta"])
    built = Vocabulary.build(docs, extra_texts=["zeta"])
    assert (full.words, full.doc_freq, full.num_docs) == (built.words, built.doc_freq, 4)
    assert Vocabulary.load(tmp_path / "df.tsv", 4, min_doc_freq=2).words[2:] == ["b", "c"]
    # the 3 most frequent: b and c, then the first word (in word order) of the df-1 tie: a; query words always stay
    capped = Vocabulary.load(tmp_path / "df.tsv", 4, extra_texts=["zeta f"], max_words=3)
    assert capped.words[2:] == ["a", "b", "c", "f", "zeta"] and capped.doc_freq[2:] == [1, 3, 3, 1, 0]
    assert built.restricted(max_words=3).words[2:] == ["a", "b", "c", "zeta"]
    assert built.restricted() is built
    assert capped.idf()[capped.index["b"]] == pytest.approx(full.idf()[full.index["b"]])  # same N and df
    (tmp_path / "bad.tsv").write_text("word\tdoc_freq\nb\tthree\n")
    with pytest.raises(InputError, match="bad.tsv:2"):
        Vocabulary.load(tmp_path / "bad.tsv", 4)
    with pytest.raises(InputError, match="must be positive"):
        Vocabulary.load(tmp_path / "df.tsv", 4, max_words=0)


def test_holdout_split_is_deterministic_disjoint_and_complete():
    qids = [f"q{i}" for i in range(40)]
    (fold,) = make_folds(qids, "holdout", dev=0.2, test=0.3, seed=7)
    assert make_folds(list(reversed(qids)), "holdout", dev=0.2, test=0.3, seed=7) == [fold]
    assert (len(fold["train"]), len(fold["dev"]), len(fold["test"])) == (20, 8, 12)
    assert set(fold["train"]) | set(fold["dev"]) | set(fold["test"]) == set(qids)
    assert not set(fold["train"]) & set(fold["test"]) and not set(fold["dev"]) & set(fold["test"])
    assert make_folds(qids, "holdout", dev=0.2, test=0.3, seed=8) != [fold]


def test_kfold_tests_every_query_exactly_once():
    qids = [f"q{i}" for i in range(23)]
    folds = make_folds(qids, "kfold", k=5)
    tested = [q for f in folds for q in f["test"]]
    assert sorted(tested) == sorted(qids)
    for f in folds:
        assert (
            not (set(f["train"]) & set(f["test"]))
            and not (set(f["dev"]) & set(f["test"]))
            and not (set(f["train"]) & set(f["dev"]))
        )
    with pytest.raises(InputError, match="splits.k"):
        make_folds(qids, "kfold", k=2)


def test_query_formulation_first_words_and_tfidf():
    docs = {
        "d1": "court appeal stamp duty registration",
        "d2": "court appeal pension retirement",
        "d3": "court appeal tax",
    }
    queries = {"q": "The court heard the appeal about stamp duty and stamp registration of the sale deed"}
    assert formulate(queries, docs, "first_words", 3) == {"q": "The court heard"}
    terms = formulate(queries, docs, "tfidf_terms", 2)["q"].split()
    # "stamp" is repeated and rare in the collection; "court"/"appeal" are in every document
    assert terms[0] == "stamp" and "court" not in terms and len(terms) == 2
    with pytest.raises(InputError, match="query_formulation.method"):
        formulate(queries, docs, "bogus")


def test_prepare_local_collection_maps_gains_and_writes_every_file(tmp_path):
    dataset = write_local_collection(
        tmp_path / "src",
        {"d1": "alpha beta", "d2": "gamma", "d3": "   "},
        {"q1": "alpha", "q2": "gamma", "q3": "delta", "q4": "beta gamma"},
        [("q1", "d1", 2), ("q1", "d2", -1), ("q2", "d2", 1), ("q3", "d1", -1), ("q4", "d1", 1)],
    )
    dataset["gains"] = {"-1": 0}
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.34, "test": 0.34}, tmp_path / "data")
    corpus = Corpus(tmp_path / "data")
    assert set(corpus.docs) == {"d1", "d2"}  # the empty document is dropped (with a warning)
    assert read_qrels(tmp_path / "data" / "qrels.txt")["q1"] == {"d1": 2, "d2": 0}
    (fold,) = corpus.folds
    assert sorted(fold["train"] + fold["dev"] + fold["test"]) == ["q1", "q2", "q4"]  # q3 has nothing relevant
    stats = json.loads((tmp_path / "data" / "stats.json").read_text())
    assert stats["num_docs"] == 2 and stats["empty_docs_dropped"] == 1
    assert corpus.doc_lengths == {"d1": 2, "d2": 1}
    vocab = corpus.word_vocabulary()  # documents' words with their document frequency, and the queries' words
    assert (
        vocab.words[2:] == ["alpha", "beta", "delta", "gamma"]
        and vocab.doc_freq[2:] == [1, 1, 0, 1]
        and vocab.num_docs == 2
    )


def test_the_data_stage_records_the_map_it_applied_and_refuses_one_reversing_the_qrels_grades(tmp_path):
    """Graded 0-3 judgments (TREC DL's shape) keep their grades without a map, and stats.json says so; a map that lists
    only grade 3 (-> 1) leaves grade 2 above it: the config check sees only listed grades, the data stage sees the
    qrels' and refuses, naming the key, and writes nothing."""
    docs = {f"d{i}": f"wing lift {i}" for i in range(8)}
    qrels = [("q1", f"d{i}", i % 4) for i in range(8)] + [("q2", "d1", 3), ("q3", "d2", 2)]
    dataset = write_local_collection(tmp_path / "src", docs, {"q1": "wing", "q2": "lift", "q3": "wing lift"}, qrels)
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.34, "test": 0.34}, tmp_path / "data")
    relevance = json.loads((tmp_path / "data" / "stats.json").read_text())["relevance"]
    assert relevance == {
        "gains": {"0": 0, "1": 1, "2": 2, "3": 3},
        "configured_gains": {},
        "exclude_grades": [],
        "excluded_judgments": 0,
        "reverses_grades": False,
        "judgments_by_grade": {"0": 2, "1": 2, "2": 3, "3": 3},
    }
    assert read_qrels(tmp_path / "data" / "qrels.txt")["q1"] == {f"d{i}": i % 4 for i in range(8)}
    with pytest.raises(
        InputError, match=r"dataset.gains over the qrels' grades: grade 2 gets gain 2 and the higher grade 3 gets 1"
    ):
        prepare(
            {**dataset, "gains": {3: 1}},
            {"method": "full"},
            {"method": "holdout", "dev": 0.34, "test": 0.34},
            tmp_path / "data2",
        )
    assert not (tmp_path / "data2").exists()
    # on purpose (Cranfield's 1 = best), the same map is applied and recorded with its intent
    prepare(
        {**dataset, "gains": {"3": 1}, "reverses_grades": True},
        {"method": "full"},
        {"method": "holdout", "dev": 0.34, "test": 0.34},
        tmp_path / "data3",
    )
    relevance = json.loads((tmp_path / "data3" / "stats.json").read_text())["relevance"]
    assert relevance["gains"] == {"0": 0, "1": 1, "2": 2, "3": 1} and relevance["reverses_grades"] is True


def test_training_and_dev_queries_of_their_own_make_every_judged_query_a_test_query(tmp_path):
    """TREC DL's shape: training queries (train_queries) and a seeded sample of dev queries (dev_queries, dev_sample) of
    their own choose nothing from the judged queries, which are all test queries; ids must be distinct."""
    docs = {f"d{i}": f"wing lift {i}" for i in range(10)}
    dataset = write_local_collection(
        tmp_path / "src", docs, {"q1": "wing", "q2": "lift"}, [("q1", "d1", 2), ("q2", "d2", 1)]
    )
    src = tmp_path / "src"
    (src / "train.tsv").write_text("t1\twing one\nt2\tlift two\n")
    (src / "train_qrels.txt").write_text("t1 0 d3 1\nt2 0 d4 1\n")
    (src / "dev.tsv").write_text("".join(f"v{i}\tlift {i}\n" for i in range(6)))
    (src / "dev_qrels.txt").write_text(
        "".join(f"v{i} 0 d{i} {int(i != 5)}\n" for i in range(6))
    )  # v5: nothing relevant
    dataset |= {
        "train_queries": str(src / "train.tsv"),
        "train_qrels": str(src / "train_qrels.txt"),
        "dev_queries": str(src / "dev.tsv"),
        "dev_qrels": str(src / "dev_qrels.txt"),
        "dev_sample": 3,
        "dev_seed": 1,
    }
    prepare(dataset, {"method": "full"}, {"method": "holdout"}, tmp_path / "data")
    (fold,) = Corpus(tmp_path / "data").folds
    assert fold["train"] == ["t1", "t2"] and fold["test"] == ["q1", "q2"]
    assert len(fold["dev"]) == 3 and set(fold["dev"]) < {f"v{i}" for i in range(5)}
    prepare(dataset, {"method": "full"}, {"method": "holdout"}, tmp_path / "again")
    assert Corpus(tmp_path / "again").folds[0]["dev"] == fold["dev"]  # the sample is seeded
    stats = json.loads((tmp_path / "data" / "stats.json").read_text())
    assert stats["query_sets"]["dev"] == f"{src / 'dev.tsv'} judged by {src / 'dev_qrels.txt'}, a sample of 3 (seed 1)"
    with pytest.raises(InputError, match=r"need training queries of their own too"):
        prepare(
            {k: v for k, v in dataset.items() if not k.startswith("train_")},
            {"method": "full"},
            {"method": "holdout"},
            tmp_path / "x",
        )
    with pytest.raises(InputError, match=r"dataset.dev_queries: query id 'q1' is also a query"):
        (src / "dev.tsv").write_text("q1\tlift\n")
        (src / "dev_qrels.txt").write_text("q1 0 d1 1\n")
        prepare(dataset, {"method": "full"}, {"method": "holdout"}, tmp_path / "clash")


@pytest.mark.stage  # the data stage twice over the synthetic MS MARCO, through ir_datasets' loaders
def test_a_dev_set_drawn_from_the_collections_own_queries_is_held_out_of_the_test_queries(tmp_path):
    """MS MARCO Dev as a test set (config/datasets/msmarco-dev.yaml: dev_id equal to id): the 100 choosing queries are
    the TREC DL years' own sample (same pool, same seed: so their trainings are the same), and every other dev query is
    a test query, none of them both. Through the real ir_datasets loaders over the synthetic MS MARCO."""
    from conftest import IR_DATASETS_HOME
    from rehearsal import make_msmarco

    if not (IR_DATASETS_HOME / "msmarco-document" / "collection.tsv.gz").exists():
        make_msmarco(IR_DATASETS_HOME)
    year = {"source": "ir_datasets", "id": "msmarco-document/trec-dl-2019/judged", "doc_fields": ["title", "body"]}
    year |= {"train_id": "msmarco-document/train", "dev_id": "msmarco-document/dev", "dev_sample": 100, "dev_seed": 0}
    dev = {**year, "id": "msmarco-document/dev"}
    for name, dataset in (("year", year), ("dev", dev)):
        prepare(dataset, {"method": "full"}, {"method": "holdout"}, tmp_path / name)
    (on_year,), (on_dev,) = Corpus(tmp_path / "year").folds, Corpus(tmp_path / "dev").folds
    assert on_dev["dev"] == on_year["dev"] and on_dev["train"] == on_year["train"] and len(on_dev["dev"]) == 100
    assert len(on_dev["test"]) == 10 and not set(on_dev["test"]) & set(on_dev["dev"])  # 110 dev queries in all
    stats = json.loads((tmp_path / "dev" / "stats.json").read_text())
    assert stats["query_sets"]["test"] == "every other judged query of the collection"
    assert stats["folds"] == [{"train": 200, "dev": 100, "test": 10}]


def test_excluded_grades_leave_the_qrels_and_every_ranking(tmp_path):
    from longrank.retrieval.candidates import without_excluded

    dataset = write_local_collection(
        tmp_path / "src",
        {"d1": "wing lift", "d2": "wing", "d3": "lift"},
        {"q1": "wing lift", "q2": "wing", "q3": "lift"},
        [("q1", "d1", -1), ("q1", "d2", 1), ("q2", "d2", 1), ("q3", "d3", 1)],
    )
    prepare(
        {**dataset, "exclude_grades": [-1]},
        {"method": "full"},
        {"method": "holdout", "dev": 0.3, "test": 0.3},
        tmp_path / "data",
    )
    corpus = Corpus(tmp_path / "data")
    assert corpus.qrels["q1"] == {"d2": 1} and corpus.excluded == {"q1": {"d1"}}
    run = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}
    assert without_excluded(run, corpus.excluded, top_k=2) == {"q1": {"d2": 2.0, "d3": 1.0}}


def test_prepare_counts_qrels_naming_unknown_documents_and_drops_them(tmp_path, caplog):
    """A judged document the collection lacks is counted and reported (stats.json, a warning), not a crash (issue
    37: a subset of a collection, or a document ir_datasets' copy lost); the query keeps its other judgments."""
    docs = {"d1": "alpha", "d2": "beta", "d3": "alpha beta", "d4": "gamma"}
    queries = {"q1": "alpha", "q2": "beta", "q3": "gamma", "q4": "alpha beta"}
    judged = [("q1", "d1", 1), ("q1", "ghost", 1), ("q2", "d2", 1), ("q3", "d4", 1), ("q4", "d3", 1)]
    dataset = write_local_collection(tmp_path / "src", docs, queries, judged)
    prepare(dataset, {}, {"method": "holdout", "dev": 0.25, "test": 0.25}, tmp_path / "data")
    stats = json.loads((tmp_path / "data" / "stats.json").read_text())
    assert stats["missing_judged_documents"]["test"]["examples"] == ["q1:ghost"]
    assert stats["num_evaluable_queries"] == 4 and "ghost" not in (tmp_path / "data" / "qrels.txt").read_text()
    assert "dataset.qrels: 1 judgments (1 relevant) name 1 documents not in the collection, dropped" in caplog.text


def test_prepare_errors_name_the_problem(tmp_path):
    dataset = write_local_collection(tmp_path / "src", {"d1": "alpha", "d2": ""}, {"q1": "alpha"}, [("q1", "d1", 1)])
    with pytest.raises(InputError, match="empty documents: 'd2'"):
        prepare({**dataset, "empty_documents": "error"}, {}, {}, tmp_path / "data")
    with pytest.raises(InputError, match="not found"):
        prepare({**dataset, "docs": str(tmp_path / "missing.jsonl")}, {}, {}, tmp_path / "data")
    with pytest.raises(InputError, match="not an ir_datasets id"):
        prepare({"name": "x", "source": "ir_datasets", "id": "no-such-collection/at-all"}, {}, {}, tmp_path / "data")


def test_cranfield_through_ir_datasets(ir_datasets_home, tmp_path):
    prepare(
        {
            "name": "cranfield",
            "source": "ir_datasets",
            "id": "cranfield",
            "doc_fields": ["title", "text"],
            "gains": {"-1": 0},
        },
        {"method": "full"},
        {"method": "holdout"},
        tmp_path / "data",
    )
    corpus = Corpus(tmp_path / "data")
    assert len(corpus.docs) == 1398 and len(corpus.queries) == 225  # two Cranfield documents are empty
    grades = {g for judged in corpus.qrels.values() for g in judged.values()}
    assert grades == {
        0,
        1,
        2,
        3,
        4,
    }  # -1 (the question's source paper) became gain 0; 4 = complete answer stays highest
    # With the default config's exclude_grades: exactly one source paper per query, out of the qrels.
    prepare(
        {
            "name": "cranfield",
            "source": "ir_datasets",
            "id": "cranfield",
            "doc_fields": ["title", "text"],
            "exclude_grades": [-1],
        },
        {"method": "full"},
        {"method": "holdout"},
        tmp_path / "excluding",
    )
    excluding = Corpus(tmp_path / "excluding")
    assert len(excluding.excluded) == 225 and all(len(v) == 1 for v in excluding.excluded.values())
    assert all(d not in excluding.qrels.get(q, {}) for q, ds in excluding.excluded.items() for d in ds)


def test_the_bundled_cranfield_is_ir_datasets_copy():
    from longrank.data.bundled import BUNDLED, SHA256, sha256

    assert sorted(p.name for p in (BUNDLED / "cranfield").iterdir()) == sorted(SHA256["cranfield"])
    for name, digest in SHA256["cranfield"].items():
        assert sha256(BUNDLED / "cranfield" / name) == digest, (
            f"bundled/cranfield/{name} differs from the copy ir_datasets extracts"
        )


def test_seeding_copies_what_the_cache_lacks_and_keeps_what_it_has(tmp_path, monkeypatch):
    from longrank.data.bundled import SHA256, seed_ir_datasets_cache, sha256

    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path))
    (tmp_path / "cranfield").mkdir()
    (tmp_path / "cranfield" / "qrels.txt").write_text("the user's own copy")
    copied = seed_ir_datasets_cache("cranfield")
    assert sorted(p.name for p in copied) == ["docs.txt", "queries.txt"]
    assert (tmp_path / "cranfield" / "qrels.txt").read_text() == "the user's own copy"
    assert sha256(tmp_path / "cranfield" / "docs.txt") == SHA256["cranfield"]["docs.txt"]
    assert seed_ir_datasets_cache("cranfield") == []
    assert (
        seed_ir_datasets_cache("vaswani") == [] and not (tmp_path / "vaswani").exists()
    )  # not bundled: ir_datasets downloads it


def test_a_collection_that_cannot_be_downloaded_names_the_dataset_and_where_its_files_go(
    ir_datasets_home, tmp_path, monkeypatch
):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):  # offline: every request is refused at once
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(InputError) as err:
        prepare(
            {"name": "vaswani", "source": "ir_datasets", "id": "vaswani"},
            {"method": "full"},
            {"method": "holdout"},
            tmp_path / "data",
        )
    message = str(err.value)
    assert (
        "could not download 'vaswani'" in message
        and str(ir_datasets_home / "vaswani") in message
        and "IR_DATASETS_HOME" in message
    )
    assert not (tmp_path / "data").exists()


@pytest.mark.stage
def test_irled_through_its_config(irled_dir, tmp_path):
    """config/irled.yaml's data stage on the real files: whole-case queries cut to 25 tf-idf terms, judgments
    of thousands of words, empty judgments dropped with their ids logged."""
    import yaml

    from conftest import REPO

    config = yaml.safe_load((REPO / "config" / "irled.yaml").read_text())
    described = yaml.safe_load((REPO / "config" / "datasets" / f"{config['dataset']}.yaml").read_text())
    dataset = {**described, **{key: str(irled_dir / Path(described[key]).name) for key in ("docs", "queries", "qrels")}}
    prepare(dataset, config["query_formulation"], config["splits"], tmp_path / "data")
    corpus = Corpus(tmp_path / "data")
    assert len(corpus.queries) == 200 and 1990 <= len(corpus.docs) < 2000
    assert all(1 <= len(text.split()) <= 25 for text in corpus.queries.values())
    lengths = sorted(len(text.split()) for text in corpus.docs.values())
    assert lengths[len(lengths) // 2] > 4000
    assert all(doc in corpus.docs for judged in corpus.qrels.values() for doc in judged)
