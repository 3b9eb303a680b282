"""The fault catalogue's classes of escapes (``tests/test_fault_catalogue.py`` holds the first ones): what slipped
past the earlier checks because it was checked at one level only, or keyed by less than it depends on. Each case runs
the way a user meets the fault and asserts the clear message (naming the key, the file, the line) or that nothing
already kept is lost. (The export cases of this class are in ``tests/test_fault_catalogue_exports_io.py``'s
``EXPORTS``: links at any depth, JSON files named, config sizes bounded by the weights.)

Kinds (``KINDS`` counts them):

- ``history_data``: a setting's history entry is keyed by its settings and the data it ran on: the same setting on
  changed judgments is a second entry, and the report's log says the data differ.
- ``history_interrupted``: what a killed history job leaves between its two renames is completed or cleaned.
- ``owner``: the results' owner record recognises its own working directory after ``.snakemake/`` is deleted.
- ``lock_path``: an OS error on the results folder's path (a dangling ``results`` link, a file in its place) is a
  message naming the path.
- ``doc_text``: a JSON lines text that is not a string is refused by record (file, line, id, what was expected).
- ``measure``: a measure no judgment can satisfy is refused once the judgments' gains are known.
- ``yaml``: a YAML file of the config (a dataset description) that does not parse is named with its line.
- ``missing_input``: an input file a config key names that does not exist is named by its key at parse time."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from longrank.cli import main as longrank
from longrank.errors import InputError

from conftest import synthetic_collection
from test_fault_catalogue import run_stage, snapshot  # the catalogue's own helpers

KINDS: dict[str, int] = {}
DOCS, QUERIES, QRELS = synthetic_collection(n_queries=8, docs_per_query=4)


def kind(name: str, cases: list) -> list:
    KINDS[name] = KINDS.get(name, 0) + len(cases)
    return cases


# ---- kind history_data: an entry is of the settings and the data they ran on --------------------------------------
def data_and_candidates(root: Path, qrels: str) -> tuple[Path, Path]:
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "docs.jsonl").write_text(json.dumps({"doc_id": "d1", "text": "wing"}) + "\n")
    (data / "queries.tsv").write_text("q1\twing\n")
    (data / "qrels.txt").write_text(qrels)
    (data / "folds.json").write_text(json.dumps([{"train": [], "dev": [], "test": ["q1"]}]))
    (root / "bm25.run").write_text("q1 Q0 d1 1 1.0 bm25\n")
    return data, root / "bm25.run"


def archive(root: Path, steps: int, qrels: str, ndcg: float) -> dict:
    """One history job, as rule history runs it, of knrm with ``steps`` on judgments ``qrels``: latest.json."""
    data, candidates = data_and_candidates(root, qrels)
    (root / "knrm.tsv").write_text(f"query_id\tnDCG@10\nq1\t{ndcg}\n")
    (root / "knrm.run").write_text("q1 Q0 d1 1 1.0 knrm\n")
    settings = {"entry": {"type": "knrm", "train": {"steps": steps}}, "first_stage": {"method": "bm25"}}
    out = root / "history" / "knrm" / "latest.json"
    longrank(["history", "--model", "knrm", "--settings", json.dumps(settings), "--systems", "knrm",
              "--evals", str(root / "knrm.tsv"), "--runs", str(root / "knrm.run"), "--keep", "5", "--weights",
              "false", "--data", str(data), "--candidates", str(candidates), "--out", str(out)])  # fmt: skip
    return json.loads(out.read_text())


HISTORY_DATA = kind("history_data", ["changed_judgments_keep_the_old_datas_entry", "the_log_says_the_data_differ"])


def test_the_same_setting_on_changed_judgments_is_a_new_entry_and_the_old_datas_is_kept(tmp_path):
    """steps 20 -> 40, then the judgments change at 40: three entries, the old data's steps-40 one kept."""
    archive(tmp_path, 20, "q1 0 d1 1\n", 0.5)
    old_40 = archive(tmp_path, 40, "q1 0 d1 1\n", 0.6)["current"]
    latest = archive(tmp_path, 40, "q1 0 d1 2\n", 0.7)
    assert latest["current"] != old_40 and old_40 in latest["kept"] and len(latest["kept"]) == 3
    entry = json.loads((tmp_path / "history" / "knrm" / old_40 / "settings.json").read_text())
    assert entry["scores"]["knrm"]["nDCG@10"] == 0.6 and set(entry["data"]) == {
        "docs", "queries", "qrels", "folds", "candidates",
    }  # fmt: skip
    again = archive(tmp_path, 40, "q1 0 d1 2\n", 0.7)  # the same setting on the same data: its entry replaced
    assert again["current"] == latest["current"] and len(again["kept"]) == 3


