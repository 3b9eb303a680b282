"""The fault catalogue's cases of names, code, run orders and ids ("nothing lost, nothing stale, nothing misread"),
by class, each fixed at its root: each asserts the clear message and that nothing written before was lost or changed.

Kinds (``KINDS`` counts them, as in test_fault_catalogue.py):

- ``name``: a name that becomes a path (dataset, model, first stage, pseudo-query or graph set) that is not the one
  safe pattern (``longrank.config.names.SAFE_NAME``), refused when the config is validated, naming the key; a configured
  input inside ``results/<name>/``; a run tag that is not one column. The workflow itself is run with each unsafe
  dataset name (slow): refused, and no file outside ``results/`` written or removed.
- ``code``: the code a model trains and reranks with is an input (``longrank.results.code_digest``): changed arithmetic
  changes the digest, a changed comment or docstring does not; a training state of other code is not resumed.
- ``run_order``: a run file is read in its writer's rank order: ties across ranks kept in that order (a warning
  counts them), a score that rises with the rank refused (or negated by ``scores: ascending``), a rank that is no
  whole number refused, ids the collection lacks counted.
- ``ids``: one id check everywhere (``longrank.io.ids.id_problem``): control characters, whitespace, a null id refused
  with file and line; ids a table reader would change ('NA', 'nan', 'null', '001' beside '1') kept distinct
  through data, evaluate and compare (slow: the workflow's own stages, no training).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from longrank.results.code_digest import closure, code_digest, module_path, source_digest
from longrank.validation.validate import validate_config
from longrank.config.schema import SCHEMA_PATH
from longrank.evaluate.metrics import read_eval_tsv, sorted_qids
from longrank.errors import InputError
from longrank.io.ids import id_problem
from longrank.io.trec_files import read_run, write_run
from longrank.config.names import SAFE_NAME, check_outputs_not_inputs
from longrank.train.code import training_code_digest

from conftest import REPO, snakemake_command, synthetic_collection, write_local_collection
from test_fault_catalogue import run_stage  # the catalogue's own helpers

KINDS: dict[str, int] = {}
DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
UNSAFE = ["..", ".", "a/b", "../x", " x", "x y", "", "a\x00b", "x\n", "-x", "x.y"]


def count(kind: str, cases: list) -> list:
    KINDS[kind] = KINDS.get(kind, 0) + len(cases)
    return cases


def last_line(err: str) -> str:
    return err.strip().splitlines()[-1]


# ---- kind name: names that become paths ---------------------------------------------------------------------------
def test_every_name_pattern_of_the_schema_is_the_one_safe_name():
    schema = yaml.safe_load(SCHEMA_PATH.read_text())["properties"]
    patterns = {
        "dataset.name": schema["dataset"]["properties"]["name"]["pattern"],
        "first_stages[].name": schema["first_stages"]["items"]["properties"]["name"]["pattern"],
        **{key: schema[key]["propertyNames"]["pattern"] for key in ("models", "pseudo_queries", "mir_graphs")},
    }
    assert patterns == dict.fromkeys(patterns, SAFE_NAME)


def with_name(place: str, name: str) -> tuple[dict, str]:
    """The default config with ``name`` at ``place``, and the key the error must name."""
    config = copy.deepcopy(DEFAULT)
    if place == "dataset":
        config["dataset"] = {"name": name, "id": "cranfield"}
        return config, "dataset.name"
    if place == "first_stage":
        config["first_stages"].append({"name": name, "method": "bm25"})
        return config, f"first_stages.{len(config['first_stages']) - 1}.name"
    if place == "model":
        config["models"][name] = {"type": "knrm"}
        return config, "models"
    config[place] = {name: {}}
    return config, place


NAME_CASES = count(
    "name",
    [(place, name) for place in ("dataset", "model", "first_stage") for name in UNSAFE]
    + [(place, name) for place in ("pseudo_queries", "mir_graphs") for name in ("..", "a/b", "x\n")],
)


@pytest.mark.parametrize("place, name", NAME_CASES)
def test_an_unsafe_name_is_refused_when_the_config_is_validated_naming_the_key(place, name):
    config, key = with_name(place, name)
    with pytest.raises(InputError) as refused:
        validate_config(config)
    message = str(refused.value)
    assert message.startswith(f"config key {key}") and f"{name!r} is not a safe name" in message, message


def test_safe_names_pass():
    config = with_name("model", "Ok_name-2")[0]
    config["first_stages"].append({"name": "9th-stage_x", "method": "bm25"})
    config["dataset"] = {"name": "A-1_b", "id": "cranfield"}
    validate_config(config)


INSIDE = count("name", ["docs", "run_file", "symlink"])


@pytest.mark.parametrize("case", INSIDE)
def test_an_input_inside_the_results_of_its_collection_is_refused(tmp_path, case):
    results = tmp_path / "results" / "tiny"
    (results / "data").mkdir(parents=True)
    inside = results / "data" / "docs.jsonl"
    inside.write_text("{}\n")
    config = {"dataset": {"name": "tiny", "docs": str(tmp_path / "mine.jsonl")}, "first_stages": {}}
    if case == "docs":
        config["dataset"]["docs"] = str(inside)
        key = "dataset.docs"
    elif case == "run_file":
        config["first_stages"] = {"mine": {"name": "mine", "method": "run_file", "path": str(inside)}}
        key = "first_stages.mine.path"
    else:  # a link outside results/ to a file inside: the resolved path counts
        (tmp_path / "mine.jsonl").symlink_to(inside)
        key = "dataset.docs"
    with pytest.raises(InputError, match=rf"config key {key}: .* lies inside .*results/tiny/"):
        check_outputs_not_inputs(config, results)
    check_outputs_not_inputs(config, tmp_path / "results" / "other")  # another collection's results: allowed


TAGS = count("name", ["my run", "x\ny", "", "a\x1bb"])


@pytest.mark.parametrize("tag", TAGS)
def test_a_run_tag_that_is_not_one_column_is_refused_and_nothing_is_written(tmp_path, capsys, tag):
    with pytest.raises(InputError, match="the run's tag"):
        write_run(tmp_path / "x.run", {"q1": {"d1": 1.0}}, tag)
    assert not (tmp_path / "x.run").exists()
    status, err = run_stage(
        capsys, "rerank", "--ranker", str(tmp_path / "none"), "--run", "r", "--queries", "q", "--docs", "d",
        "--out", str(tmp_path / "out.run"), "--tag", tag,
    )  # fmt: skip
    assert status == 2 and last_line(err).startswith(f"longrank rerank: error: --tag {tag!r}"), err
    assert not (tmp_path / "out.run").exists()


def files_outside_results(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``root`` except results/ and Snakemake's own .snakemake/ (its log of the refused run), by
    relative path: (mtime in ns, SHA-256)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in ("results", ".snakemake") or not path.is_file() or path.is_symlink():
            continue
        out[str(rel)] = (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return out


# Loads the workflow with each config file given, as `snakemake --configfile <file>` does, in one process (Snakemake's
# own API: each refusal costs its parse, not an interpreter and its imports), and prints one line per file:
# RAN or REFUSED with the error's first line.
LOAD_EACH = """
import json
import sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, DAGSettings, ExecutionSettings, OutputSettings, ResourceSettings

