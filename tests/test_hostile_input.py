"""Hostile and broken input: each case ends in a clear error naming the file, key or id (or is handled, where
handling is what a user expects), and nothing finished is lost. Cases covered elsewhere: duplicate document ids,
qrels naming unknown documents and malformed qrels lines (test_data.py), runs of another collection
(test_first_stages.py), a killed write (test_outputs.py, test_train.py), an impossible download (test_data.py),
a killed training job resuming (test_train.py). tests/test_fault_catalogue.py holds the table of hostile inputs and
faults run through each stage's command line (TREC SGML, byte-order marks, ids with whitespace, directories for files,
a full disk, kill -9 of every long stage, two workflows on one results directory)."""

from __future__ import annotations

import copy
import gzip
import json
import os
from pathlib import Path

import pytest
import torch
import yaml

from longrank.validation.validate import validate_config
from longrank.config.schema import SCHEMA_PATH
from longrank.data.corpus import Corpus
from longrank.data.data import prepare
from longrank.errors import InputError
from longrank.io.trec_files import read_qrels, read_run
from longrank.models.checkpoint import load_model, save_weights
from longrank.models.registry import build_model

from conftest import REPO, snakemake, synthetic_collection, write_local_collection

SCHEMA = str(SCHEMA_PATH)
DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
SPLITS = {"method": "holdout", "dev": 0.25, "test": 0.25}


def collection(root: Path, docs=None, queries=None) -> dict:
    d, q, qrels = synthetic_collection()
    return write_local_collection(root, docs if docs is not None else d, queries if queries is not None else q, qrels)


# ---- the config ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c.__setitem__("rerank_depth", "ten"), r"config key rerank_depth: 'ten' is not of type 'integer'"),
        (
            lambda c: c["models"].__setitem__("mine", {"type": "bogus"}),
            r"config key models.mine.type: 'bogus' is not one of",
        ),
        (
            lambda c: c["models"]["knrm"].__setitem__("max_doc_len", -5),
            r"config key models.knrm.max_doc_len: -5 is less than the minimum of 1",
        ),
        (
            lambda c: c["models"]["knrm"]["train"].__setitem__("steps", -3),
            r"config key models.knrm.train.steps: -3 is less than the minimum",
        ),
        (
            lambda c: c.__setitem__("rerank_dpth", 3),
            r"'rerank_dpth' was unexpected\); did you mean 'rerank_depth' for 'rerank_dpth'\?",
        ),
        (
            lambda c: c["models"]["knrm"]["train"].__setitem__("stpes", 3),
            r"config key models.knrm.train: .*'stpes' was unexpected\); did you mean 'steps' for 'stpes'\?",
        ),
        (
            lambda c: c.__setitem__("evaluation", {"measurez": ["P@10"]}),
            r"config key evaluation: .*did you mean 'measures' for 'measurez'\?",
        ),
        (
            lambda c: c["models"]["tk"].__setitem__("max_doc_length", 300),
            r"config key models.tk.max_doc_length: not a key of a 'tk' model; did you mean 'max_doc_len'\?",
        ),
        (  # a training key beside the model's: the message says where it goes
            lambda c: c["models"]["knrm"].__setitem__("steps", 40),
            r"config key models.knrm.steps: not a key of a 'knrm' model; 'steps' is a training key: "
            r"models.knrm.train.steps",
        ),
        (
            lambda c: c.__setitem__("dataset", {"name": "x; rm -rf ~", "id": "cranfield"}),
            r"config key dataset.name: 'x; rm -rf ~' is not a safe name",
        ),
        # the collection: a name that is no description, a block that only changes one key of one (it replaces it whole)
        (
            lambda c: c.__setitem__("dataset", "cranfeld"),
            r"config key dataset: 'cranfeld' is neither a shipped collection \(cranfield, irled",
        ),
        (
            lambda c: c.__setitem__("dataset", {"doc_fields": ["title"]}),
            r"config key dataset: this block has no name.*replaces the one before it whole",
        ),
        # grades: integers only; a map reversing their order only where the description says so on purpose
        (
            lambda c: c.__setitem__("dataset", {"name": "x", "id": "cranfield", "gains": {"high": 2}}),
            r"config key dataset.gains.high: a grade must be an integer",
        ),
        (
            lambda c: c.__setitem__("dataset", {"name": "x", "id": "cranfield", "gains": {1: 4, 2: 3}}),
            r"config key dataset.gains: grade 1 gets gain 4 and the higher grade 2 gets 3: the map reverses .*reverses_grades: true",
        ),
        (
            lambda c: c.__setitem__(
                "dataset", {"name": "x", "id": "cranfield", "gains": {0: 0, 1: 1}, "reverses_grades": True}
            ),
            r"config key dataset.gains: dataset.reverses_grades is true but the map keeps the grades' order",
        ),
        # measures through ir-measures' parser when the workflow is parsed, trec_eval's spelling translated
        (
            lambda c: c.__setitem__("evaluation", {"measures": ["nDCG@10", "P_10"]}),
            r"config key evaluation.measures.1: 'P_10' is not a measure ir-measures reads; did you mean 'P@10'",
        ),
        (
            lambda c: c.__setitem__("evaluation", {"measures": ["nDGC@10"]}),
            r"config key evaluation.measures.0: 'nDGC@10' .*did you mean 'nDCG@10'",
        ),
        (
            lambda c: c.__setitem__("evaluation", {"noninferiority_reference": "bert_frstp"}),
            r"config key evaluation.noninferiority_reference: 'bert_frstp' is not a system of this run; did you mean 'bert_firstp'",
        ),
        (
            lambda c: c["models"].__setitem__("$(reboot)", {"type": "knrm"}),
            r"config key models: '\$\(reboot\)' is not a safe name",
        ),
    ],
)
def test_a_malformed_config_names_the_key(change, message):
    config = copy.deepcopy(DEFAULT)
    change(config)
    with pytest.raises(InputError, match=message):
        validate_config(config, SCHEMA)