def test_the_log_says_plainly_that_an_entry_ran_on_other_data(tmp_path):
    from longrank.report.history_section import _row

    archive(tmp_path, 40, "q1 0 d1 1\n", 0.6)
    latest = archive(tmp_path, 40, "q1 0 d1 2\n", 0.7)
    history = tmp_path / "history" / "knrm"
    today, earlier = (json.loads((history / name / "settings.json").read_text()) for name in latest["kept"])
    row = _row("knrm", earlier, today)
    assert row[5] == "ran on other data (qrels differ): not comparable"  # the settings are the same
    unrecorded = {k: v for k, v in earlier.items() if k != "data"}  # an entry archived before entries kept data
    assert _row("knrm", unrecorded, today)[5].startswith("ran on data not recorded")
    assert _row("knrm", today, today)[5] == "–"


# ---- kind history_interrupted: a kill between the history stage's two renames --------------------------------------
INTERRUPTED = kind("history_interrupted", ["entry_moved_aside_put_back", "old_and_staging_folders_removed"])


def test_an_entry_moved_aside_by_a_killed_history_job_is_put_back_then_kept(tmp_path):
    first = archive(tmp_path, 20, "q1 0 d1 1\n", 0.5)["current"]
    history = tmp_path / "history" / "knrm"
    kept = snapshot(history / first)
    (history / first).rename(history / f".{first}.k2j3h4_x.old")  # killed after the first rename, before the second
    latest = archive(tmp_path, 40, "q1 0 d1 1\n", 0.6)
    assert first in latest["kept"] and snapshot(history / first) == kept
    assert not [p.name for p in history.iterdir() if p.name.startswith(".")]


def test_a_killed_jobs_old_and_staging_folders_are_removed(tmp_path):
    first = archive(tmp_path, 20, "q1 0 d1 1\n", 0.5)["current"]
    history = tmp_path / "history" / "knrm"
    shutil.copytree(history / first, history / f".{first}.abcd1234.old")  # killed after both renames
    (history / ".partial-0123456789ab").mkdir()  # killed while staging
    archive(tmp_path, 40, "q1 0 d1 1\n", 0.6)
    assert not [p.name for p in history.iterdir() if p.name.startswith(".")]


# ---- kind owner: the owner record recognises its own working directory --------------------------------------------
OWNER = kind("owner", ["own_working_directory_after_snakemake_deleted"])


def test_the_owner_record_names_its_own_working_directory_as_its_own(tmp_path):
    from longrank.results.lock import acquire, check_owner, release

    workdir, results = tmp_path / "work", tmp_path / "work" / "results" / "tiny"
    workdir.mkdir()
    acquire(results, workdir, {"models": {"knrm": {"lr": 0.01}}})
    release(results)
    check_owner(results, workdir, {"models": {"knrm": {"lr": 0.01}}})  # the same config: no question
    shutil.rmtree(workdir / ".snakemake")
    with pytest.raises(InputError) as err:
        check_owner(results, workdir, {"models": {"knrm": {"lr": 0.05}}})
    text = str(err.value)
    assert f"made from this working directory ({workdir})" in text and "models.knrm.lr" in text
    assert ".snakemake/) are gone" in text and "run from" not in text


# ---- kind lock_path: OS errors on the results folder's path --------------------------------------------------------
LOCK_PATHS = kind("lock_path", ["dangling_results_link", "a_file_where_the_results_folder_belongs"])


