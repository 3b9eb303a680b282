"""Pseudo-queries from the documents and pre-training on them (train.pretrain): what the pseudo-queries are,
that they never hold a real query's text, and that pre-training hands its weights to the supervised training."""

from __future__ import annotations

import argparse
import json

import pytest
import torch
from safetensors.torch import load_file

from longrank.validation.validate import validate_config
from longrank.config.schema import SCHEMA_PATH
from longrank.train import pseudo_queries
from longrank.data.corpus import Corpus, PseudoQueryCorpus
from longrank.errors import InputError
from longrank.io.json_yaml import read_json
from longrank.io.trec_files import read_run
from longrank.train import train as train_stage
from longrank.config.train_settings import TrainSettings

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test


SCHEMA = str(SCHEMA_PATH)

ICT = {"source": "ict", "count": 60, "query_words": 6, "seed": 3, "depth": 20}
KNRM = {
    "type": "knrm",
    "max_doc_len": 60,
    "train": {
        "steps": 12,
        "batch_size": 4,
        "lr": 0.01,
        "eval_every": 6,
        "patience": 5,
        "pretrain": {"queries": "ict", "steps": 8, "eval_every": 4},
    },
}


def build(tiny_data, name="ict", cfg=ICT, **kwargs):
    out = tiny_data / "pseudo" / name
    pseudo_queries.build(Corpus(tiny_data / "data"), name, cfg, out, **kwargs)
    return out


def test_ict_queries_are_spans_taken_out_of_their_positive_and_fixed_by_the_seed(tiny_data):
    out = build(tiny_data)
    corpus, pseudo = Corpus(tiny_data / "data"), PseudoQueryCorpus(tiny_data / "data", out)
    assert len(pseudo.queries) == 60 and all(len(t.split()) == 6 for t in pseudo.queries.values())
    for qid, text in pseudo.queries.items():
        (doc_id,) = pseudo.qrels[qid]
        original, positive = corpus.docs[doc_id].split(), pseudo.docs[doc_id].split()
        start = next(i for i in range(len(original)) if original[i : i + 6] == text.split())  # a span of its document
        assert positive == original[:start] + original[start + 6 :]  # ... taken out of the positive
    (fold,) = pseudo.folds
    assert not fold["test"] and not set(fold["train"]) & set(fold["dev"]) and len(fold["dev"]) == 6
    again = build(tiny_data, "again")
    for name in ("queries.tsv", "qrels.txt", "folds.json", "candidates.run", "overrides.jsonl"):
        assert (out / name).read_bytes() == (again / name).read_bytes()
    other = build(tiny_data, "other", {**ICT, "seed": 4})
    assert (other / "queries.tsv").read_bytes() != (out / "queries.tsv").read_bytes()


def test_no_pseudo_query_contains_a_real_querys_text():
    real = {"q1": "wing lift airfoil case 3", "q2": "heat"}
    made = {
        "a": "the wing lift airfoil case 3 results",
        "b": "wing lift airfoil data",
        "c": "Heat",
        "d": "heat transfer",
    }
    # q1's words inside a longer text drop it; q2 is one word, so only a pseudo-query that is exactly it drops
    assert pseudo_queries.without_real_queries(made, real) == {"b": "wing lift airfoil data", "d": "heat transfer"}


def test_titles_are_queries_and_the_rest_of_the_document_the_positive(tiny_data):
    corpus = Corpus(tiny_data / "data")
    titles = {d: " ".join(corpus.docs[d].split()[:3]).upper() for d in list(corpus.docs)[:30]}  # case differs
    out = build(tiny_data, "titles", {"source": "titles", "count": 10, "depth": 20}, titles=titles)
    pseudo = PseudoQueryCorpus(tiny_data / "data", out)
    assert len(pseudo.queries) == 10
    for qid, text in pseudo.queries.items():
        doc_id = qid[1:]
        assert text == titles[doc_id]
        assert pseudo.docs[doc_id].split() == corpus.docs[doc_id].split()[3:]
    with pytest.raises(InputError, match="needs document titles"):
        build(tiny_data, "none", {"source": "titles", "count": 10}, titles={})


def test_formulated_queries_use_the_collections_formulation(tiny_data):
    cfg = {"source": "formulated", "count": 20, "passage_words": 10, "depth": 20}
    out = build(tiny_data, "formulated", cfg, query_formulation={"method": "first_words", "n": 4})
    stats = read_json(out / "stats.json")
    assert (
        stats["pseudo_queries"] >= 18 and stats["query_length_mean"] == 4 and stats["settings"]["passage_words"] == 10
    )


