"""First stages: the config's list resolved into names every model points at, and the candidates stage's three
methods (BM25, a collection's scoreddocs through ir_datasets, a run file the user brings)."""

from __future__ import annotations

import argparse
import copy
import json
import re

import ir_datasets
import pytest
import yaml

from longrank.validation.validate import validate_config
from longrank.config.schema import SCHEMA_PATH
from longrank.errors import InputError
from longrank.io.trec_files import read_run
from longrank.retrieval import candidates as stage

from conftest import REPO, snakemake

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test


SCHEMA = str(SCHEMA_PATH)
BASE = {
    "dataset": {"name": "x", "id": "cranfield"},
    "models": {"knrm": {"type": "knrm"}, "tk": {"type": "tk", "first_stage": "mine"}},
}


def resolved(first_stages):
    return validate_config({**copy.deepcopy(BASE), "first_stages": first_stages}, SCHEMA)


def test_first_stages_resolve_in_order_with_method_defaults_and_each_model_names_one():
    config = resolved([{"name": "bm25", "method": "bm25"}, {"name": "mine", "method": "run_file", "path": "x.run"}])
    assert list(config["first_stages"]) == ["bm25", "mine"]
    assert config["first_stages"]["bm25"] == {
        "name": "bm25",
        "method": "bm25",
        "top_k": 100,
        "k1": 0.9,
        "b": 0.4,
        "stemmer": "english",
        "stopwords": "en",
    }
    assert config["first_stages"]["mine"] == {"name": "mine", "method": "run_file", "path": "x.run", "top_k": 100}
    assert config["models"]["knrm"]["first_stage"] == "bm25"  # the first is the default
    assert config["models"]["tk"]["first_stage"] == "mine"


@pytest.mark.parametrize(
    "first_stages, message",
    [
        ([{"name": "bm25", "method": "bm25"}], "config key models.tk.first_stage: 'mine' is not a first stage"),
        (
            [{"name": "mine", "method": "bm25"}, {"name": "mine", "method": "scoreddocs"}],
            "the name 'mine' is used twice",
        ),
        (
            [{"name": "knrm", "method": "bm25"}, {"name": "mine", "method": "bm25"}],
            "'knrm' is also a first stage's name",
        ),
        ([{"name": "mine", "method": "run_file"}], "config key first_stages.0: 'path' is a required property"),
        (
            [{"name": "mine", "method": "scoreddocs", "k1": 1.2}],
            "config key first_stages.0.k1: a key of method 'bm25' / 'pisa' / 'hdct'; this first stage's method is 'scoreddocs'",
        ),
        (
            [{"name": "bm25", "method": "bm25", "path": "x"}],
            "config key first_stages.0.path: a key of method 'run_file'",
        ),
        (
            [{"name": "bm25", "method": "bm25"}, {"name": "mine", "method": "model", "model": "nope"}],
            "config key first_stages.mine.model: 'nope' is not a configured model",
        ),
        (
            [{"name": "bm25", "method": "bm25"}, {"name": "mine", "method": "model", "model": "tk"}],
            "config key models.tk.first_stage: 'mine' depends on the model's own ranking (tk -> tk)",
        ),
    ],
)
def test_bad_first_stages_name_the_key(first_stages, message):
    with pytest.raises(InputError) as err:
        resolved(first_stages)
    assert message in str(err.value)


def test_the_old_single_first_stage_key_says_what_replaced_it():
    with pytest.raises(InputError, match="config key first_stage: replaced by first_stages"):
        validate_config({**copy.deepcopy(BASE), "first_stage": {"method": "bm25"}}, SCHEMA)


def candidates(tiny_data, spec, dataset=None):
    out = tiny_data / f"{spec['name']}.run"
    stage.run(
        argparse.Namespace(
            data=str(tiny_data / "data"),
            first_stage=json.dumps(spec),
            dataset=json.dumps(dataset or {}),
            artifacts=[],
            out=str(out),
        )
    )
    return read_run(out)


def test_run_file_keeps_the_collections_queries_and_documents_top_k_each(tiny_data, caplog):
    bm25 = read_run(tiny_data / "bm25.run")
    lines = [f"{q} Q0 {d} 0 {-s} theirs" for q, scores in bm25.items() for d, s in scores.items()]  # BM25 reversed
    # rank 0 as the rest of the file (a file whose rank column is constant is read by its scores; a rank 1 scored
    # above rank 0 would be a score rising with the rank, refused: test_fault_catalogue_names_ids)
    lines += ["q_unknown Q0 d0_0 1 5.0 theirs", "q0 Q0 not_a_doc 0 99.0 theirs"]
    (tiny_data / "theirs.trec").write_text("\n".join(lines) + "\n")
    run = candidates(
        tiny_data, {"name": "theirs", "method": "run_file", "path": str(tiny_data / "theirs.trec"), "top_k": 5}
    )
    assert set(run) == set(bm25)
    for q, scores in run.items():
        worst_bm25 = sorted(bm25[q], key=lambda d: (bm25[q][d], d))[:5]
        assert sorted(scores) == sorted(worst_bm25) and len(scores) == min(5, len(bm25[q]))
    assert "1 document ids not in the collection dropped" in caplog.text
    # nothing timed (it came ready-made); what was dropped counted
    assert json.loads((tiny_data / "theirs.stats.json").read_text()) == {
        "method": "run_file",
        "unknown_documents_dropped": 1,
        "unknown_document_entries_dropped": 1,
        "unknown_queries_ignored": 1,
    }


