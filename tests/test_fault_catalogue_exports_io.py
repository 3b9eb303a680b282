"""The fault catalogue's classes of ownership, exports and reads (``tests/test_fault_catalogue.py`` holds the rest): results owned by one
workflow, exports read as data, bounded reads. Each case runs the way a user meets the fault and asserts the clear
message (naming the key, the file, the line) and that nothing already written was lost or changed.

Kinds (``KINDS`` counts them):

- ``bounded_read``: a collection or run file that is not a regular file (``/dev/zero``, a named pipe), or larger
  than ``dataset.max_file_gb`` (or decompressing past it): refused before reading, at validation and by the stage.
- ``json_id``: a JSON lines document whose id is null, an array or an object: named as such, with its line.
- ``disk_full``: ENOSPC raised by ``write()`` (which names no file): the stage's one-line error names the output.
- ``export``: an exported ranker whose ``ranker.json`` points outside its folder or gives sizes its weights do not
  have: refused naming the key, never echoing a line of the file it points at, before anything is allocated.
- ``shared_results`` (e2e: runs the workflow): two checkouts whose ``results/`` is one folder (a symlink).

The quick cases are unit tests; the workflow cases run a real (one-job) Snakemake DAG, so they are marked e2e, and share
one small data-stage run."""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from longrank.validation.validate import validate_config
from longrank.config.schema import SCHEMA_PATH
from longrank.errors import InputError
from longrank.io.trec_files import write_run

from conftest import REPO, snakemake_command, synthetic_collection, write_local_collection
from test_fault_catalogue import run_stage, snapshot  # the catalogue's own helpers

SPLITS = {"method": "holdout", "dev": 0.25, "test": 0.25}
DOCS, QUERIES, QRELS = synthetic_collection(n_queries=8, docs_per_query=4)
KINDS: dict[str, int] = {}


def kind(name: str, cases: list) -> list:
    KINDS[name] = KINDS.get(name, 0) + len(cases)
    return cases


def assert_clear_error(err: str, stage: str, message: str) -> str:
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"longrank {stage}: error: ") and "Traceback" not in err, err
    assert re.search(message, last), last
    return last


def data_stage(capsys, dataset: dict, out: Path) -> tuple[int, str]:
    return run_stage(
        capsys,
        "data",
        "--dataset",
        json.dumps(dataset),
        "--query-formulation",
        json.dumps({"method": "full"}),
        "--splits",
        json.dumps(SPLITS),
        "--out-dir",
        str(out),
    )


@pytest.fixture(scope="module")
def good_data(tmp_path_factory) -> Path:
    from longrank.data.data import prepare

    root = tmp_path_factory.mktemp("good")
    prepare(write_local_collection(root / "src", DOCS, QUERIES, QRELS), {"method": "full"}, SPLITS, root / "data")
    return root / "data"


@pytest.fixture
def results(tmp_path, good_data) -> Path:
    """``results/tiny/`` holding a good data directory: the output a failing run must leave byte for byte."""
    shutil.copytree(good_data, tmp_path / "results" / "tiny" / "data")
    return tmp_path / "results" / "tiny"


def jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def fifo(tmp_path: Path) -> str:
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)
    return str(path)


def sparse(tmp_path: Path, size: int, name: str = "huge.jsonl") -> str:
    """A file of ``size`` bytes that takes no disk (a hole): its size is what a bound reads, before any byte."""
    path = tmp_path / name
    with open(path, "wb") as f:
        f.truncate(size)
    return str(path)


def gzip_bomb(tmp_path: Path) -> str:
    """A small .gz whose JSON lines decompress to ~2 MB: past a max_file_gb of 1 MB only once read."""
    import gzip

    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(gzip.compress(jsonl([{"doc_id": f"d{i}", "text": "wing " * 40} for i in range(10_000)]).encode()))
    assert path.stat().st_size < 10**6
    return str(path)