for configfile in sys.argv[2:]:
    try:
        with SnakemakeApi(OutputSettings()) as api:
            workflow = api.workflow(
                snakefile=Path(sys.argv[1]), workdir=Path.cwd(), resource_settings=ResourceSettings(cores=1),
                config_settings=ConfigSettings(configfiles=[Path(configfile)]),
            )
            workflow.dag(DAGSettings()).execute_workflow(executor="local", execution_settings=ExecutionSettings())
        print(configfile, "RAN", flush=True)
    except Exception as err:
        print(configfile, "REFUSED", json.dumps(str(err).splitlines()[0]), flush=True)
"""


@pytest.mark.stage
def test_the_workflow_refuses_each_unsafe_collection_name_and_changes_nothing_outside_results(tmp_path):
    """The collection in ./data/ (as a user keeps it), the workflow loaded with each unsafe dataset
    name, and once with the collection inside results/<name>/: each is refused when the workflow loads, naming the
    key, and no file outside results/ is written or removed. '..' (the name that deleted the user's collection) also
    through the snakemake command line."""
    docs, queries, qrels = synthetic_collection(n_queries=4, docs_per_query=3)
    dataset = write_local_collection(tmp_path / "data", docs, queries, qrels)
    dataset = {**dataset, **{k: os.path.relpath(dataset[k], tmp_path) for k in ("docs", "queries", "qrels")}}
    inside = write_local_collection(tmp_path / "results" / "mine" / "data", docs, queries, qrels)
    (tmp_path / "config").symlink_to(REPO / "config")
    cases = {f"name{i}": ({**dataset, "name": name}, "dataset.name") for i, name in enumerate(UNSAFE[:9])}
    cases["inside"] = ({**inside, "name": "mine"}, "dataset.docs")
    for case, (block, _) in cases.items():
        (tmp_path / f"{case}.yaml").write_text(yaml.safe_dump({"dataset": block}))
    before = files_outside_results(tmp_path)
    inside_before = {p: Path(p).read_bytes() for p in (inside["docs"], inside["queries"], inside["qrels"])}
    cmd, env = snakemake_command(tmp_path, "--configfile", str(tmp_path / "name0.yaml"), cores=1)
    assert UNSAFE[0] == ".."
    cli = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert cli.returncode != 0 and "config key dataset.name: '..' is not a safe name" in cli.stderr, cli.stderr[-2000:]
    assert "Traceback" not in cli.stderr
    files = [str(tmp_path / f"{case}.yaml") for case in cases]
    loaded = subprocess.run(
        [sys.executable, "-c", LOAD_EACH, str(REPO / "Snakefile"), *files],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    outcome = dict(line.split(" ", 1) for line in loaded.stdout.splitlines() if line.startswith(str(tmp_path)))
    assert list(outcome) == files, loaded.stdout[-2000:] + loaded.stderr[-2000:]
    for case, (_, key) in cases.items():
        assert outcome[str(tmp_path / f"{case}.yaml")].startswith(f'REFUSED "config key {key}'), (case, outcome)
    assert files_outside_results(tmp_path) == before
    assert {p: Path(p).read_bytes() for p in inside_before} == inside_before
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["mine"]  # nothing else made under results/


KINDS["name"] += 1  # the workflow's own refusal of unsafe collection names (one case per name above)


# ---- kind code: the code that trains and reranks is an input --------------------------------------------------------
KNRM_MODULE = "longrank.models.knrm"


def knrm_source() -> str:
    return module_path(KNRM_MODULE).read_text()


def with_changed_constant(source: str) -> str:
    """``source`` with its first float constant inside a function doubled (changed arithmetic)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Constant) and isinstance(inner.value, float):
                    inner.value *= 2
                    return ast.unparse(tree)
    raise AssertionError("no float constant in a function")