def test_pretraining_then_zero_supervised_steps_is_the_pretrained_model(tiny_data):
    pseudo_dir = build(tiny_data)
    pretrained = tiny_data / "knrm" / "pretrained" / "model.safetensors"
    cfg = train_stage.pretraining_config("knrm", KNRM)
    assert cfg["train"]["steps"] == 8 and cfg["train"]["positives"] == "judged" and "pretrain" not in cfg["train"]
    train_stage.train(
        "knrm",
        cfg,
        PseudoQueryCorpus(tiny_data / "data", pseudo_dir),
        read_run(pseudo_dir / "candidates.run"),
        0,
        20,
        torch.device("cpu"),
        pretrained,
    )
    assert read_json(pretrained.parent / "train_summary.json")["steps_run"] == 8
    untouched = tiny_data / "knrm" / "fold0" / "model.safetensors"
    zero = {**KNRM, "train": {**KNRM["train"], "steps": 0}}
    train_stage.train(
        "knrm",
        zero,
        Corpus(tiny_data / "data"),
        read_run(tiny_data / "bm25.run"),
        0,
        30,
        torch.device("cpu"),
        untouched,
        init=pretrained,
    )
    a, b = load_file(str(pretrained)), load_file(str(untouched))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    fine_tuned = tiny_data / "knrm" / "fold0b" / "model.safetensors"
    train_stage.train(
        "knrm",
        KNRM,
        Corpus(tiny_data / "data"),
        read_run(tiny_data / "bm25.run"),
        0,
        30,
        torch.device("cpu"),
        fine_tuned,
        init=pretrained,
    )
    c = load_file(str(fine_tuned))
    assert any(not torch.equal(a[k], c[k]) for k in a)  # the supervised steps moved it


def test_the_train_command_pretrains_from_the_cli(tiny_data):
    pseudo_dir = build(tiny_data)
    out = tiny_data / "cli" / "pretrained" / "model.safetensors"
    parser = argparse.ArgumentParser()
    train_stage.add_arguments(parser)  # the command's own parser: every option it has, with its default
    args = parser.parse_args(
        ["--model", "knrm", "--model-config", json.dumps(KNRM), "--data", str(tiny_data / "data"),
         "--candidates", str(pseudo_dir / "candidates.run"), "--rerank-depth", "20", "--device", "cpu",
         "--pretrain-queries", str(pseudo_dir), "--out", str(out)]
    )  # fmt: skip
    train_stage.run(args)
    summary = read_json(out.parent / "train_summary.json")
    assert summary["hyperparameters"]["steps"] == 8 and summary["hyperparameters"]["positives"] == "judged"


def test_pretrain_settings_are_checked():
    with pytest.raises(InputError, match="train.pretrain: unknown keys \\['stepz'\\]"):
        TrainSettings.from_entry("knrm", {"train": {"pretrain": {"queries": "ict", "stepz": 3}}})
    with pytest.raises(InputError, match="expected a mapping with `queries`"):
        TrainSettings.from_entry("knrm", {"train": {"pretrain": {"steps": 3}}})
    with pytest.raises(InputError, match="pseudo_queries.x.source"):
        pseudo_queries.settings("x", {"source": "abstracts"})
    with pytest.raises(InputError, match="pseudo_queries.x: unknown keys"):
        pseudo_queries.settings("x", {"cont": 3})


def test_a_model_pretraining_on_an_unknown_set_fails_at_parse_time():
    config = {
        "dataset": {"name": "x", "id": "cranfield"},
        "models": {"knrm": {"type": "knrm", "train": {"pretrain": {"queries": "ict"}}}},
    }
    with pytest.raises(InputError, match="models.knrm.train.pretrain.queries: 'ict' is not a set under pseudo_queries"):
        validate_config(config, SCHEMA)
    config["pseudo_queries"] = {"ict": {"source": "ict"}}
    validate_config(config, SCHEMA)


def test_the_report_pairs_each_pretrained_model_with_its_entry_without_pretraining():
    from longrank.report.training import without_pretraining

    knrm = {"type": "knrm", "max_doc_len": 200, "train": {"steps": 300}}
    models = {
        "knrm": knrm,
        "knrm_pt": {**knrm, "train": {"steps": 300, "pretrain": {"queries": "ict"}}},
        "knrm_long_pt": {**knrm, "max_doc_len": 400, "train": {"steps": 300, "pretrain": {"queries": "ict"}}},
    }
    assert without_pretraining(models, "knrm_pt") == "knrm"
    assert without_pretraining(models, "knrm_long_pt") is None  # no entry equal to it but for pretrain
    assert without_pretraining(models, "knrm") is None