# ---- kind bounded_read: what is not a regular file, or too big, is refused before a byte is read ----------------
# (case, the dataset keys: a function of tmp_path giving {key: path or value}, the stage's message)
BOUNDED = kind(
    "bounded_read",
    [
        (
            "docs_dev_zero",
            lambda tmp: {"docs": "/dev/zero"},
            r"dataset.docs: /dev/zero is a character device, not a regular file; expected a file",
        ),
        ("docs_a_named_pipe", lambda tmp: {"docs": fifo(tmp)}, r"dataset.docs: .*pipe.jsonl is a named pipe"),
        ("queries_dev_zero", lambda tmp: {"queries": "/dev/zero"}, r"dataset.queries: /dev/zero is a character"),
        ("qrels_dev_null", lambda tmp: {"qrels": "/dev/null"}, r"dataset.qrels: /dev/null is a character device"),
        (
            "docs_past_max_file_gb",
            lambda tmp: {"docs": sparse(tmp, 3 * 10**9), "max_file_gb": 2},
            r"dataset.docs: .*huge.jsonl: 3 GB is larger than dataset.max_file_gb \(2 GB\)",
        ),
        (
            "docs_past_the_default_max_file_gb",  # a terabyte hole: refused by size, before reading its zeros
            lambda tmp: {"docs": sparse(tmp, 10**12)},
            r"dataset.docs: .*huge.jsonl: 1e\+03 GB is larger than dataset.max_file_gb \(64 GB\)",
        ),
        (
            "docs_gz_decompressing_past_max_file_gb",
            lambda tmp: {"docs": gzip_bomb(tmp), "max_file_gb": 0.001},
            r"bomb.jsonl.gz:\d+: the file grew \(or decompressed\) past dataset.max_file_gb \(0.001 GB\)",
        ),
        (
            "docs_one_line_of_zeros",  # under the size bound, but no line of text is that long: stopped at the bound
            lambda tmp: {"docs": sparse(tmp, 3 * 2**20, "zeros.tsv")},
            r"zeros.tsv:1: a line longer than 1 MiB; expected lines of text",
        ),
    ],
)


def local_dataset(tmp_path: Path, **keys) -> dict:
    return {**write_local_collection(tmp_path / "src", DOCS, QUERIES, QRELS), **keys}


@pytest.mark.parametrize("make, message", [pytest.param(m, msg, id=case) for case, m, msg in BOUNDED])
def test_a_file_that_is_not_a_bounded_regular_file_is_refused_before_reading(
    tmp_path, results, capsys, monkeypatch, make, message
):
    monkeypatch.setattr(
        "longrank.io.text_files.MAX_LINE_BYTES", 2**20
    )  # the bound (256 MiB) made small, so the case is quick
    before = snapshot(results)
    dataset = local_dataset(tmp_path, **make(tmp_path))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    status, err = data_stage(capsys, dataset, results / "data")
    assert status == 2
    assert_clear_error(err, "data", message)
    assert snapshot(results) == before
    # refused before reading: no endless read, no memory filled (ru_maxrss is in KiB; the bound reads at most a line)
    assert time.monotonic() - started < 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 600 * 1024


@pytest.mark.parametrize(
    "key, make, message",
    [
        pytest.param("docs", lambda tmp: "/dev/zero", r"/dev/zero is a character device", id="docs_dev_zero"),
        pytest.param("docs", fifo, r"pipe.jsonl is a named pipe", id="docs_a_named_pipe"),
        pytest.param("qrels", lambda tmp: sparse(tmp, 10**12), r"larger than dataset.max_file_gb", id="qrels_1tb"),
    ],
)
def test_the_config_check_refuses_them_before_any_job_runs(tmp_path, key, make, message):
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["dataset"] = local_dataset(tmp_path, **{key: make(tmp_path)})
    with pytest.raises(InputError, match=rf"config key dataset.{key}: .*{message}"):
        validate_config(config, str(SCHEMA_PATH), datasets_dir=REPO / "config" / "datasets")


KINDS["bounded_read"] += 3


@pytest.mark.parametrize("path", ["/dev/zero", "fifo"])
def test_a_run_file_that_is_not_a_regular_file_is_refused_by_the_candidates_stage(tmp_path, results, capsys, path):
    path = fifo(tmp_path) if path == "fifo" else path
    before = snapshot(results)
    status, err = run_stage(
        capsys,
        "candidates",
        "--data",
        str(results / "data"),
        "--out",
        str(results / "candidates" / "mine.run"),
        "--first-stage",
        json.dumps({"name": "mine", "method": "run_file", "path": path, "top_k": 100}),
    )
    assert status == 2
    assert_clear_error(err, "candidates", r"is (a character device|a named pipe), not a regular file")
    assert snapshot(results) == before