CODE = count("code", ["arithmetic", "comment", "docstring", "reformatted", "other model"])


def test_changed_arithmetic_changes_the_code_digest_and_a_comment_or_docstring_does_not():
    source = knrm_source()
    digest = source_digest(source)
    assert source_digest(with_changed_constant(source)) != digest  # arithmetic
    assert source_digest(source.replace("\n", "\n# a comment\n", 3)) == digest  # comments
    tree = ast.parse(source)
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef)
    documented = [n for n in ast.walk(tree) if isinstance(n, kinds) and ast.get_docstring(n)][-1]
    documented.body[0].value.value += " More words."
    assert source_digest(ast.unparse(tree)) == source_digest(ast.unparse(ast.parse(source)))  # a docstring
    assert source_digest(ast.unparse(ast.parse(source))) == digest  # reformatted (unparse drops comments too)


def test_the_training_digest_covers_the_model_and_what_it_imports_but_not_other_models():
    modules = closure("longrank.train.train", KNRM_MODULE)
    assert {KNRM_MODULE, "longrank.models.modules.kernel_pooling", "longrank.train.trainer"} <= set(modules)
    assert "longrank.models.tk" not in modules  # the registry imports models by name: TK's code is not KNRM's
    assert training_code_digest({"type": "knrm"}) == code_digest("longrank.train.train", KNRM_MODULE)
    assert training_code_digest({"type": "knrm"}) != training_code_digest({"type": "tk"})


