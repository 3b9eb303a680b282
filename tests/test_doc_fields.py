"""A model's own document fields (``models.<name>.doc_fields``, data/doc_field.py): NDRM reads the URL before the
collection's title and body, every other model the collection's text; a field the documents lack is an error naming
the key."""

from __future__ import annotations

import json

import pytest

from longrank.validation.validate import validate_config
from longrank.data import word2vec
from longrank.data.corpus import Corpus
from longrank.data.doc_field import DocumentFields, field_dir, split_fields, write_field, write_field_store
from longrank.data.data import prepare
from longrank.data.words import analyzer
from longrank.errors import InputError
from longrank.models.registry import build_model

from conftest import synthetic_collection, write_local_collection

NDRM = {"type": "ndrm", "variant": "ndrm3", "hidden_dim": 8, "n_heads": 2, "conv_groups": 2, "conv_window": 3,
        "n_layers": 1, "max_doc_len": 40, "pool_window": 8, "pool_stride": 4, "text_processing": "ck"}  # fmt: skip


def test_the_collections_fields_are_one_block_of_the_models():
    assert split_fields(["url", "title", "body"], ["title", "body"], "k") == (["url"], [])
    assert split_fields(["title", "body", "url"], ["title", "body"], "k") == ([], ["url"])
    for bad in (["title", "url", "body"], ["body", "title", "url"], ["url", "title"], ["url", "url", "title", "body"]):
        with pytest.raises(InputError, match="models.ndrm1.doc_fields"):
            split_fields(bad, ["title", "body"], "models.ndrm1.doc_fields")


def test_the_config_check_names_the_key():
    base = {"dataset": "cranfield", "models": {"ndrm1": {**NDRM, "doc_fields": ["url", "title", "text"]}}}
    config = validate_config(json.loads(json.dumps(base)))  # cranfield: doc_fields [title, text]
    assert config["models"]["ndrm1"]["doc_fields"] == ["url", "title", "text"]
    for fields, message in (
        (["title", "url", "text"], "one block"),
        (["title", "text"], "leave doc_fields out"),
        ([], "non-empty list"),
    ):
        bad = json.loads(json.dumps(base))
        bad["models"]["ndrm1"]["doc_fields"] = fields
        with pytest.raises(InputError, match=f"models.ndrm1.doc_fields.*{message}"):
            validate_config(bad)
    other = json.loads(json.dumps(base))
    other["models"] = {"tk": {"type": "tk", "doc_fields": ["url", "title", "text"]}}
    with pytest.raises(InputError, match="doc_fields"):  # a model that reads no fields of its own: an unknown key
        validate_config(other)


@pytest.fixture
def prepared(tmp_path):
    docs, queries, qrels = synthetic_collection(n_queries=3, docs_per_query=3)
    records = {
        d: {"title": f"about {t.split()[5]}", "body": t, "url": f"https://www.site.org/{d}/Wing-Lift"}
        for d, t in docs.items()
    }
    (tmp_path / "src").mkdir()
    dataset = write_local_collection(tmp_path / "src", docs, queries, qrels)
    with open(dataset["docs"], "w") as f:  # jsonl with fields: the collection reads title and body
        f.writelines(json.dumps({"doc_id": d, **r}) + "\n" for d, r in records.items())
    dataset = {**dataset, "doc_fields": ["title", "body"]}
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.34, "test": 0.33}, tmp_path / "data")
    return dataset, Corpus(tmp_path / "data"), records


def test_ndrm_reads_the_url_before_the_collections_text(prepared):
    dataset, corpus, records = prepared
    assert write_field(dataset, "url", field_dir(corpus.dir, "url")) == len(records)
    doc_id = sorted(corpus.docs)[0]
    assert corpus.docs[doc_id] == records[doc_id]["title"] + "\n" + records[doc_id]["body"]  # what every model reads
    fields = DocumentFields(corpus.dir, ["url", "title", "body"])
    assert fields.texts([doc_id], [corpus.docs[doc_id]]) == [records[doc_id]["url"] + "\n" + corpus.docs[doc_id]]
    model = build_model({**NDRM, "doc_fields": ["url", "title", "body"]}, corpus).eval()
    plain = build_model(NDRM, corpus).eval()
    # the URL's words, as the authors' cleaning makes them (non-alphanumerics, "_" too, to spaces; stop words out;
    # Krovetz stems: https -> http)
    assert doc_id == "d0_0"
    assert analyzer("ck")(records[doc_id]["url"]) == ["http", "www", "site", "org", "d0", "0", "wing", "lift"]
    with_url = model.encode(["wing lift"], [doc_id], [corpus.docs[doc_id]])
    without = plain.encode(["wing lift"], [doc_id], [corpus.docs[doc_id]])
    assert with_url["dlen"].item() == without["dlen"].item() + 8
    assert (with_url["tf"] - without["tf"]).tolist() == [[1.0, 1.0]]  # "wing" and "lift" of the URL count
    # the impact index (term_scores) reads the same text as reranking
    pairs = model.score_pairs(["wing lift"], [doc_id], [corpus.docs[doc_id]])
    terms = model.term_scores(model.query_terms("wing lift"), [doc_id], [corpus.docs[doc_id]])
    assert pairs.item() == pytest.approx(terms.sum().item(), abs=1e-4)