KINDS["bounded_read"] += 2


# ---- kind json_id: an id that is null, an array or an object, named as such --------------------------------------
JSON_IDS = kind(
    "json_id",
    [
        ("doc_id_null", None, r"mine.jsonl:3: the document id \('doc_id'\) is null; expected a string"),
        ("doc_id_array", ["d1"], r"mine.jsonl:3: the document id \('doc_id'\) is a JSON array"),
        ("doc_id_object", {"id": "d1"}, r"mine.jsonl:3: the document id \('doc_id'\) is a JSON object"),
        ("doc_id_boolean", True, r"mine.jsonl:3: the document id \('doc_id'\) is a JSON boolean"),
    ],
)


@pytest.mark.parametrize("value, message", [pytest.param(v, m, id=case) for case, v, m in JSON_IDS])
def test_a_json_id_that_is_not_a_string_is_named_with_its_line(tmp_path, results, capsys, value, message):
    records = [{"doc_id": d, "text": t} for d, t in DOCS.items()]
    records[2]["doc_id"] = value
    docs = tmp_path / "mine.jsonl"
    docs.write_text(jsonl(records))
    before = snapshot(results)
    status, err = data_stage(capsys, local_dataset(tmp_path, docs=str(docs)), results / "data")
    assert status == 2
    assert_clear_error(err, "data", message)
    assert snapshot(results) == before


def test_a_query_id_null_is_named_too(tmp_path, results, capsys):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(jsonl([{"query_id": None, "text": "wing lift"}]))
    status, err = data_stage(capsys, local_dataset(tmp_path, queries=str(queries)), results / "data")
    assert status == 2
    assert_clear_error(err, "data", r"queries.jsonl:1: the query id \('query_id'\) is null")


KINDS["json_id"] += 1


# ---- kind disk_full: write() raises ENOSPC without a file name; the error names the output -----------------------
def enospc_without_a_name(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as write() and close() raise it: no filename


def test_a_full_disk_while_evaluate_writes_names_the_output(tmp_path, results, capsys, monkeypatch):
    import pandas as pd

    run = tmp_path / "bm25.run"
    write_run(run, {q: {d: 1.0 for d in DOCS} for q in QUERIES}, "bm25")
    out = results / "eval" / "bm25.tsv"
    out.parent.mkdir()
    out.write_text("query_id\tnDCG@10\nq0\t0.5\n")
    before = snapshot(results)
    monkeypatch.setattr(pd.DataFrame, "to_csv", enospc_without_a_name)
    status, err = run_stage(
        capsys,
        "evaluate",
        "--run",
        str(run),
        "--qrels",
        str(results / "data" / "qrels.txt"),
        "--folds",
        str(results / "data" / "folds.json"),
        "--out",
        str(out),
    )
    assert status == 2
    assert_clear_error(err, "evaluate", rf"no space left on the device writing {re.escape(str(out))} ")
    assert snapshot(results) == before  # the old table, and no temporary left beside it


def test_a_full_disk_while_the_data_stage_writes_names_the_file_under_data(tmp_path, results, capsys, monkeypatch):
    before = snapshot(results)
    original = Path.write_text

    def full_on_queries(self, text, *args, **kwargs):
        if self.name.startswith(".queries.tsv"):  # atomic_path's temporary, inside the staging directory
            enospc_without_a_name()
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_on_queries)
    status, err = data_stage(capsys, local_dataset(tmp_path), results / "data")
    assert status == 2
    # the final name (data/queries.tsv), not the staging directory's or the temporary's
    assert_clear_error(err, "data", rf"writing {re.escape(str(results / 'data' / 'queries.tsv'))} ")
    assert snapshot(results) == before


KINDS["disk_full"] = 2


# ---- kind export: an exported ranker is data, not instructions --------------------------------------------------
WORDS = ["wing", "lift", "flow", "heat", "shock"]