def test_bm25_candidates_record_index_and_query_time(tiny_data):
    run = candidates(
        tiny_data,
        {
            "name": "lexical",
            "method": "bm25",
            "k1": 0.9,
            "b": 0.4,
            "stemmer": "english",
            "stopwords": "en",
            "top_k": 30,
        },
    )
    assert run == read_run(tiny_data / "bm25.run")  # what the fixture's bm25_run gives with the same settings
    stats = json.loads((tiny_data / "lexical.stats.json").read_text())
    assert stats["method"] == "bm25" and stats["index_seconds"] > 0 and stats["query_ms_per_query"] > 0


def test_a_run_file_of_another_collection_is_an_error_naming_the_file(tiny_data):
    (tiny_data / "other.trec").write_text("701 Q0 GX000-00 1 3.5 other\n")
    with pytest.raises(InputError, match=r"other.trec: none of its 1 query ids is a query of the collection"):
        candidates(tiny_data, {"name": "other", "method": "run_file", "path": str(tiny_data / "other.trec")})
    (tiny_data / "bad.trec").write_text("q0 Q0 d0_0 1 high bad\n")
    with pytest.raises(InputError, match=r"bad.trec:1: the score \(5th column\) must be a number, got 'high'"):
        candidates(tiny_data, {"name": "bad", "method": "run_file", "path": str(tiny_data / "bad.trec")})
    with pytest.raises(InputError, match="run file .*missing.trec not found"):
        candidates(tiny_data, {"name": "gone", "method": "run_file", "path": str(tiny_data / "missing.trec")})


def test_scoreddocs_come_from_ir_datasets_for_the_test_and_training_ids(tiny_data):
    """Two datasets registered with ir_datasets' own TREC scored-docs format (the interface TREC DL's official
    top 100 has), one for the evaluation queries and one for the training queries (dataset.train_id)."""
    from ir_datasets.formats import TrecScoredDocs
    from ir_datasets.util import LocalDownload

    bm25 = read_run(tiny_data / "bm25.run")
    queries = sorted(bm25)
    for part, qids in (("eval", queries[:10]), ("train", queries[10:])):
        path = tiny_data / f"{part}.scoreddocs"
        path.write_text(
            "".join(f"{q} Q0 {d} {r} {-r} official\n" for q in qids for r, d in enumerate(sorted(bm25[q]), 1))
        )
        if f"longrank-test/{part}" not in ir_datasets.registry:
            ir_datasets.registry.register(
                f"longrank-test/{part}", ir_datasets.Dataset(TrecScoredDocs(LocalDownload(path)))
            )
    run = candidates(
        tiny_data,
        {"name": "official", "method": "scoreddocs", "top_k": 3},
        {"source": "ir_datasets", "id": "longrank-test/eval", "train_id": "longrank-test/train"},
    )
    assert set(run) == set(queries)
    for q in queries:
        assert sorted(run[q]) == sorted(bm25[q])[:3]  # the dataset's own order (by doc id here), top 3


def test_scoreddocs_of_a_collection_without_them_is_an_error(tiny_data, ir_datasets_home):
    with pytest.raises(InputError, match="ir_datasets 'cranfield' provides no scoreddocs; use bm25 or run_file"):
        candidates(
            tiny_data, {"name": "official", "method": "scoreddocs"}, {"source": "ir_datasets", "id": "cranfield"}
        )
    with pytest.raises(InputError, match="a local collection has no scored documents"):
        candidates(tiny_data, {"name": "official", "method": "scoreddocs"}, {"source": "local"})


def test_each_model_trains_on_the_candidates_of_its_own_first_stage(tmp_path):
    """negatives_from: candidates draws a model's negatives from the candidates it reranks: the train job of an
    entry with first_stage: other reads candidates/other.run (MIR and its baselines on HDCT, the rest on the
    track's list), and one without reads the first first stage's."""
    (tmp_path / "config").symlink_to(REPO / "config")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    overlay = {
        "first_stages": [
            {"name": "bm25", "method": "bm25", "top_k": 50},
            {"name": "other", "method": "bm25", "k1": 1.2, "top_k": 50},
        ],
        "models": {"tk": {"enabled": True, "first_stage": "other", "train": {"steps": 2, "eval_every": 1}}},
    }
    (tmp_path / "two.yaml").write_text(yaml.safe_dump(overlay))
    done = snakemake(tmp_path, "-n", "--printshellcmds", "report", "--configfile", "examples/mine.yaml", "two.yaml")
    train = {
        m.group(1): m.group(2) for m in re.finditer(r"longrank train --model (\w+) .*?--candidates (\S+)", done.stdout)
    }
    assert train["tk"] == "results/mine/candidates/other.run"
    assert train["knrm"] == "results/mine/candidates/bm25.run"