def test_gains_read_with_quoted_or_unquoted_grades_alike():
    """YAML reads ``{1: 4}`` with integer keys and ``{"1": 4}`` with strings: both are the same map."""
    resolved = []
    for gains in ({1: 4, 2: 3}, {"1": 4, "2": 3}):
        config = copy.deepcopy(DEFAULT)
        config["dataset"] = {"name": "x", "id": "cranfield", "gains": gains, "reverses_grades": True}
        resolved.append(validate_config(config, SCHEMA)["dataset"]["gains"])
    assert resolved[0] == resolved[1] == {"1": 4, "2": 3}


# ---- collection files ----------------------------------------------------------------------------------------
def test_a_document_that_is_not_utf8_names_the_file_and_line(tmp_path):
    dataset = collection(tmp_path / "src")
    with open(dataset["docs"], "ab") as f:
        f.write(b'{"doc_id": "latin1", "text": "caf\xe9 au lait"}\n')
    lines = Path(dataset["docs"]).read_bytes().count(b"\n")
    with pytest.raises(InputError, match=rf"docs.jsonl:{lines}: not UTF-8 text \(byte 0xe9 at column 34\)"):
        prepare(dataset, {}, SPLITS, tmp_path / "data")
    assert not (tmp_path / "data").exists()


def test_binary_or_truncated_files_name_the_file(tmp_path):
    dataset = collection(tmp_path / "src")
    binary = tmp_path / "docs.jsonl"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(InputError, match=r"docs.jsonl:1: not valid JSON"):
        prepare({**dataset, "docs": str(binary)}, {}, SPLITS, tmp_path / "data")
    truncated = tmp_path / "docs.jsonl.gz"
    truncated.write_bytes(gzip.compress(Path(dataset["docs"]).read_bytes())[:200])
    with pytest.raises(InputError, match=r"docs.jsonl.gz: not a complete gzip file"):
        prepare({**dataset, "docs": str(truncated)}, {}, SPLITS, tmp_path / "data")
    not_gzip = tmp_path / "queries.jsonl.gz"
    not_gzip.write_text('{"query_id": "q1", "text": "plain text"}\n')
    with pytest.raises(InputError, match=r"queries.jsonl.gz: not a complete gzip file"):
        prepare({**dataset, "queries": str(not_gzip)}, {}, SPLITS, tmp_path / "data")
    array = tmp_path / "array.jsonl"
    array.write_text('["d1", "text"]\n')
    with pytest.raises(InputError, match=r"array.jsonl:1: expected a JSON object"):
        prepare({**dataset, "docs": str(array)}, {}, SPLITS, tmp_path / "data")


def test_duplicate_query_ids_are_an_error_naming_the_id(tmp_path):
    dataset = collection(tmp_path / "src")
    with open(dataset["queries"], "a") as f:
        f.write("q3\tanother text under the same id\n")
    with pytest.raises(InputError, match=r"duplicate query id 'q3'"):
        prepare(dataset, {}, SPLITS, tmp_path / "data")


def test_runs_and_qrels_that_contradict_themselves_name_the_line(tmp_path):
    run = tmp_path / "mine.run"
    run.write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d1 2 1.0 x\n")
    with pytest.raises(InputError, match=r"mine.run:2: document 'd1' is ranked twice for query 'q1'"):
        read_run(run)
    run.write_text("q1 Q0 d1 1 nan x\n")
    with pytest.raises(InputError, match=r"mine.run:1: the score \(5th column\) must be a finite number"):
        read_run(run)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d1 2\n")
    with pytest.raises(
        InputError, match=r"qrels.txt:2: document 'd1' is judged twice for query 'q1', with grades 1 and 2"
    ):
        read_qrels(qrels)