def test_a_dangling_results_link_is_named_not_a_raw_os_error(tmp_path):
    from longrank.plan.preflight import ResultsOwner

    (tmp_path / "results").symlink_to(tmp_path / "gone")
    owner = ResultsOwner(tmp_path / "results" / "tiny", tmp_path, {})
    owner.check()
    with pytest.raises(InputError, match=r"results is a link to .*gone, which does not exist, so the results folder"):
        owner.take(locking=True)


def test_a_file_where_the_results_folder_belongs_is_named(tmp_path):
    from longrank.plan.preflight import ResultsOwner

    (tmp_path / "results").write_text("not a folder")
    with pytest.raises(InputError, match=r"results/tiny: (File exists|Not a directory) \(the results folder "):
        ResultsOwner(tmp_path / "results" / "tiny", tmp_path, {}).take(locking=True)


# ---- kind doc_text: a JSON text that is not a string --------------------------------------------------------------
DOC_TEXTS = kind(
    "doc_text",
    [
        ("a_list", ["wing", "lift"], "a JSON array"),
        ("an_object", {"body": "wing"}, "a JSON object"),
        ("a_number", 1984, "a JSON number"),
        ("a_boolean", True, "a JSON boolean"),
    ],
)


@pytest.mark.parametrize("text, found", [pytest.param(t, f, id=case) for case, t, f in DOC_TEXTS])
def test_a_document_text_that_is_not_a_string_is_refused_by_record(tmp_path, capsys, text, found):
    src = tmp_path / "src"
    src.mkdir()
    docs = [{"doc_id": d, "text": t} for d, t in DOCS.items()] + [{"doc_id": "d_odd", "text": text}]
    (src / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in docs))
    (src / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
    (src / "qrels.txt").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in QRELS))
    dataset = {"name": "tiny", "source": "local", **{k: str(src / f) for k, f in
               (("docs", "docs.jsonl"), ("queries", "queries.tsv"), ("qrels", "qrels.txt"))}}  # fmt: skip
    status, err = run_stage(
        capsys, "data", "--dataset", json.dumps(dataset), "--query-formulation", '{"method": "full"}',
        "--splits", json.dumps({"method": "holdout", "dev": 0.25, "test": 0.25}), "--out-dir", str(tmp_path / "out"),
    )  # fmt: skip
    last = err.strip().splitlines()[-1]
    assert status == 2 and "Traceback" not in err
    assert last.endswith(
        f"docs.jsonl:{len(DOCS) + 1}: document 'd_odd': the text field 'text' is {found}; expected a string (or null "
        "for no text)"
    ), last
    assert not (tmp_path / "out").exists()


# ---- kind measure: a measure no judgment can satisfy ----------------------------------------------------------------
MEASURES = kind("measure", ["relevance_level_above_every_gain", "workflow_stops_before_training"])


def test_a_measure_no_judgment_satisfies_is_refused_naming_it_and_the_gains(tmp_path, capsys):
    (tmp_path / "qrels.txt").write_text("q1 0 d1 0\nq1 0 d2 1\nq2 0 d1 2\n")
    (tmp_path / "folds.json").write_text(json.dumps([{"train": [], "dev": [], "test": ["q1", "q2"]}]))
    (tmp_path / "sys.run").write_text("q1 Q0 d1 1 2.0 sys\nq1 Q0 d2 2 1.0 sys\nq2 Q0 d1 1 1.0 sys\n")
    argv = ["evaluate", "--run", str(tmp_path / "sys.run"), "--qrels", str(tmp_path / "qrels.txt"), "--folds",
            str(tmp_path / "folds.json"), "--out", str(tmp_path / "sys.tsv"), "--measures", "nDCG@10"]  # fmt: skip
    status, err = run_stage(capsys, *argv, "P(rel=5)@10")
    last = err.strip().splitlines()[-1]
    assert status == 2 and "Traceback" not in err and not (tmp_path / "sys.tsv").exists()
    assert "evaluation.measures: P(rel=5)@10 counts a document relevant at gain 5 or more" in last, last
    assert "hold the gains 0, 1, 2: no judgment satisfies it" in last
    assert run_stage(capsys, *argv, "P(rel=2)@10")[0] == 0  # a level the judgments have