@pytest.fixture(scope="module")
def good_export(tmp_path_factory) -> Path:
    """A small KNRM export as ``longrank export`` writes one (ranker.json, vocabulary.tsv, weights + manifest),
    built here without training: the loader reads it like any other."""
    from longrank.api.export_contents import _ExportedCollection
    from longrank.data.words import Vocabulary
    from longrank.api.export import FORMAT
    from longrank.models.checkpoint import save_weights
    from longrank.models.registry import build_model

    out = tmp_path_factory.mktemp("export") / "knrm"
    out.mkdir()
    (out / "vocabulary.tsv").write_text("word\tdoc_freq\n" + "".join(f"{w}\t{i + 1}\n" for i, w in enumerate(WORDS)))
    vocab = Vocabulary(WORDS, [i + 1 for i in range(len(WORDS))], 10)
    (out / "width.txt").write_text("<width> " + " ".join(["0"] * 8) + "\n")
    model = build_model({"type": "knrm", "embeddings": str(out / "width.txt")}, _ExportedCollection(out, vocab))
    (out / "width.txt").unlink()
    save_weights(model, out / "model.safetensors")
    meta = {
        "format": FORMAT,
        "name": "knrm",
        "type": "knrm",
        "class": "longrank.models.knrm:KNRM",
        "config": {"type": "knrm"},
        "rerank_depth": 10,
        "vocabulary": {"file": "vocabulary.tsv", "words": len(WORDS), "num_docs": 10, "embedding_dim": 8},
        "notes": [],
    }
    (out / "ranker.json").write_text(json.dumps(meta))
    return out


def hostile(tmp_path: Path, good: Path, change) -> Path:
    out = tmp_path / "export"
    shutil.copytree(good, out, symlinks=True)
    meta = json.loads((out / "ranker.json").read_text())
    change(out, meta)
    (out / "ranker.json").write_text(json.dumps(meta))
    return out


def set_vocabulary(key, value):
    return lambda out, meta: meta["vocabulary"].__setitem__(key, value)


def link_vocabulary_to(target):
    def change(out, meta):
        (out / "vocabulary.tsv").unlink()
        (out / "vocabulary.tsv").symlink_to(target)

    return change


def outside_file(tmp_path_factory_dir: Path) -> Path:
    return tmp_path_factory_dir


SECRET = "s3cret-line-that-must-never-be-echoed"


def vocabulary_line(out, meta):
    (out / "vocabulary.tsv").write_text(f"word\tdoc_freq\n{SECRET}\n")


def encoder_export(hidden_size):
    """An encoder export whose encoder/config.json says ``hidden_size`` over weights of a tiny BERT's shapes (written
    with safetensors directly: the check reads the header before transformers builds anything)."""

    def change(out, meta):
        import torch
        from safetensors.torch import save_file

        encoder = out / "encoder"
        encoder.mkdir()
        shapes = {
            "embeddings.word_embeddings.weight": (30, 8),
            "embeddings.position_embeddings.weight": (32, 8),
            "embeddings.token_type_embeddings.weight": (2, 8),
            "encoder.layer.0.intermediate.dense.weight": (16, 8),
        }
        save_file({name: torch.zeros(shape) for name, shape in shapes.items()}, str(encoder / "model.safetensors"))
        config = {"model_type": "bert", "vocab_size": 30, "hidden_size": hidden_size, "num_hidden_layers": 1}
        (encoder / "config.json").write_text(json.dumps(config))
        del meta["vocabulary"]
        meta.update(type="bert", config={"type": "bert"}, encoder={"dir": "encoder"})

    return change


def link(name: str, target: str, before=None):
    """``name`` in the export (any depth) made a link to ``target``, after ``before`` (another change) if given."""

    def change(out, meta):
        if before is not None:
            before(out, meta)
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        path.unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)

    return change


def set_config(key, value, before=None):
    def change(out, meta):
        if before is not None:
            before(out, meta)
        meta["config"][key] = value

    return change


def write_file(name: str, text: str, before=None):
    def change(out, meta):
        if before is not None:
            before(out, meta)
        (out / name).write_text(text)

    return change


