"""The fault catalogue ("nothing stale, corrupt or injected is ever used"): one table of hostile inputs
and faults, each run the way a user meets it, asserting a clear message and that nothing already written is lost.

Kinds (``KINDS`` counts them; ``test_the_catalogue_has_at_least_40_cases`` keeps the count honest):

- ``input``: a collection file is broken. The data stage runs through its command line (``longrank data``, in this
  process) over a results directory that already holds a good data directory: it must exit with status 2, print
  ``longrank data: error: <file>:<line>: ...`` (no traceback), and leave the good directory byte for byte.
- ``handled``: input a user expects to work (a byte-order mark, a document of 0 words, ``a < b > c`` in a TREC
  document, CRLF lines): the data stage succeeds and reads it right.
- ``config``: a path that must be a file names a directory: refused when the config is validated, naming the key.
- ``run_file``: a TREC run the user brings is broken: ``longrank candidates`` names the file and line, and the
  previous candidates file stays as it was.
- ``disk_full``: ENOSPC partway through a write (a checkpoint set, the data directory, a run file): the error
  propagates and the previous output stays whole, with no partial file under a final name.
- ``kill``: ``kill -9`` of the real ``python -m longrank <stage>`` (data, candidates, train, rerank, artifacts) once
  it has started its work: the previous outputs stay byte for byte, nothing partial sits under a final name, and a
  rerun succeeds.
- ``lock``: two workflows on one results directory: Snakemake refuses the second with its lock message; the first
  completes.

Cases covered elsewhere and not repeated here: malformed configs (test_hostile_input.py), corrupt checkpoint sets
(test_checkpoint_integrity.py), a changed input on resume (test_resume_fingerprint.py), shell metacharacters
(test_shell_quoting.py)."""

from __future__ import annotations

import contextlib
import copy
import errno
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from longrank.cli import main as longrank
from longrank.validation.validate import validate_config
from longrank.config.schema import SCHEMA_PATH
from longrank.errors import InputError
from longrank.io.trec_files import read_run, write_run

from conftest import REPO, snakemake_command, synthetic_collection, write_local_collection

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

SPLITS = {"method": "holdout", "dev": 0.25, "test": 0.25}
SCHEMA = str(SCHEMA_PATH)
DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
KNRM = {
    "type": "knrm",
    "max_doc_len": 60,
    "train": {"steps": 400, "batch_size": 4, "lr": 0.01, "eval_every": 8, "patience": 100},
}
KINDS: dict[str, int] = {}


def kind(name: str, cases: list) -> list:
    KINDS[name] = len(cases)
    return cases


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path, with its bytes (what "nothing lost or altered" compares)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run_stage(capsys, *argv: str) -> tuple[int, str]:
    """``longrank <argv>`` as the workflow's shell runs it, in this process: (exit status, what it printed to stderr)."""
    try:
        longrank(list(argv))
        status = 0
    except SystemExit as exit:
        status = exit.code
    return status, capsys.readouterr().err


def assert_clear_error(err: str, stage: str, message: str) -> None:
    """What the user sees ends in one line ``longrank <stage>: error: ...`` matching ``message``, and holds no
    traceback (progress bars may come before it)."""
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"longrank {stage}: error: ") and "Traceback" not in err, err
    assert re.search(message, last), last


def data_stage(capsys, dataset: dict, out: Path, formulation: dict | None = None) -> tuple[int, str]:
    return run_stage(
        capsys,
        "data",
        "--dataset",
        json.dumps(dataset),
        "--query-formulation",
        json.dumps(formulation or {"method": "full"}),
        "--splits",
        json.dumps(SPLITS),
        "--out-dir",
        str(out),
    )


# ---- the collection and the outputs a fault must not touch --------------------------------------------------------
DOCS, QUERIES, QRELS = synthetic_collection(n_queries=8, docs_per_query=4)


TREC_LINES = 6  # lines of one document in trec()


def trec(docs: dict[str, str]) -> str:
    return "".join(f"<DOC>\n<DOCNO> {d} </DOCNO>\n<TEXT>\n{t}\n</TEXT>\n</DOC>\n" for d, t in docs.items())


def jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def doc_records(docs=DOCS) -> list[dict]:
    return [{"doc_id": d, "text": t} for d, t in docs.items()]


def tsv(rows: dict[str, str]) -> str:
    return "".join(f"{k}\t{v}\n" for k, v in rows.items())


def qrels_text(qrels=QRELS) -> str:
    return "".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels)


@pytest.fixture(scope="module")
def good_data(tmp_path_factory) -> Path:
    """A good data directory, prepared once; each case copies it under its own results directory."""
    from longrank.data.data import prepare

    root = tmp_path_factory.mktemp("good")
    prepare(write_local_collection(root / "src", DOCS, QUERIES, QRELS), {"method": "full"}, SPLITS, root / "data")
    return root / "data"


@pytest.fixture
def results(tmp_path, good_data) -> Path:
    """``results/tiny/`` holding the good data directory (the output a failing run must leave alone)."""
    shutil.copytree(good_data, tmp_path / "results" / "tiny" / "data")
    return tmp_path / "results" / "tiny"