@pytest.mark.stage
def test_the_workflow_refuses_an_unsatisfiable_measure_after_the_data_and_before_any_training(tmp_path):
    """The grades are known once the data stage has read the judgments: the satisfiable check runs next (the highest
    priority) and every training waits for it, so the run stops there, the data kept, no model trained."""
    import yaml

    from conftest import REPO, snakemake, write_local_collection

    dataset = write_local_collection(tmp_path / "src", DOCS, QUERIES, QRELS)  # gains 0 and 1
    config = {
        "dataset": dataset,
        "query_formulation": {"method": "full"},
        "splits": {"method": "holdout", "dev": 0.25, "test": 0.25},
        "evaluation": {"measures": ["nDCG@10", "P(rel=2)@10"]},
    }
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "config").symlink_to(REPO / "config")
    done = snakemake(tmp_path, "report", "--configfile", str(tmp_path / "tiny.yaml"), check=False)
    results = tmp_path / "results" / "tiny"
    log = (results / "logs" / "satisfiable.log").read_text()
    assert done.returncode != 0 and "P(rel=2)@10 counts a document relevant at gain 2 or more" in log, log
    assert "hold the gains 0, 1: no judgment satisfies it" in log
    assert (results / "data" / "stats.json").is_file()
    assert not list(results.glob("logs/train_*")) and not (results / "models").exists()


# ---- kind yaml: a YAML file of the config that does not parse ------------------------------------------------------
YAML = kind("yaml", ["dataset_description_broken"])


def test_a_broken_dataset_description_is_named_with_its_line(tmp_path):
    from longrank.validation.validate import validate_config

    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nsource: local\ndocs: [unclosed\nqueries: q.tsv\n")
    with pytest.raises(InputError, match=rf"{path}:4:\d+: not valid YAML \("):
        validate_config({"dataset": str(path)})


# ---- kind missing_input: a file a config key names that does not exist -------------------------------------------
MISSING = kind("missing_input", ["local_docs", "run_file_first_stage"])


@pytest.mark.parametrize(
    "config, key",
    [
        pytest.param(
            {"dataset": {"source": "local", "docs": "nowhere/docs.jsonl"}, "first_stages": {}},
            "dataset.docs",
            id="docs",
        ),
        pytest.param(
            {"dataset": {}, "first_stages": {"theirs": {"method": "run_file", "path": "nowhere/their.run"}}},
            "first_stages.theirs.path",
            id="run_file",
        ),
    ],
)
def test_a_missing_input_file_is_named_by_its_key_before_any_job_runs(tmp_path, monkeypatch, config, key):
    from longrank.validation.checks import check_input_files_exist

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=rf"config key {key}: nowhere/\S+ not found"):
        check_input_files_exist(config)
    (tmp_path / "nowhere").mkdir()
    for name in ("docs.jsonl", "their.run"):
        (tmp_path / "nowhere" / name).write_text("")
    check_input_files_exist(config)


def test_an_ir_datasets_collection_leaves_local_file_keys_unread(tmp_path, monkeypatch):
    """A collection from ir_datasets reads no dataset.docs / queries / qrels: a leftover key is not refused."""
    from longrank.validation.checks import check_input_files_exist

    monkeypatch.chdir(tmp_path)
    check_input_files_exist({"dataset": {"source": "ir_datasets", "docs": "nowhere/docs.jsonl"}, "first_stages": {}})


def test_the_workflow_checks_its_input_files_at_parse_time():
    common = (Path(__file__).parents[1] / "workflow" / "rules" / "common.smk").read_text()
    head = common.split("PLAN = build_plan", 1)[0]
    assert "check_input_files_exist(config)" in head and os.path.exists(Path(__file__).parents[1] / "Snakefile")


KINDS["missing_input"] += 1


def test_the_catalogue_counts():
    assert KINDS == {
        "history_data": 2, "history_interrupted": 2, "owner": 1, "lock_path": 2, "doc_text": 4, "measure": 2,
        "yaml": 1, "missing_input": 3,
    }, KINDS  # fmt: skip