EXPORTS = kind(
    "export",
    [
        (
            "vocabulary_at_etc_passwd",
            set_vocabulary("file", "/etc/passwd"),
            r"vocabulary.file: '/etc/passwd' is not inside the export's folder",
        ),
        (
            "vocabulary_dot_dot",
            set_vocabulary("file", "../../../../etc/passwd"),
            r"vocabulary.file: '../../../../etc/passwd' is not inside the export's folder",
        ),
        (
            "vocabulary_a_link_out_of_the_folder",
            link_vocabulary_to("/etc/passwd"),
            r"vocabulary.file: 'vocabulary.tsv' is not inside the export's folder .*no link out of the folder",
        ),
        (
            "weights_a_link_out_of_the_folder",
            lambda out, meta: (
                (out / "model.safetensors").unlink() or (out / "model.safetensors").symlink_to("/etc/passwd")
            ),
            r"'model.safetensors' is not inside the export's folder",
        ),
        ("vocabulary_a_directory", set_vocabulary("file", "."), r"vocabulary.file: '.' is not a file of the export"),
        ("vocabulary_not_a_path", set_vocabulary("file", 7), r"vocabulary.file: expected the relative path of a file"),
        (
            "embedding_dim_10_to_the_9",
            set_vocabulary("embedding_dim", 10**9),
            r"vocabulary.words 5 and vocabulary.embedding_dim 1000000000 do not match the embedding matrix of "
            r".*model.safetensors \(7 x 8",
        ),
        (
            "words_10_to_the_9",
            set_vocabulary("words", 10**9),
            r"vocabulary.words 1000000000 and vocabulary.embedding_dim 8 do not match",
        ),
        ("embedding_dim_negative", set_vocabulary("embedding_dim", -1), r"vocabulary.embedding_dim: expected a whole"),
        ("num_docs_a_string", set_vocabulary("num_docs", "many"), r"vocabulary.num_docs: expected a whole number"),
        (
            "vocabulary_line_is_not_echoed",
            vocabulary_line,
            r"vocabulary.tsv:2: expected word<TAB>document frequency \(a whole number\); this line has no tab",
        ),
        (
            "encoder_dir_absolute",
            lambda out, meta: meta.update(encoder={"dir": "/usr"}, config={"type": "bert"}) or meta.pop("vocabulary"),
            r"encoder.dir: '/usr' is not inside the export's folder",
        ),
        (
            "encoder_hidden_size_10_to_the_9",
            encoder_export(10**9),
            r"encoder/config.json: hidden_size 1000000000 is the size of no tensor in .*encoder/model.safetensors",
        ),
        # every path at any depth, links to files and to folders; every JSON file named on error; every size
        (
            "encoder_tokenizer_a_link_out_of_the_folder",
            link("encoder/tokenizer.json", "/etc/passwd", before=encoder_export(8)),
            r"'encoder/tokenizer.json' is not inside the export's folder .*no link out of the folder",
        ),
        (
            "a_nested_folder_a_link_out_of_the_folder",
            link("notes/more", "/etc"),
            r"'notes/more' is not inside the export's folder",
        ),
        (
            "encoder_dir_a_link_to_a_folder_outside",
            link("encoder", "/usr", before=encoder_export(8)),
            r"encoder.dir: 'encoder' is not inside the export's folder",
        ),
        (
            "encoder_config_json_not_json",
            write_file("encoder/config.json", f"{SECRET}\n", before=encoder_export(8)),
            r"encoder/config.json:1: not valid JSON \(Expecting value, column 1\)",
        ),
        (
            "n_kernels_10_to_the_8",
            set_config("n_kernels", 10**8),
            r"ranker.json: config.n_kernels 100000000 is more than the \d+ weights the export holds",
        ),
        (
            "encoder_entry_size_10_to_the_9",
            set_config("max_len", 10**9, before=encoder_export(8)),
            r"ranker.json: config.max_len 1000000000 is more than the \d+ weights the export holds",
        ),
    ],
)


def test_the_good_export_loads_and_scores(good_export):
    from longrank.api import load_ranker

    ranker = load_ranker(good_export, device="cpu")
    scores = ranker.score("wing lift", ["wing lift flow", "heat shock"])
    assert len(scores) == 2 and all(isinstance(s, float) for s in scores)


@pytest.mark.parametrize("change, message", [pytest.param(c, m, id=case) for case, c, m in EXPORTS])
def test_a_hostile_export_is_refused_by_key_before_anything_is_allocated(tmp_path, good_export, change, message):
    from longrank.api import load_ranker

    out = hostile(tmp_path, good_export, change)
    before = snapshot(out)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputError, match=message) as err:
        load_ranker(out, device="cpu")
    text = str(err.value)
    assert "root:" not in text and SECRET not in text  # no line of the file it points at is echoed
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 200 * 1024  # KiB: nothing big was built
    assert snapshot(out) == before