def test_word2vec_reads_the_url_and_the_training_queries_as_the_authors_fasttext(prepared):
    """word2vec.doc_fields / training_queries (the CK authors' fastText reads URL, title and body and the training
    queries): the URL's words get vectors and document frequencies, the training queries' words vectors only, and no
    dev or test query's text reaches them."""
    dataset, corpus, records = prepared
    write_field(dataset, "url", field_dir(corpus.dir, "url"))
    keys = {"dim": 4, "min_count": 1, "epochs": 1, "processing": "ck"}
    out = corpus.dir / "w2v" / "word2vec.txt"

    def vectors_and_df(**extra) -> tuple[set[str], dict[str, int], dict]:
        out.parent.mkdir(exist_ok=True)
        word2vec.build(corpus.dir / "docs.jsonl", out, **keys, **extra)
        words = {line.split(" ", 1)[0] for line in out.read_text().splitlines()[1:]}
        table = (out.parent / word2vec.DOC_FREQ_FILE).read_text().splitlines()[1:]  # under its header
        df = {w: int(n) for w, n in (line.split("\t") for line in table)}
        return words, df, json.loads((out.parent / word2vec.META_FILE).read_text())

    plain, plain_df, _ = vectors_and_df()
    assert "site" not in plain and "org" not in plain  # the URL's own words: no document text has them
    words, df, meta = vectors_and_df(doc_fields=["url", "title", "body"])
    assert {"site", "org"} <= words and df["site"] == len(records) and "site" not in plain_df
    assert meta["doc_fields"] == ["url", "title", "body"] and meta["training_queries"] == 0

    analyze = analyzer("ck")
    queries, fold = corpus.queries, corpus.folds[0]
    corpus.queries.update({q: f"{queries[q]} trainonly{i}" for i, q in enumerate(fold["train"])})
    corpus.queries.update({q: f"{queries[q]} heldout{i}" for i, q in enumerate(fold["dev"] + fold["test"])})
    (corpus.dir / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in corpus.queries.items()))
    words, df, meta = vectors_and_df(training_queries=True)
    trained = {w for q in fold["train"] for w in analyze(corpus.queries[q])}
    assert {f"trainonly{i}" for i in range(len(fold["train"]))} <= words <= plain | trained
    assert not any(w.startswith("heldout") for w in words)
    assert not any(w.startswith("trainonly") for w in df) and meta["training_queries"] == len(fold["train"])


def test_word2vec_training_queries_needs_one_split():
    knrm = {"knrm": {"type": "knrm"}}
    config = {"dataset": "cranfield", "models": knrm, "word2vec": {"training_queries": True}}
    config["splits"] = {"method": "kfold", "k": 5}
    with pytest.raises(InputError, match="word2vec.training_queries: splits.method is kfold"):
        validate_config(config)
    config["splits"] = {"method": "holdout"}
    assert validate_config(config)["word2vec"]["training_queries"] is True
    bad = {"dataset": "cranfield", "models": knrm, "word2vec": {"doc_fields": ["title", "url", "text"]}}
    with pytest.raises(InputError, match="word2vec.doc_fields.*one block"):
        validate_config(bad)


def test_a_field_the_documents_lack_is_an_error_naming_the_key(prepared, tmp_path):
    dataset, corpus, _ = prepared
    with pytest.raises(InputError, match=r"models.ndrm1.doc_fields: 'anchor' is not a field.*they have"):
        write_field(dataset, "anchor", tmp_path / "anchor", "models.ndrm1.doc_fields")
    with pytest.raises(InputError, match="cranfield.*they have"):  # ir_datasets: its document class, no download
        write_field(
            {"source": "ir_datasets", "id": "cranfield", "doc_fields": ["title", "text"]}, "url", tmp_path / "u"
        )
    with pytest.raises(InputError, match="doc_fields.*none of"):  # a model asking for a field nobody wrote
        build_model({**NDRM, "doc_fields": ["url", "title", "body"]}, corpus)


def test_a_store_of_another_field_order_is_refused(prepared):
    _, corpus, records = prepared
    write_field_store(
        field_dir(corpus.dir, "url"), "url", ((d, r["url"]) for d, r in records.items()), ["title", "body"]
    )
    with pytest.raises(InputError, match="one block"):
        DocumentFields(corpus.dir, ["title", "url", "body"])


@pytest.mark.stage
def test_the_field_store_is_written_after_the_data_stage(tmp_path):
    """The data stage replaces results/<name>/data whole, so a field store written under it must come after it: the
    TREC DL rehearsal once ran doc_field first, the data stage then deleted the URL store, and NDRM2's training found
    it missing. A dry run for the store alone plans the data job before it."""
    import re

    from conftest import REPO, snakemake

    (tmp_path / "config").symlink_to(REPO / "config")
    done = snakemake(
        tmp_path, "-n", "--configfile", "config/trec-dl.yaml", "config/trec-dl-2019.yaml", "--",
        "results/trec-dl-2019/data/fields/url/docs.jsonl",
    )  # fmt: skip
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", done.stdout + done.stderr, re.M))
    assert counts.get("doc_field") == "1" and counts.get("data") == "1", done.stdout[-2000:]