def test_the_train_rerank_and_report_rules_take_the_code_as_a_parameter():
    """Snakemake reruns a job whose params changed (the 'params' rerun trigger, kept by both shipped profiles)."""
    for rule, call in (
        ("train", 'code_of("train", wc.model)'),
        ("rerank", 'code_of("rerank", wc.model)'),
        ("report", 'code_of("report")'),
    ):
        assert call in (REPO / "workflow" / "rules" / f"{rule}.smk").read_text(), rule
    for profile in ("local", "slurm"):
        triggers = yaml.safe_load((REPO / "profiles" / profile / "config.yaml").read_text())["rerun-triggers"]
        assert "params" in triggers, profile


@pytest.mark.stage
def test_a_training_state_of_other_code_is_not_resumed(tiny_data, monkeypatch, caplog):
    """``snakemake -R train`` after an edit: the finished state of the old code is discarded (logged by name) and
    the model trained afresh, not copied out of the old weights."""
    import torch

    from longrank.data.corpus import Corpus
    from longrank.train import fingerprint
    from longrank.train import train as train_stage
    from longrank.train.sampling import PairSampler

    cfg = {"type": "knrm", "max_doc_len": 40, "train": {"steps": 8, "batch_size": 4, "eval_every": 4, "patience": 5}}
    out = tiny_data / "run" / "model.safetensors"

    def train():
        train_stage.train("knrm", cfg, Corpus(tiny_data / "data"), read_run(tiny_data / "bm25.run"), 0, 30,
                   torch.device("cpu"), out)  # fmt: skip

    caplog.set_level(logging.INFO, logger="longrank.train")
    train()
    drawn = []
    original = PairSampler.batch
    monkeypatch.setattr(PairSampler, "batch", lambda self, *a: drawn.append(a) or original(self, *a))
    train()
    assert drawn == []  # the same code: the finished state is reused
    monkeypatch.setattr(fingerprint, "training_code_digest", lambda entry: "the digest of edited code")
    train()
    assert drawn, "the model was trained again"
    assert any("discarding the training state" in r.getMessage() and "code" in r.getMessage() for r in caplog.records)


KINDS["code"] += 1


# ---- kind run_order: a run file read as its writer meant ------------------------------------------------------------
DOCS, QUERIES, QRELS = synthetic_collection(n_queries=4, docs_per_query=4)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    from longrank.data.data import prepare

    root = tmp_path_factory.mktemp("prepared")
    prepare(write_local_collection(root / "src", DOCS, QUERIES, QRELS), {"method": "full"}, {"method": "holdout"},
            root / "data")  # fmt: skip
    return root / "data"


def candidates(capsys, prepared: Path, tmp_path: Path, run: str, **spec) -> tuple[int, str, Path]:
    path = tmp_path / "theirs.run"
    path.write_text(run)
    out = tmp_path / "results" / "candidates" / "mine.run"
    entry = {"name": "mine", "method": "run_file", "path": str(path), "top_k": 10, **spec}
    status, err = run_stage(
        capsys, "candidates", "--data", str(prepared), "--first-stage", json.dumps(entry), "--out", str(out)
    )
    return status, err, out