def source(
    tmp_path: Path,
    docs: str | bytes | None = None,
    queries: str | bytes | None = None,
    qrels: str | bytes | None = None,
    docs_name: str = "docs.jsonl",
    queries_name: str = "queries.tsv",
    **keys,
) -> dict:
    """A local collection: the good files, with any of them replaced by ``docs`` / ``queries`` / ``qrels`` (text or
    bytes) under the given file names; ``keys`` are more keys of the dataset block."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    files = {
        "docs": (docs_name, docs if docs is not None else jsonl(doc_records())),
        "queries": (queries_name, queries if queries is not None else tsv(QUERIES)),
        "qrels": ("qrels.txt", qrels if qrels is not None else qrels_text()),
    }
    dataset = {"name": "tiny", "source": "local"}
    for key, (name, content) in files.items():
        path = src / name
        if name.endswith(".gz") and isinstance(content, str):
            content = gzip.compress(content.encode())
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(
            content, encoding="utf-8", newline=""
        )
        dataset[key] = str(path)
    return {**dataset, **keys}


BOM = "\ufeff"
FIRST_DOC = next(iter(DOCS))

# ---- kind input: (case id, the collection's files as source() takes them, the message) ----------------------------
INPUT = kind(
    "input",
    [
        # TREC SGML documents
        (
            "trec_unclosed_doc",
            dict(docs=trec(DOCS).replace("</DOC>\n", "", 1), docs_name="docs.trec"),
            r"docs.trec:6: <DOC> inside the <DOC> opened at line 1; expected </DOC> first \(is that one missing its </DOC>\?\)",
        ),
        (
            "trec_unclosed_last_doc",
            dict(docs=trec(DOCS).rstrip().removesuffix("</DOC>"), docs_name="docs.trec"),
            rf"docs.trec:{TREC_LINES * (len(DOCS) - 1) + 1}: this <DOC> is never closed; expected </DOC> before the end of the file",
        ),
        (
            "trec_nested_doc",
            dict(docs="<DOC>\n<DOCNO>a</DOCNO>\n<DOC><DOCNO>b</DOCNO>x</DOC>\n</DOC>\n", docs_name="docs.trec"),
            r"docs.trec:3: <DOC> inside the <DOC> opened at line 1",
        ),
        (
            "trec_close_without_open",
            dict(docs=trec(DOCS) + "</DOC>\n", docs_name="docs.trec"),
            rf"docs.trec:{TREC_LINES * len(DOCS) + 1}: </DOC> closes no <DOC>",
        ),
        (
            "trec_doc_without_docno",
            dict(docs="<DOC>\n<TEXT>no number</TEXT>\n</DOC>\n" + trec(DOCS), docs_name="docs.trec"),
            r"docs.trec:1: the <DOC> opened here has no <DOCNO> elements; expected one <DOCNO>id</DOCNO>",
        ),
        (
            "trec_two_docnos",
            dict(docs="<DOC><DOCNO>a</DOCNO><DOCNO>b</DOCNO>text</DOC>\n", docs_name="docs.trec"),
            r"docs.trec:1: the <DOC> opened here has 2 <DOCNO> elements",
        ),
        (
            "trec_text_outside_doc",
            dict(docs=trec(DOCS) + "stray words\n", docs_name="docs.trec"),
            rf"docs.trec:{TREC_LINES * len(DOCS) + 1}: text outside a <DOC> block \('stray words'\); expected <DOC>",
        ),
        (
            "trec_docno_with_space",
            dict(docs="<DOC><DOCNO>FT 911-1</DOCNO>text</DOC>\n", docs_name="docs.trec"),
            r"docs.trec:1: document id 'FT 911-1' is not one word; ids are columns of TREC run and qrels files",
        ),
        (
            "trec_duplicate_docno",
            dict(docs=trec(DOCS) + trec({FIRST_DOC: "again"}), docs_name="docs.trec"),
            rf"docs.trec:{TREC_LINES * len(DOCS) + 1}: duplicate document id '{FIRST_DOC}' \(given earlier in the file\)",
        ),
        # ids with whitespace, empty ids, duplicate ids: named where they are read
        (
            "jsonl_doc_id_with_space",
            dict(docs=jsonl(doc_records() + [{"doc_id": "d 1", "text": "x"}])),
            rf"docs.jsonl:{len(DOCS) + 1}: document id 'd 1' is not one word",
        ),
        (
            "jsonl_doc_id_with_tab",
            dict(docs=jsonl([{"doc_id": "d\t1", "text": "x"}] + doc_records())),
            r"docs.jsonl:1: document id 'd\\t1' is not one word",
        ),
        (
            "jsonl_doc_id_empty",
            dict(docs=jsonl([{"doc_id": "", "text": "x"}] + doc_records())),
            r"docs.jsonl:1: document id '' is empty",
        ),
        (
            "tsv_doc_id_with_space",
            dict(docs=tsv({**DOCS, "d 9": "text"}), docs_name="docs.tsv"),
            rf"docs.tsv:{len(DOCS) + 1}: document id 'd 9' is not one word",
        ),
        (
            "tsv_query_id_with_space",
            dict(queries=tsv({"q 0": "wing lift", **QUERIES})),
            r"queries.tsv:1: query id 'q 0' is not one word",
        ),
        (
            "jsonl_query_id_with_space",
            dict(queries=jsonl([{"query_id": "q 0", "text": "wing"}]), queries_name="queries.jsonl"),
            r"queries.jsonl:1: query id 'q 0' is not one word",
        ),
        (
            "tsv_query_id_empty",
            dict(queries=tsv(QUERIES) + "\twing lift\n"),
            rf"queries.tsv:{len(QUERIES) + 1}: query id '' is empty",
        ),
        (
            "jsonl_duplicate_doc_id",
            dict(docs=jsonl(doc_records() + [{"doc_id": FIRST_DOC, "text": "again"}])),
            rf"docs.jsonl:{len(DOCS) + 1}: duplicate document id '{FIRST_DOC}' \(given earlier in the file\)",
        ),
        (
            "tsv_duplicate_doc_id",
            dict(docs=tsv(DOCS) + f"{FIRST_DOC}\tagain\n", docs_name="docs.tsv"),
            rf"docs.tsv:{len(DOCS) + 1}: duplicate document id '{FIRST_DOC}'",
        ),
        (
            "tsv_duplicate_query_id",
            dict(queries=tsv(QUERIES) + "q3\tanother text\n"),
            rf"queries.tsv:{len(QUERIES) + 1}: duplicate query id 'q3'",
        ),
        (
            "jsonl_duplicate_query_id",
            dict(
                queries=jsonl([{"query_id": "q1", "text": "a"}, {"query_id": "q1", "text": "b"}]),
                queries_name="queries.jsonl",
            ),
            r"queries.jsonl:2: duplicate query id 'q1'",
        ),
        # an empty query
        (
            "tsv_empty_query",
            dict(queries=tsv({**QUERIES, "q5": ""})),
            r"queries.tsv:6: this query has no text; expected words",
        ),
        ("tsv_blank_query", dict(queries=tsv({**QUERIES, "q2": "   "})), r"queries.tsv:3: this query has no text"),
        (
            "jsonl_empty_query",
            dict(
                queries=jsonl([{"query_id": q, "text": "" if q == "q1" else t} for q, t in QUERIES.items()]),
                queries_name="queries.jsonl",
            ),
            r"queries.jsonl:2: this query has no text",
        ),
        # files missing, of the wrong kind, or not text
        (
            "docs_not_utf8",
            dict(docs=jsonl(doc_records()).encode() + b'{"doc_id": "x", "text": "caf\xe9"}\n'),
            rf"docs.jsonl:{len(DOCS) + 1}: not UTF-8 text \(byte 0xe9 at column 29\)",
        ),
        (
            "docs_truncated_gzip",
            dict(docs=gzip.compress(jsonl(doc_records()).encode())[:150], docs_name="docs.jsonl.gz"),
            r"docs.jsonl.gz: not a complete gzip file",
        ),
        (
            "queries_not_gzip",
            dict(queries=jsonl([{"query_id": "q0", "text": "x"}]).encode(), queries_name="queries.jsonl.gz"),
            r"queries.jsonl.gz: not a complete gzip file",
        ),
        ("docs_binary", dict(docs=bytes(range(1, 128)) * 3), r"docs.jsonl:1: not valid JSON"),
        (
            "jsonl_not_json",
            dict(docs=jsonl(doc_records()) + "{doc_id: x}\n"),
            rf"docs.jsonl:{len(DOCS) + 1}: not valid JSON .*expected one JSON object per line",
        ),
        (
            "jsonl_array_not_object",
            dict(docs='["d1", "text"]\n'),
            r"docs.jsonl:1: expected a JSON object with an id and a text field, got list",
        ),
        (
            "jsonl_no_id_field",
            dict(docs=jsonl([{"name": "d1", "text": "x"}])),
            r"docs.jsonl:1: no document id field; expected one of \['doc_id', 'docno', 'id'\]",
        ),
        (
            "jsonl_no_text_field",
            dict(docs=jsonl([{"doc_id": "d1", "body": "x"}])),
            r"docs.jsonl:1: no text field; expected \['text'\]",
        ),
        (
            "tsv_docs_without_tab",
            dict(docs=tsv(DOCS) + "d9 no tab here\n", docs_name="docs.tsv"),
            rf"docs.tsv:{len(DOCS) + 1}: expected 'document id<TAB>text', got 'd9 no tab here'",
        ),
        ("tsv_queries_without_tab", dict(queries="q0 wing lift\n"), r"queries.tsv:1: expected 'query id<TAB>text'"),
        (
            "queries_of_unknown_format",
            dict(queries="q0 wing\n", queries_name="queries.txt"),
            r"dataset.queries: .*queries.txt must be .jsonl\(.gz\) or .tsv",
        ),
        # qrels
        (
            "qrels_three_columns",
            dict(qrels="q0 d0_0 1\n"),
            r"qrels.txt:1: expected a TREC qrels line 'qid iter docid grade', got 'q0 d0_0 1'",
        ),
        (
            "qrels_grade_not_integer",
            dict(qrels=qrels_text() + "q0 0 d0_1 high\n"),
            rf"qrels.txt:{len(QRELS) + 1}: relevance grade 'high' is not an integer",
        ),
        (
            "qrels_judged_twice",
            dict(qrels=qrels_text() + "q0 0 d0_0 0\n"),
            rf"qrels.txt:{len(QRELS) + 1}: document 'd0_0' is judged twice for query 'q0', with grades 1 and 0",
        ),
        (
            "qrels_judge_no_query_of_the_collection",
            dict(qrels=qrels_text([(f"t{q}", d, g) for q, d, g in QRELS])),
            r"qrels name 8 queries that are not in the query file: 'tq0', 'tq1'",
        ),
        (
            "qrels_judge_no_test_query_relevant",
            dict(qrels=qrels_text([(q, d, 0) for q, d, _ in QRELS])),
            r"dataset.qrels: no query of the collection has a relevant judged document \(8 of its 8 queries judged",
        ),
        # documents of 0 words
        (
            "every_document_empty",
            dict(docs=jsonl([{"doc_id": d, "text": " "} for d in DOCS])),
            r"the collection has no non-empty documents",
        ),
        (
            "empty_document_refused_on_request",
            dict(docs=jsonl(doc_records() + [{"doc_id": "blank", "text": ""}]), empty_documents="error"),
            r"1 empty documents: 'blank' \(set dataset.empty_documents: drop to skip them\)",
        ),
        (
            "queries_missing",
            dict(queries_name="queries.tsv", missing="queries"),
            r"dataset.queries: file .*missing-queries.tsv not found \(paths are relative",
        ),
        ("docs_missing", dict(missing="docs"), r"dataset.docs: file .*missing-docs.jsonl not found"),
        ("qrels_missing", dict(missing="qrels"), r"dataset.qrels: file .*missing-qrels.txt not found"),
        ("docs_a_directory", dict(directory="docs"), r"dataset.docs: .*src is a directory; expected a file"),
        (
            "train_qrels_missing",
            dict(train_queries="QUERIES", train_qrels="missing"),
            r"dataset.train_qrels: file .*nothing.txt not found",
        ),
    ],
)


def input_dataset(tmp_path: Path, files: dict) -> dict:
    files = dict(files)
    missing, directory = files.pop("missing", None), files.pop("directory", None)
    train_queries, _train_qrels = files.pop("train_queries", None), files.pop("train_qrels", None)
    dataset = source(tmp_path, **files)
    if missing:
        dataset[missing] = str(tmp_path / "src" / f"missing-{Path(dataset[missing]).name}")
    if directory:
        dataset[directory] = str(tmp_path / "src")
    if train_queries:
        (tmp_path / "src" / "train.tsv").write_text("t0\twing lift\n")
        dataset.update(
            train_queries=str(tmp_path / "src" / "train.tsv"), train_qrels=str(tmp_path / "src" / "nothing.txt")
        )
    return dataset


@pytest.mark.parametrize("files, message", [pytest.param(files, message, id=case) for case, files, message in INPUT])
def test_broken_input_is_named_and_the_previous_data_survive(tmp_path, results, capsys, files, message):
    before = snapshot(results)
    status, err = data_stage(capsys, input_dataset(tmp_path, files), results / "data")
    assert status == 2, err
    assert_clear_error(err, "data", message)
    assert snapshot(results) == before  # the good data directory byte for byte, and no staging directory left


# ---- kind handled: input a user expects to work ---------------------------------------------------------------
def read_docs(data: Path) -> dict[str, str]:
    return {r["doc_id"]: r["text"] for r in map(json.loads, (data / "docs.jsonl").read_text().splitlines())}


def bom_everywhere(tmp_path):
    return source(tmp_path, docs=BOM + jsonl(doc_records()), queries=BOM + tsv(QUERIES), qrels=BOM + qrels_text())


def check_bom(data: Path):
    assert FIRST_DOC in read_docs(data) and "q0" in (data / "queries.tsv").read_text().splitlines()[1].split("\t")[0]
    assert (data / "qrels.txt").read_text().startswith("q0 0 ")


def trec_with_signs(tmp_path):
    docs = {**DOCS, "math": "<TEXT><P>if a < b > c then</P><F P=105>x</F></TEXT>"}
    return source(tmp_path, docs=trec(docs).replace("<TEXT>\n<TEXT>", "<TEXT>"), docs_name="docs.trec")


def check_signs(data: Path):
    assert " ".join(read_docs(data)["math"].split()) == "if a < b > c then x"
    assert read_docs(data)[FIRST_DOC] == DOCS[FIRST_DOC]


def zero_word_document(tmp_path):
    return source(
        tmp_path, docs=jsonl(doc_records() + [{"doc_id": "blank", "text": ""}, {"doc_id": "spaces", "text": " \n\t "}])
    )


def check_zero_words(data: Path):
    stats = json.loads((data / "stats.json").read_text())
    assert stats["empty_docs_dropped"] == 2 and "blank" not in read_docs(data) and stats["num_docs"] == len(DOCS)


def crlf_lines(tmp_path):
    return source(
        tmp_path,
        docs=tsv(DOCS).replace("\n", "\r\n"),
        docs_name="docs.tsv",
        queries=tsv(QUERIES).replace("\n", "\r\n"),
        qrels=qrels_text().replace("\n", "\r\n"),
    )


def check_crlf(data: Path):
    assert read_docs(data) == DOCS and "\r" not in (data / "queries.tsv").read_text()


def trec_one_line_blocks(tmp_path):
    return source(
        tmp_path,
        docs="".join(f"<doc><docno>{d}</docno>{t}</doc>" for d, t in DOCS.items()) + "\n",
        docs_name="docs.sgml",
    )


def check_one_line_blocks(data: Path):
    assert read_docs(data) == DOCS


def gzipped_queries_jsonl(tmp_path):
    return source(
        tmp_path,
        queries=jsonl([{"query_id": q, "text": t} for q, t in QUERIES.items()]),
        queries_name="queries.jsonl.gz",
    )


def check_queries(data: Path):
    assert len((data / "queries.tsv").read_text().splitlines()) == len(QUERIES) + 1


def judged_document_not_in_the_collection(tmp_path):
    return source(tmp_path, qrels=qrels_text() + "q0 0 nowhere 1\n")


def check_judged_missing(data: Path):
    """Counted and reported (a judged document missing from the collection is no crash), the rest read."""
    missing = json.loads((data / "stats.json").read_text())["missing_judged_documents"]
    assert missing == {
        "test": {
            "judgments": 1,
            "relevant": 1,
            "documents": 1,
            "queries_without_relevant": [],
            "examples": ["q0:nowhere"],
        }
    }
    assert "nowhere" not in (data / "qrels.txt").read_text() and "q0 0 d0_0" in (data / "qrels.txt").read_text()


HANDLED = kind(
    "handled",
    [
        pytest.param(judged_document_not_in_the_collection, check_judged_missing, id="judged_document_missing_counted"),
        pytest.param(bom_everywhere, check_bom, id="bom_in_docs_queries_and_qrels_dropped"),
        pytest.param(
            lambda t: source(t, docs=BOM + trec(DOCS), docs_name="docs.trec"),
            lambda d: read_docs(d) == DOCS,
            id="bom_in_trec_docs_dropped",
        ),
        pytest.param(trec_with_signs, check_signs, id="trec_text_a_lt_b_gt_c_kept_markup_stripped"),
        pytest.param(zero_word_document, check_zero_words, id="documents_of_0_words_dropped"),
        pytest.param(crlf_lines, check_crlf, id="crlf_line_ends"),
        pytest.param(trec_one_line_blocks, check_one_line_blocks, id="trec_blocks_on_one_line_lower_case"),
        pytest.param(gzipped_queries_jsonl, check_queries, id="gzipped_jsonl_queries"),
    ],
)


@pytest.mark.parametrize("make, check", HANDLED)
def test_input_a_user_expects_to_work_is_read_right(tmp_path, capsys, make, check):
    status, err = data_stage(capsys, make(tmp_path), tmp_path / "data")
    assert status == 0, err
    assert check(tmp_path / "data") is not False


# ---- kind config: a directory where a file is expected, refused when the config is validated ---------------------
def config_with(tmp_path: Path, key: str) -> dict:
    config = copy.deepcopy(DEFAULT)
    dataset = write_local_collection(tmp_path / "src", DOCS, QUERIES, QRELS)
    if key.startswith("dataset."):
        dataset[key.split(".")[1]] = str(tmp_path / "src")
        if key == "dataset.train_qrels":
            dataset["train_queries"] = dataset["queries"]
    config["dataset"] = dataset
    if key == "first_stages.mine.path":
        config["first_stages"] = [{"name": "mine", "method": "run_file", "path": str(tmp_path)}]
    return config


CONFIG = kind(
    "config", ["dataset.docs", "dataset.queries", "dataset.qrels", "dataset.train_qrels", "first_stages.mine.path"]
)


@pytest.mark.parametrize("key", CONFIG)
def test_a_directory_given_for_a_file_is_refused_with_the_key(tmp_path, key):
    with pytest.raises(InputError, match=rf"config key {key}: .* is a directory; expected a file"):
        validate_config(config_with(tmp_path, key), SCHEMA)


def test_a_file_that_does_not_exist_yet_is_left_to_the_stage_that_reads_it(tmp_path):
    """Another job (or the user) may make it before the data stage runs: the data stage names the key then."""
    config = copy.deepcopy(DEFAULT)
    config["dataset"] = {
        **write_local_collection(tmp_path / "src", DOCS, QUERIES, QRELS),
        "docs": str(tmp_path / "later.jsonl"),
    }
    assert validate_config(config, SCHEMA)["dataset"]["docs"] == str(tmp_path / "later.jsonl")


# ---- kind run_file: a run the user brings ---------------------------------------------------------------------
RUN = "".join(
    f"{q} Q0 {d} {i + 1} {10 - i} theirs\n"
    for q in QUERIES
    for i, d in enumerate(d for d in DOCS if d.startswith(f"d{q[1:]}_"))
)
RUN_FILE = kind(
    "run_file",
    [
        (
            "run_five_columns",
            RUN + "q0 Q0 d0_0 1 2.0\n",
            rf"mine.run:{RUN.count(chr(10)) + 1}: expected a TREC run line 'qid Q0 docid rank score tag'",
        ),
        (
            "run_score_not_a_number",
            "q0 Q0 d0_0 1 high theirs\n",
            r"mine.run:1: the score \(5th column\) must be a number, got 'high'",
        ),
        ("run_score_nan", "q0 Q0 d0_0 1 nan theirs\n", r"mine.run:1: the score \(5th column\) must be a finite number"),
        (
            "run_document_ranked_twice",
            "q0 Q0 d0_0 1 2 theirs\nq0 Q0 d0_0 2 1 theirs\n",
            r"mine.run:2: document 'd0_0' is ranked twice for query 'q0'",
        ),
        (
            "run_of_another_collection",
            "x1 Q0 d0_0 1 2 theirs\n",
            r"mine.run: none of its 1 query ids is a query of the collection",
        ),
        ("run_not_utf8", b"q0 Q0 d0_0 1 2 th\xe9irs\n", r"mine.run:1: not UTF-8 text"),
        ("run_file_missing", None, r"config key first_stages.mine.path: run file .*mine.run not found"),
        (
            "run_file_a_directory",
            "directory",
            r"config key first_stages.mine.path: .*mine.run is a directory; expected a TREC run file",
        ),
    ],
)


@pytest.fixture
def candidates_dir(results) -> Path:
    """``results/tiny/candidates/mine.run`` from an earlier good run (the output a failing run must leave alone)."""
    write_run(results / "candidates" / "mine.run", {"q0": {"d0_0": 1.0}}, "old")
    return results / "candidates"


def candidates_stage(capsys, results: Path, path: Path) -> tuple[int, str]:
    spec = {"name": "mine", "method": "run_file", "path": str(path), "top_k": 10}
    return run_stage(
        capsys,
        "candidates",
        "--data",
        str(results / "data"),
        "--first-stage",
        json.dumps(spec),
        "--out",
        str(results / "candidates" / "mine.run"),
    )


@pytest.mark.parametrize("content, message", [pytest.param(c, m, id=case) for case, c, m in RUN_FILE])
def test_a_broken_run_file_is_named_and_the_previous_candidates_survive(
    tmp_path, results, candidates_dir, capsys, content, message
):
    path = tmp_path / "theirs" / "mine.run"
    path.parent.mkdir()
    if content == "directory":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    before = snapshot(results)
    status, err = candidates_stage(capsys, results, path)
    assert status == 2, err
    assert_clear_error(err, "candidates", message)
    assert snapshot(results) == before


def test_a_run_file_with_a_bom_is_read(tmp_path, results, candidates_dir, capsys):
    path = tmp_path / "mine.run"
    path.write_text(BOM + RUN)
    status, err = candidates_stage(capsys, results, path)
    assert status == 0, err
    assert set(read_run(results / "candidates" / "mine.run")) == set(QUERIES)  # q0 too, not '\ufeffq0'


KINDS["handled"] += 2  # the run file with a BOM, and a file path that does not exist yet at validation


# ---- kind disk_full: ENOSPC partway through a write --------------------------------------------------------------
def full_disk_after_half(monkeypatch, target, name: str, what: str):
    """Make ``target.name`` (a function writing a file given as its second argument, or a Path method) write half
    its bytes and then fail as a full disk does."""
    original = getattr(target, name)

    def half_then_enospc(*args, **kwargs):
        path = Path(args[1] if what == "second" else args[0])
        original(*args, **kwargs)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(target, name, half_then_enospc)


@pytest.mark.parametrize("victim", ["last.safetensors", "optimizer.safetensors"])
def test_a_full_disk_during_a_checkpoint_write_keeps_the_set_before(tmp_path, monkeypatch, victim):
    import torch

    from longrank.models import checkpoint as model_checkpoint
    from longrank.train import state_sets, train_state
    from longrank.train.position import TrainingPosition

    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 4)).sum().backward()
    optimizer.step()
    state = tmp_path / "train_state"
    first = train_state.save_training_state(state, model, optimizer, None, TrainingPosition(step=8))
    before = snapshot(state)
    target = model_checkpoint if victim == "last.safetensors" else train_state
    full_disk_after_half(monkeypatch, target, "save_file", "second")
    with torch.no_grad():
        model.weight.add_(1.0)
    with pytest.raises(OSError, match="No space left on device") as err:
        train_state.save_training_state(state, model, optimizer, None, TrainingPosition(step=16))
    assert err.value.errno == errno.ENOSPC and victim in err.value.filename
    assert snapshot(state) == before  # no partial set, no set for step 16, step 8 whole
    assert state_sets.newest_good_set(state) == first


KINDS["disk_full"] = 2


def test_a_full_disk_while_the_data_stage_writes_keeps_the_previous_data(tmp_path, results, monkeypatch):
    from longrank.data.data import prepare

    before = snapshot(results)
    original = Path.write_text

    def enospc_on_queries(self, text, *args, **kwargs):
        if self.name.startswith(".queries.tsv"):  # the temporary name atomic_path gives it
            original(self, text[: len(text) // 2], *args, **kwargs)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", enospc_on_queries)
    with pytest.raises(OSError, match="No space left on device"):
        prepare(
            source(tmp_path, docs=jsonl(doc_records({**DOCS, FIRST_DOC: "changed text"}))),
            {"method": "full"},
            SPLITS,
            results / "data",
        )
    assert snapshot(results) == before


def test_a_full_disk_while_a_run_is_written_keeps_the_previous_run(tmp_path, monkeypatch):
    out = tmp_path / "runs" / "knrm.run"
    write_run(out, {"q0": {"d0_0": 1.0}}, "old")
    before = snapshot(tmp_path / "runs")
    full_disk_after_half(monkeypatch, Path, "write_text", "first")
    with pytest.raises(OSError, match="No space left on device"):
        write_run(out, {q: {d: 1.0 for d in DOCS} for q in QUERIES}, "new")
    assert snapshot(tmp_path / "runs") == before


KINDS["disk_full"] += 2


# ---- kind kill: kill -9 of each long stage ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def stages(tmp_path_factory) -> Path:
    """A collection big enough that each stage runs for a few seconds, and every stage's outputs from a complete
    run: ``results/tiny/{data, candidates/bm25.run, models/knrm/fold0, runs/knrm.run, artifacts/ndrm/fold0}``."""
    import torch

    from longrank import artifacts
    from longrank.data.corpus import Corpus
    from longrank.data.data import prepare
    from longrank.rerank import RerankJob, rerank
    from longrank.retrieval.bm25 import bm25_run
    from longrank.train import train as train_stage

    root = tmp_path_factory.mktemp("stages")
    docs, queries, qrels = synthetic_collection(n_queries=60, docs_per_query=40)
    dataset = write_local_collection(root / "src", docs, queries, qrels)
    (root / "dataset.json").write_text(json.dumps(dataset))
    results = root / "results" / "tiny"
    prepare(dataset, {"method": "full"}, SPLITS, results / "data")
    corpus = Corpus(results / "data")
    write_run(results / "candidates" / "bm25.run", bm25_run(corpus.docs, corpus.queries, top_k=100), "bm25")
    candidates = read_run(results / "candidates" / "bm25.run")
    # a run file ranking every document for every query: reading and checking it takes the candidates stage seconds
    write_run(root / "theirs.run", {q: {d: float(i) for i, d in enumerate(docs)} for q in queries}, "theirs")
    quick = {**KNRM, "train": {**KNRM["train"], "steps": 8}}
    train_stage.train(
        "knrm",
        quick,
        corpus,
        candidates,
        0,
        100,
        torch.device("cpu"),
        results / "models" / "knrm" / "fold0" / "model.safetensors",
    )
    rerank(
        RerankJob(
            "knrm",
            quick,
            corpus,
            candidates,
            [str(results / "models" / "knrm" / "fold0" / "model.safetensors")],
            100,
            16,
            torch.device("cpu"),
            results / "runs",
        )
    )
    ndrm = {
        "type": "ndrm",
        "hidden_dim": 16,
        "n_heads": 4,
        "conv_groups": 4,
        "conv_window": 5,
        "n_layers": 1,
        "max_doc_len": 60,
        "pool_window": 16,
        "pool_stride": 8,
        "max_query_len": 8,
    }
    from longrank.models.checkpoint import save_weights
    from longrank.models.registry import build_model

    save_weights(build_model(ndrm, corpus), results / "models" / "ndrm" / "fold0" / "model.safetensors")
    artifacts.build(
        ndrm,
        corpus,
        "fold",
        results / "artifacts" / "ndrm" / "fold0",
        results / "models" / "ndrm" / "fold0" / "model.safetensors",
    )
    (root / "ndrm.json").write_text(json.dumps(ndrm))
    return root


def stage_argv(root: Path, results: Path, stage: str) -> tuple[list[str], Path]:
    """The stage's command line as its rule writes it, and the directory whose outputs it must not damage."""
    model = ["--model", "knrm", "--model-config", json.dumps(KNRM), "--data", str(results / "data")]
    candidates = str(results / "candidates" / "bm25.run")
    argv = {
        "data": (
            [
                "--dataset",
                (root / "dataset.json").read_text(),
                "--query-formulation",
                '{"method": "full"}',
                "--splits",
                json.dumps(SPLITS),
                "--out-dir",
                str(results / "data"),
            ],
            results / "data",
        ),
        "candidates": (
            [
                "--data",
                str(results / "data"),
                "--out",
                candidates,
                "--first-stage",
                json.dumps({"name": "bm25", "method": "run_file", "path": str(root / "theirs.run"), "top_k": 1000}),
            ],
            results / "candidates",
        ),
        "train": (
            [
                *model,
                "--candidates",
                candidates,
                "--fold",
                "0",
                "--rerank-depth",
                "100",
                "--device",
                "cpu",
                "--out",
                str(results / "models" / "knrm" / "fold0" / "model.safetensors"),
            ],
            results / "models" / "knrm",
        ),
        "rerank": (
            [
                *model,
                "--candidates",
                candidates,
                "--checkpoints",
                str(results / "models" / "knrm" / "fold0" / "model.safetensors"),
                "--rerank-depth",
                "100",
                "--device",
                "cpu",
                "--out-dir",
                str(results / "runs"),
            ],
            results / "runs",
        ),
        "artifacts": (
            [
                "--model-config",
                str(root / "ndrm.json"),
                "--scope",
                "fold",
                "--checkpoint",
                str(results / "models" / "ndrm" / "fold0" / "model.safetensors"),
                "--data",
                str(results / "data"),
                "--device",
                "cpu",
                "--batch-size",
                "2",
                "--out",
                str(results / "artifacts" / "ndrm" / "fold0"),
            ],
            results / "artifacts" / "ndrm",
        ),
    }[stage]
    return ["python", "-m", "longrank", stage, *argv[0]], argv[1]