def test_the_rerank_command_names_the_key_too(tmp_path, good_export, capsys):
    out = hostile(tmp_path, good_export, set_vocabulary("file", "/etc/passwd"))
    (tmp_path / "q.tsv").write_text("q1\twing\n")
    (tmp_path / "d.tsv").write_text("d1\twing lift\n")
    write_run(tmp_path / "first.run", {"q1": {"d1": 1.0}}, "first")
    status, err = run_stage(
        capsys,
        "rerank",
        "--ranker",
        str(out),
        "--run",
        str(tmp_path / "first.run"),
        "--queries",
        str(tmp_path / "q.tsv"),
        "--docs",
        str(tmp_path / "d.tsv"),
        "--out",
        str(tmp_path / "out.run"),
    )
    assert status == 2
    last = assert_clear_error(err, "rerank", r"vocabulary.file: '/etc/passwd' is not inside the export's folder")
    assert "root:" not in err and last
    assert not (tmp_path / "out.run").exists()


KINDS["export"] += 2  # the command line's refusal, and the good export that loads (the control)


@pytest.mark.parametrize(
    "target, message",
    [
        pytest.param("vocabulary.tsv", r"ranker.json:1: not valid JSON \(Expecting value, column 1\)", id="not_json"),
        pytest.param("/etc/passwd", r"'ranker.json' is not inside the export's folder", id="outside"),
    ],
)
def test_a_ranker_json_that_links_elsewhere_is_refused_naming_the_file(tmp_path, good_export, target, message):
    from longrank.api import load_ranker

    out = tmp_path / "export"
    shutil.copytree(good_export, out, symlinks=True)
    (out / "ranker.json").unlink()
    (out / "ranker.json").symlink_to(target)
    with pytest.raises(InputError, match=message) as err:
        load_ranker(out, device="cpu")
    assert "root:" not in str(err.value) and "doc_freq" not in str(err.value)


KINDS["export"] += 2