def ranked(path: Path) -> dict[str, list[str]]:
    """Each query's documents in the written file's line order."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        qid, _, doc, *_ = line.split()
        out.setdefault(qid, []).append(doc)
    return out


def per_query(rank_of) -> str:
    """A run of every query's documents, ranked against their id order (so a tie broken by id is seen), with the
    score ``rank_of(rank)``."""
    lines = []
    for q in QUERIES:
        docs = sorted((d for d in DOCS if d.startswith(f"d{q[1:]}_")), reverse=True)
        lines += [f"{q} Q0 {d} {r} {rank_of(r)} theirs\n" for r, d in enumerate(docs, start=1)]
    return "".join(lines)


def expected_order() -> dict[str, list[str]]:
    return {q: sorted((d for d in DOCS if d.startswith(f"d{q[1:]}_")), reverse=True) for q in QUERIES}


RUN_ORDER = count("run_order", ["ties", "ties_some", "rising", "ascending", "rank_not_a_number", "unknown_ids"])


def test_scores_tied_across_ranks_keep_the_rank_order_with_a_warning(prepared, tmp_path, capsys, caplog):
    caplog.set_level(logging.WARNING)
    status, err, out = candidates(capsys, prepared, tmp_path, per_query(lambda r: 0))  # rank only: one score
    assert status == 0, err
    assert ranked(out) == expected_order()  # not the document ids' order, which trec_eval would give
    tied = len(DOCS) - len(QUERIES)
    assert any(f"{tied} documents have the score of the document ranked above them" in r.getMessage()
               for r in caplog.records)  # fmt: skip


def test_some_ties_keep_the_rank_order_and_the_other_scores(prepared, tmp_path, capsys):
    status, err, out = candidates(capsys, prepared, tmp_path, per_query(lambda r: {1: 9.5, 2: 7, 3: 7, 4: 3}[r]))
    assert status == 0, err
    assert ranked(out) == expected_order()
    scores = [float(line.split()[4]) for line in out.read_text().splitlines()[:4]]
    assert scores[0] == 9.5 and scores[-1] == 3 and scores[1] == 7 and 3 < scores[2] < 7


def test_a_score_that_rises_with_the_rank_is_refused_and_the_previous_candidates_stay(prepared, tmp_path, capsys):
    write_run(tmp_path / "results" / "candidates" / "mine.run", {"q0": {"d0_0": 1.0}}, "old")
    before = (tmp_path / "results" / "candidates" / "mine.run").read_bytes()
    status, err, out = candidates(capsys, prepared, tmp_path, per_query(lambda r: r))  # the score is the rank
    assert status == 2
    assert (
        last_line(err).startswith("longrank candidates: error: ")
        and "theirs.run:2: the score rises with the rank" in err
    )
    assert "set first_stages.mine.scores: ascending" in err
    assert out.read_bytes() == before


def test_scores_ascending_reads_a_distance_run_in_its_rank_order(prepared, tmp_path, capsys):
    status, err, out = candidates(capsys, prepared, tmp_path, per_query(lambda r: r * 0.25), scores="ascending")
    assert status == 0, err
    assert ranked(out) == expected_order()


def test_a_rank_that_is_no_whole_number_is_refused(prepared, tmp_path, capsys):
    status, err, _ = candidates(capsys, prepared, tmp_path, "q0 Q0 d0_0 first 2.0 theirs\n")
    assert status == 2 and "theirs.run:1: the rank (4th column) must be a whole number, got 'first'" in err


def test_ids_the_collection_lacks_are_counted(prepared, tmp_path, capsys, caplog):
    caplog.set_level(logging.WARNING)
    run = per_query(lambda r: 10 - r) + "q0 Q0 elsewhere 9 0.5 theirs\nqX Q0 d0_0 1 3 theirs\n"
    status, err, out = candidates(capsys, prepared, tmp_path, run)
    assert status == 0, err
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "1 document ids not in the collection dropped" in messages and "1 queries not in the collection" in messages
    assert "elsewhere" not in out.read_text() and "qX" not in out.read_text()


# ---- kind ids: one id check, ids read as written -------------------------------------------------------------------
BAD_IDS = count("ids", ["", "d 1", "d\t1", "d\x001", "d\x1b1", "d\x7f1", "d\x851"])


@pytest.mark.parametrize("bad", BAD_IDS)
def test_the_one_id_check_refuses_whitespace_and_control_characters(bad):
    assert id_problem(bad) is not None


@pytest.mark.parametrize("good", ["NA", "nan", "null", "None", "001", "1", "-1", "d/1", "ü"])
def test_ids_a_table_reader_would_change_are_ids(good):
    assert id_problem(good) is None


READERS = count(
    "ids",
    [
        (
            "docs.jsonl",
            '{"doc_id": "d\\u001b1", "text": "a"}\n',
            r"docs.jsonl:1: document id 'd\\x1b1' holds the control",
        ),
        ("docs.jsonl", '{"doc_id": null, "text": "a"}\n', r"docs.jsonl:1: the document id \('doc_id'\) is null"),
        ("docs.jsonl", '{"doc_id": 1.5, "text": "a"}\n', r"docs.jsonl:1: the document id \('doc_id'\) is 1.5"),
        ("queries.tsv", "q\x001\ttext\n", r"queries.tsv:1: query id 'q\\x001' holds the control character"),
        ("qrels.txt", "q0 0 d\x1b1 1\n", r"qrels.txt:1: document id 'd\\x1b1' holds the control character"),
        ("theirs.run", "q0 Q0 d\x001 1 2 x\n", r"theirs.run:1: document id 'd\\x001' holds the control character"),
    ],
)


@pytest.mark.parametrize("name, content, message", READERS)
def test_every_reader_refuses_a_bad_id_with_its_file_and_line(tmp_path, name, content, message):
    import re

    from longrank.io.trec_files import read_qrels
    from longrank.io.text_records import read_id_text_jsonl, read_id_text_tsv

    path = tmp_path / name
    path.write_text(content)
    readers = {
        "docs.jsonl": lambda: list(read_id_text_jsonl(path, "document", ["doc_id"], ["text"])),
        "queries.tsv": lambda: list(read_id_text_tsv(path, "query")),
        "qrels.txt": lambda: read_qrels(path),
        "theirs.run": lambda: read_run(path),
    }
    with pytest.raises(InputError, match=re.escape(str(path)) + ".*") as refused:
        readers[name]()
    assert re.search(message, str(refused.value)), str(refused.value)


def test_a_number_written_as_an_id_is_its_digits(tmp_path):
    from longrank.io.text_records import read_id_text_jsonl

    (tmp_path / "d.jsonl").write_text('{"doc_id": 7, "text": "a"}\n')
    assert list(read_id_text_jsonl(tmp_path / "d.jsonl", "document", ["doc_id"], ["text"])) == [("7", "a")]


TRICKY = {"q0": "NA", "q1": "nan", "q2": "001", "q3": "1", "q4": "null"}


def test_ids_that_look_missing_or_numeric_stay_distinct_in_the_eval_tables(tmp_path):
    import pandas as pd

    from longrank.evaluate.metrics import write_eval_tsv

    frame = pd.DataFrame({"nDCG@10": [0.1, 0.2, 0.3, 0.4, 0.5]}, index=list(TRICKY.values()))
    write_eval_tsv(tmp_path / "e.tsv", frame)
    back = read_eval_tsv(tmp_path / "e.tsv")
    assert list(back.index) == list(TRICKY.values()) and list(back["nDCG@10"]) == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert sorted_qids(["1", "001", "10", "2", "NA", "nan", "²"]) == ["001", "1", "2", "10", "NA", "nan", "²"]


def test_a_frame_s_missing_id_is_refused_naming_its_row():
    import math

    from longrank.io.ids import column_ids

    assert column_ids(["NA", 7, "001"], "query", "frame") == ["NA", "7", "001"]
    for missing in (math.nan, None, 1.5):
        with pytest.raises(InputError, match=r"frame: row 1: query id .* is (float|NoneType)"):
            column_ids(["q1", missing], "query", "frame")


def test_a_shipped_collection_name_is_a_name_not_a_path():
    with pytest.raises(InputError, match=r"config key dataset: '\.\./\.\./x' is not a safe name"):
        validate_config({**copy.deepcopy(DEFAULT), "dataset": "../../x"})


KINDS["ids"] += 3  # the eval table, the id order, a frame's missing id
KINDS["name"] += 1  # dataset: <name> that is a path


@pytest.mark.stage
def test_query_ids_a_table_reader_would_change_run_through_data_evaluate_and_compare(tmp_path):
    """The workflow's data, candidates, sanity and evaluate jobs on a collection whose query ids include 'NA', 'nan',
    'null', '001' and '1', then the compare stage as its rule runs it: every query evaluated once, none merged."""
    docs, queries, qrels = synthetic_collection(n_queries=6, docs_per_query=3)
    queries = {TRICKY.get(q, q): t for q, t in queries.items()}
    qrels = [(TRICKY.get(q, q), d, g) for q, d, g in qrels]
    dataset = {**write_local_collection(tmp_path / "src", docs, queries, qrels), "name": "ids"}
    config = {
        "dataset": dataset,
        "query_formulation": {"method": "full"},
        "splits": {"method": "kfold", "k": 3},
        "first_stages": [{"name": "bm25", "method": "bm25", "top_k": 10}],
        "models": {"knrm": {"type": "knrm"}},
    }
    (tmp_path / "ids.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "config").symlink_to(REPO / "config")
    systems = ["bm25", "query_term_matches"]
    targets = [f"results/ids/eval/{s}.tsv" for s in systems]
    cmd, env = snakemake_command(tmp_path, *targets, "--configfile", str(tmp_path / "ids.yaml"), cores=1)
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for system in systems:
        evaluated = read_eval_tsv(tmp_path / "results" / "ids" / "eval" / f"{system}.tsv")
        assert sorted(evaluated.index) == sorted(queries), system
    out = tmp_path / "results" / "ids" / "compare"
    compare = ["compare", "--eval-dir", str(tmp_path / "results" / "ids" / "eval"), "--systems", *systems]
    done = subprocess.run(
        ["python", "-m", "longrank", *compare, "--bootstrap", "200", "--out-dir", str(out)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    from longrank.tables import read_table

    table = read_table(out / "table.csv")
    assert set(table["n_queries"]) == {len(queries)}  # every query counted once: 'NA' and 'nan' not dropped


KINDS["ids"] += 1


# ---- kind bounded: reads that end, writes that name their file (class 7) -------------------------------------------
def test_a_device_given_as_documents_is_refused_at_config_load_and_by_the_reader():
    from longrank.io.text_files import numbered_lines

    config = copy.deepcopy(DEFAULT)
    config["dataset"] = {"name": "zero", "source": "local", "docs": "/dev/zero", "queries": "q", "qrels": "r"}
    with pytest.raises(
        InputError, match=r"config key dataset.docs: /dev/zero is a character device, not a regular file"
    ):
        validate_config(config)
    with pytest.raises(InputError, match=r"/dev/zero is a character device, not a regular file"):
        next(numbered_lines("/dev/zero"))


def test_a_file_without_line_ends_is_refused_after_one_bounded_line(tmp_path, monkeypatch):
    from longrank.io import text_files, text_records

    monkeypatch.setattr(text_files, "MAX_LINE_BYTES", 1 << 20)
    (tmp_path / "docs.jsonl").write_bytes(b'{"doc_id": "d1", "text": "a"}\n' + b"x" * (3 << 20))
    with pytest.raises(InputError, match=r"docs.jsonl:2: a line longer than 1 MiB"):
        list(text_records.read_id_text_jsonl(tmp_path / "docs.jsonl", "document", ["doc_id"], ["text"]))


def test_a_full_disk_names_the_file_being_written(tmp_path):
    import errno

    from longrank.io.atomic import atomic_path

    with pytest.raises(OSError) as full, atomic_path(tmp_path / "report.md"):
        raise OSError(errno.ENOSPC, "No space left on device")  # what a write() raises: no file name
    assert full.value.filename == str(tmp_path / "report.md")
    assert list(tmp_path.iterdir()) == []  # no partial file under any name


KINDS["bounded"] = 3


def test_the_catalogue_of_issue_39_counts_its_cases():
    assert KINDS == {"name": 48, "code": 6, "run_order": 6, "ids": 17, "bounded": 3}, KINDS