def test_a_query_left_empty_by_its_formulation_is_named_with_the_fix(tmp_path):
    docs, queries, _ = synthetic_collection()
    dataset = collection(tmp_path / "src", queries={**queries, "q3": "the of and a"})
    with pytest.raises(
        InputError,
        match=r"1 queries are empty after query formulation \(tfidf_terms\): 'q3'.*query_formulation.method: full",
    ):
        prepare(dataset, {"method": "tfidf_terms", "n": 5}, SPLITS, tmp_path / "data")


def test_stop_word_queries_and_a_100k_token_document_are_scored(tmp_path):
    """Handled, not refused: a query of only stop words keeps them (rather than scoring nothing), and a document
    of 100,000 tokens is read up to the model's max_doc_len."""
    docs, queries, _ = synthetic_collection()
    huge = " ".join(["wing lift"] * 50_000)
    dataset = collection(tmp_path / "src", docs={**docs, "huge": huge}, queries={**queries, "q3": "the of and a"})
    prepare(dataset, {"method": "full"}, SPLITS, tmp_path / "data")
    corpus = Corpus(tmp_path / "data")
    model = build_model({"type": "knrm", "max_doc_len": 200}, corpus).eval()
    with torch.no_grad():
        scores = model.score_pairs([corpus.queries["q3"], corpus.queries["q0"]], ["huge", "huge"], [huge, huge])
    assert torch.isfinite(scores).all()
    assert model.encode([corpus.queries["q0"]], ["huge"], [huge])["doc"].shape[-1] == 200


# ---- checkpoints ---------------------------------------------------------------------------------------------
class _Payload:
    """What a hostile pickle does when unpickled: here, create a file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_checkpoints_are_safetensors_of_the_configured_model_or_refused(tiny_data):
    corpus = Corpus(tiny_data / "data")
    knrm = build_model({"type": "knrm"}, corpus)
    save_weights(knrm, tiny_data / "knrm.safetensors")
    with pytest.raises(
        InputError,
        match=r"knrm.safetensors holds a longrank.models.knrm.KNRM model's weights; the config builds a longrank.models.tk.TK",
    ):
        load_model(tiny_data / "knrm.safetensors", {"type": "tk"}, corpus)
    with pytest.raises(
        InputError, match=r"trained with other sizes than the configured model.*dense.weight \(1, 11\) vs \(1, 5\)"
    ):
        load_model(tiny_data / "knrm.safetensors", {"type": "knrm", "n_kernels": 5}, corpus)
    marker = tiny_data / "unpickled"
    torch.save({"dense.weight": _Payload(marker)}, tiny_data / "pickled.safetensors")
    with pytest.raises(InputError, match=r"pickled.safetensors is not a safetensors file .*never unpickled"):
        load_model(tiny_data / "pickled.safetensors", {"type": "knrm"}, corpus)
    assert not marker.exists()
    with pytest.raises(InputError, match=r"missing.safetensors not found; train the model first"):
        load_model(tiny_data / "missing.safetensors", {"type": "knrm"}, corpus)


# ---- the shell -----------------------------------------------------------------------------------------------
@pytest.mark.stage
def test_shell_metacharacters_in_config_values_never_reach_a_shell_unquoted(tmp_path):
    """A working (results) directory whose name holds a space and quotes, and a collection under a directory whose
    name is a shell command: the data, candidates, sanity and evaluate jobs read and write them, and no command runs."""
    workdir = tmp_path / "my results 'it's' \"here\""
    hostile = workdir / "my data; touch PWNED; $(touch PWNED2) `touch PWNED3` 'quoted'"
    dataset = collection(hostile)
    config = {"dataset": dataset, "query_formulation": {"method": "full"}, "splits": SPLITS}
    (workdir / "hostile.yaml").write_text(yaml.safe_dump(config))
    (workdir / "config").symlink_to(REPO / "config")
    snakemake(workdir, "results/tiny/eval/query_term_matches.tsv", "--configfile", str(workdir / "hostile.yaml"))
    assert json.loads((workdir / "results" / "tiny" / "data" / "stats.json").read_text())["num_docs"] > 0
    assert (workdir / "results" / "tiny" / "eval" / "query_term_matches.tsv").stat().st_size > 0
    assert not list(tmp_path.rglob("PWNED*")) and not list(Path.cwd().glob("PWNED*"))


def test_a_full_disk_is_one_line_naming_the_file_not_a_traceback(tmp_path, monkeypatch, capsys):
    """ENOSPC while a stage writes: the command line says what happened and where, exit 2, as for bad input."""
    import errno

    from longrank import cli
    from longrank.io import json_yaml

    def full(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(json_yaml, "write_text", full)  # what write_json writes through
    with pytest.raises(SystemExit) as done:
        cli.main(["resolved_config", "--json", '{"models": {}}', "--out", str(tmp_path / "config.json")])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert f"longrank resolved_config: error: no space left on the device writing {tmp_path / 'config.json'}" in err
    assert "Traceback" not in err and not (tmp_path / "config.json").exists()