# ---- kind shared_results: two checkouts whose results/ is one folder --------------------------------------------
@pytest.fixture(scope="module")
def checkouts(tmp_path_factory) -> dict:
    """Two working directories (checkouts) A and B whose ``results/`` is one folder (B's is a symlink to A's), one
    small collection, a config for it, and a gate: a ``python`` first on a run's PATH that waits for a file before it
    runs the stage, so a workflow can be held at work, deterministically."""
    root = tmp_path_factory.mktemp("shared")
    dataset = write_local_collection(root / "src", DOCS, QUERIES, QRELS)
    a, b = root / "A", root / "B"
    for checkout in (a, b):
        checkout.mkdir()
        (checkout / "config").symlink_to(REPO / "config")
    (a / "results").mkdir()
    (b / "results").symlink_to(a / "results")
    gate = root / "gate"
    gate.mkdir()
    (gate / "python").write_text(
        f'#!/bin/sh\ntouch "{gate}/waiting"\nwhile [ ! -e "{gate}/open" ]; do sleep 0.1; done\nexec {sys.executable} "$@"\n'
    )
    (gate / "python").chmod(0o755)
    config = {"dataset": dataset, "query_formulation": {"method": "full"}, "splits": SPLITS}
    other = {**config, "splits": {**SPLITS, "dev": 0.3}}
    for name, cfg in (("same", config), ("other", other)):
        (root / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
    return {"root": root, "A": a, "B": b, "gate": gate, "results": a / "results" / "tiny"}


TARGET = "results/tiny/data/stats.json"


def workflow(checkout: Path, config: Path, *args: str, gate: Path | None = None, **popen):
    cmd, env = snakemake_command(checkout, TARGET, "--configfile", str(config), *args, cores=1)
    if gate is not None:
        env = {**env, "PATH": f"{gate}:{env['PATH']}"}
    if popen:
        return subprocess.Popen(cmd, cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, timeout=300)


def final_files(results: Path) -> dict[str, bytes]:
    """The results' files, less Snakemake's and the lock's own bookkeeping."""
    return {k: v for k, v in snapshot(results).items() if not k.startswith(".longrank")}


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.mark.e2e
def test_a_second_checkout_is_locked_out_of_a_shared_results_folder_while_the_first_runs(checkouts):
    a, b, gate, results = checkouts["A"], checkouts["B"], checkouts["gate"], checkouts["results"]
    same = checkouts["root"] / "same.yaml"
    results.mkdir(parents=True, exist_ok=True)
    lock = results / ".longrank.lock"
    # a lock left by a workflow that was killed (its process is gone): taken over, with a warning
    lock.write_text(json.dumps({"pid": dead_pid(), "host": os.uname().nodename, "workdir": "/gone", "started": "x"}))
    first = workflow(a, same, gate=gate, popen=True)
    try:
        deadline = time.monotonic() + 120
        while not (gate / "waiting").exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert first.poll() is None, first.communicate()[0][-3000:]
        holder = json.loads(lock.read_text())
        assert holder["workdir"] == str(a) and holder["pid"] != os.getpid()
        before = final_files(results)
        second = workflow(b, same)
        output = second.stdout + second.stderr
        assert second.returncode != 0 and "Traceback" not in output, output[-3000:]
        assert f"results/tiny ({results}) is locked by the workflow run from {a} (process {holder['pid']}" in output
        assert final_files(results) == before and json.loads(lock.read_text()) == holder
        dry = workflow(b, same, "-n")  # a dry run takes no lock, so it is not refused
        assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
        (gate / "open").touch()
        output, _ = first.communicate(timeout=300)
    finally:
        (gate / "open").touch()
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, output[-3000:]
    assert "removing a stale lock" in output and not lock.exists()  # released when the workflow ended
    assert json.loads((results / "data" / "stats.json").read_text())["num_docs"] == len(DOCS)


KINDS["shared_results"] = 3  # locked out while the first runs; a stale lock taken over; a dry run not refused


@pytest.mark.e2e
def test_another_checkouts_config_is_refused_not_called_up_to_date(checkouts):
    a, b, results, root = checkouts["A"], checkouts["B"], checkouts["results"], checkouts["root"]
    same, other = root / "same.yaml", root / "other.yaml"
    (checkouts["gate"] / "open").touch()
    if not (results / ".longrank-owner.json").exists():  # run alone: A's run first
        done = workflow(a, same)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    before = final_files(results)
    for args in (["-n"], ["--forceall"]):  # refused when parsed: a dry run as a real one
        refused = workflow(b, other, *args)
        output = refused.stdout + refused.stderr
        assert refused.returncode != 0 and "Traceback" not in output and "Nothing to be done" not in output
        assert (
            f"results/tiny ({results}) holds the outputs of another config, run from {a} (keys that differ: splits.dev)"
            in output
        ), output[-3000:]
        assert final_files(results) == before
    # the same config from B: its outputs are this config's, up to date
    agreed = workflow(b, same, "-n")
    assert agreed.returncode == 0 and "Nothing to be done" in agreed.stdout + agreed.stderr
    # another config from A, whose records judge the change: allowed, and its data job is to run again
    own = workflow(a, other, "-n")
    assert own.returncode == 0 and "rule data" in own.stdout + own.stderr, own.stdout[-3000:]


KINDS["shared_results"] += 3  # another config refused (dry and real); the same config, or its own checkout, allowed


@pytest.mark.e2e
def test_a_lock_of_another_host_is_named_with_the_file_to_remove(checkouts):
    b, results, root = checkouts["B"], checkouts["results"], checkouts["root"]
    (checkouts["gate"] / "open").touch()
    results.mkdir(parents=True, exist_ok=True)
    lock = results / ".longrank.lock"
    held = {"pid": 1, "host": "elsewhere.example", "workdir": "/far/checkout", "started": "2026-01-01T00:00:00"}
    lock.write_text(json.dumps(held))
    try:
        before = final_files(results)
        refused = workflow(b, root / "same.yaml", "--forceall")  # jobs to run: the lock is asked for
        output = refused.stdout + refused.stderr
        assert refused.returncode != 0 and "Traceback" not in output
        assert "is locked by the workflow run from /far/checkout (process 1 on elsewhere.example" in output
        assert "if nothing runs there any more, remove results/tiny/.longrank.lock" in output
        assert final_files(results) == before and json.loads(lock.read_text()) == held  # nothing run, nothing taken
    finally:
        lock.unlink()


KINDS["shared_results"] += 1


def test_the_catalogue_counts():
    assert sum(KINDS.values()) >= 40, KINDS