def started(pid: int, results: Path, outputs: Path, stderr: Path) -> bool:
    """The stage is at work: it holds a file of the results open (an input it reads, an output it writes), a
    temporary output or staging directory exists beside its outputs, or it has logged past its imports."""
    try:
        open_files = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
    except OSError:  # ended, or no /proc: the other signs
        open_files = []
    temporaries = [p for p in outputs.parent.rglob(".*") if p.name.endswith(".tmp") or p.name.startswith(".partial-")]
    return (
        any(f.startswith(str(results)) for f in open_files)
        or bool(temporaries)
        or " INFO " in stderr.read_text(errors="replace")
    )


def kill_when_started(argv: list[str], cwd: Path, outputs: Path, log: Path, delay: float) -> bool:
    """Start the stage, SIGKILL it ``delay`` seconds after it has started its work; whether the kill found it
    still running (a stage on a tiny collection may finish first: the caller tries again, sooner)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    with open(log, "w") as stderr:
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    deadline = time.monotonic() + 120
    while (
        process.poll() is None
        and not started(process.pid, cwd / "results", outputs, log)
        and time.monotonic() < deadline
    ):
        time.sleep(0.005)
    time.sleep(delay)
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGKILL)
    return process.wait(timeout=30) == -signal.SIGKILL


def final_outputs(directory: Path) -> dict[str, bytes]:
    """Files under their final names: temporaries a killed writer leaves (``.name.*.tmp``, ``.partial-*``) are
    never read by a stage, so they are not outputs."""
    return {
        k: v
        for k, v in snapshot(directory).items()
        if not any(
            part.startswith(".") and (part.endswith(".tmp") or part.startswith(".partial-")) for part in Path(k).parts
        )
    }


KILLED = kind("kill", ["data", "candidates", "train", "rerank", "artifacts"])


@pytest.mark.stage
@pytest.mark.parametrize("stage", KILLED)
def test_kill_9_of_a_stage_keeps_its_previous_outputs_and_a_rerun_succeeds(tmp_path, stages, stage):
    for attempt, delay in enumerate((0.3, 0.05, 0.0)):  # sooner each time the stage finished before the kill
        root = tmp_path / f"attempt{attempt}"
        shutil.copytree(stages, root, symlinks=True)
        results = root / "results" / "tiny"
        argv, outputs = stage_argv(root, results, stage)
        before = final_outputs(results)
        if kill_when_started(argv, root, outputs, tmp_path / f"killed{attempt}.log", delay):
            break
    else:
        pytest.fail(f"the {stage} stage ended before it could be killed, three times")
    after = final_outputs(results)
    done = subprocess.run(argv, cwd=root, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    rerun = final_outputs(results)
    # Killed at work, the stage left every earlier output as it was; killed as it ended, its outputs were all in place
    # already: what a complete run writes. Never a mix, never a partial file.
    assert comparable(after) == comparable(before) or comparable(after, stamped=False) == comparable(
        rerun, stamped=False
    )


def comparable(outputs: dict[str, bytes], stamped: bool = True) -> dict[str, bytes]:
    """Outputs to compare: without the killed run's checkpoint sets (its own, complete and verified, and what a rerun
    resumes from) and, between two runs (``stamped=False``), without the document index, which records the time its
    docs.jsonl was written (and is rebuilt by the store whenever that does not match), and without the runs'
    provenance (``<run>.meta.yaml``: when it was created and the stage's wall time)."""
    return {
        k: v
        for k, v in outputs.items()
        if "train_state" not in k and (stamped or not k.endswith(("docs.index.sqlite", ".meta.yaml", ".sha256.json")))
    }


# ---- kind lock: two workflows on one results directory ----------------------------------------------------------
KINDS["lock"] = 1


@pytest.mark.stage
def test_a_second_workflow_on_the_same_results_is_refused_and_the_first_completes(tmp_path):
    """The first workflow's data job runs through a gate, a ``python`` first on its PATH that waits for a file before
    it runs the stage, so it holds Snakemake's lock, at work, until the test opens it: the second is started in that
    window, deterministically. (A named pipe for the documents did this before; a collection file must now be a
    regular file.)"""
    dataset = write_local_collection(tmp_path / "src", DOCS, QUERIES, QRELS)
    gate = tmp_path / "gate"
    gate.mkdir()
    (gate / "python").write_text(
        f'#!/bin/sh\ntouch "{gate}/waiting"\nwhile [ ! -e "{gate}/open" ]; do sleep 0.1; done\nexec {sys.executable} "$@"\n'
    )
    (gate / "python").chmod(0o755)
    (tmp_path / "tiny.yaml").write_text(
        yaml.safe_dump({"dataset": dataset, "query_formulation": {"method": "full"}, "splits": SPLITS})
    )
    (tmp_path / "config").symlink_to(REPO / "config")
    cmd, env = snakemake_command(
        tmp_path, "results/tiny/data/stats.json", "--configfile", str(tmp_path / "tiny.yaml"), cores=1
    )
    gated = {**env, "PATH": f"{gate}:{env['PATH']}"}
    first = subprocess.Popen(cmd, cwd=tmp_path, env=gated, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (gate / "waiting").exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # the data job is running: it waits at the gate
        assert first.poll() is None, first.communicate()[0][-3000:]
        second = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert second.returncode != 0
        assert (
            "Directory cannot be locked" in second.stdout + second.stderr
            and "Traceback" not in second.stdout + second.stderr
        )
        (gate / "open").touch()
        output, _ = first.communicate(timeout=300)
    finally:
        (gate / "open").touch()
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, output[-3000:]
    assert json.loads((tmp_path / "results" / "tiny" / "data" / "stats.json").read_text())["num_docs"] == len(DOCS)


def test_the_catalogue_has_at_least_40_cases():
    assert sum(KINDS.values()) >= 40, KINDS
