"""The pisa first stage (src/longrank/retrieval/pisa.py; its index, src/longrank/retrieval/pisa_index.py) with the
real PISA engine (pyterrier-pisa, in the test extra): the index built by streaming docs.jsonl, exact rankings on a tiny
collection, the candidates stage's run file and provenance, the index as an artifact (complete or refused, rebuilt for
changed settings or collection), and the workflow's DAG with a pisa first stage."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from longrank.data.corpus import Corpus
from longrank.data.data import prepare
from longrank.errors import InputError
from longrank.io.json_yaml import read_json
from longrank.io.trec_files import read_run
from longrank.results.run_metadata import read_run_metadata
from longrank.retrieval import pisa, pisa_index
from longrank.retrieval.first_stage import parse_first_stage
from longrank.retrieval.pisa import PisaSettings

from conftest import REPO, snakemake, snakemake_dry_runs, write_local_collection

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

pytest.importorskip("pyterrier_pisa", reason="pyterrier-pisa is in the test extra: pip install -e '.[test]'")

DOCS = {
    # "zebra" is in three documents of equal length, 3, 2 and 1 times: BM25 orders them by its frequency
    "z3": "zebra zebra zebra grazing on the open plain today",
    "z2": "zebra zebra lions grazing on the open plain today",
    "z1": "zebra lions tigers grazing on the open plain today",
    "run": "the athletes were running along the river bank",
    "cat": "a cat sat on the mat in the sun all day",
    "dog": "the dog barked at the mailman every single morning",
}
QUERIES = {"zebra": "zebra", "run": "run", "nothing": "quokka", "stop": "the"}
QRELS = [("zebra", "z3", 1), ("run", "run", 1), ("nothing", "cat", 1), ("stop", "dog", 1)]


@pytest.fixture
def data(tmp_path):
    dataset = write_local_collection(tmp_path / "src", DOCS, QUERIES, QRELS)
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.25, "test": 0.25}, tmp_path / "data")
    return tmp_path / "data"


def files_of(directory):
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.iterdir()}


@pytest.mark.parametrize("analyser", pisa.ANALYSERS)
def test_index_and_retrieve_rank_by_term_frequency_and_never_write_into_the_index(data, tmp_path, analyser):
    index = tmp_path / "index"
    settings = PisaSettings(analyser=analyser)
    manifest = pisa_index.build_index(data / "docs.jsonl", settings, index)
    assert manifest["documents"] == len(DOCS) and manifest["settings"]["stemmer"] == "porter2"
    assert manifest["collection"]["size"] == (data / "docs.jsonl").stat().st_size
    assert read_json(index / pisa.MANIFEST) == json.loads(json.dumps(manifest))
    # what retrieval reads only: the forward index and the uncompressed postings are gone
    assert not {"fwd", "inv.docs", "inv.freqs"} & set(files_of(index))
    assert not list(tmp_path.glob(".index.*")), "the temporary build directory was left behind"
    before = files_of(index)

    run, cost = pisa.retrieve(index, QUERIES, settings, depth=10)
    assert list(run["zebra"]) == ["z3", "z2", "z1"]
    assert run["zebra"]["z3"] > run["zebra"]["z2"] > run["zebra"]["z1"] > 0
    assert list(run["run"]) == ["run"]  # porter2: running -> run
    assert "nothing" not in run and "stop" not in run  # an unknown word; a stop word (lucene's list)
    assert cost["documents"] == len(DOCS) and cost["index_bytes"] > 0 and cost["query_ms_per_query"] >= 0
    assert files_of(index) == before  # PISA's block-max data and compressed postings were built with the index

    if analyser == "pisa":  # PISA's stop words are query-time: every word is indexed
        run, _ = pisa.retrieve(index, QUERIES, PisaSettings(analyser="pisa", stopwords=None), depth=10)
        assert set(run["stop"]) == {"z3", "z2", "z1", "run", "cat", "dog"}
    else:  # the bm25s analyser removed them from the documents: another index
        with pytest.raises(InputError, match="build it again"):
            pisa.retrieve(index, QUERIES, PisaSettings(stopwords=None), depth=10)


def test_the_bm25s_analyser_counts_a_repeated_query_word_as_bm25s_does(data, tmp_path):
    """A query word twice counts twice (PISA's query_weighted; by default PISA counts each term once), and a
    document's length leaves out its stop words: the two engines' BM25 then differ only in IDF, whose Robertson
    form (PISA's) ln((N - df + 0.5) / (df + 0.5)) is bm25s's method robertson."""
    import bm25s
    import Stemmer

    index = tmp_path / "index"
    pisa_index.build_index(data / "docs.jsonl", PisaSettings(), index)
    queries = {"twice": "zebra lions lions tigers", "once": "zebra lions tigers"}
    run, _ = pisa.retrieve(index, queries, PisaSettings(), depth=10)
    corpus = Corpus(data)
    ids = list(corpus.docs)
    stemmer = Stemmer.Stemmer("english")
    reference = bm25s.BM25(k1=0.9, b=0.4, method="robertson")
    reference.index(bm25s.tokenize(list(corpus.docs.values()), stopwords="en", stemmer=stemmer, show_progress=False))
    for qid, text in queries.items():
        tokens = bm25s.tokenize([text], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
        docs, scores = reference.retrieve(tokens, k=len(ids), show_progress=False)
        expected = {ids[int(d)]: float(s) for d, s in zip(docs[0], scores[0]) if s > 0}
        # a term in half the documents or more weighs 0 in bm25s's robertson and 1e-6 in PISA: z3 has only those
        ranked = [d for d, score in run[qid].items() if score > 1e-3]
        assert ranked == sorted(expected, key=lambda d: (-expected[d], d)) == ["z1", "z2"]
        ratios = {d: run[qid][d] / expected[d] for d in expected}  # PISA's BM25 keeps the (k1 + 1) factor
        assert max(ratios.values()) == pytest.approx(min(ratios.values()), rel=1e-5)
    assert run["twice"]["z2"] > run["once"]["z2"]  # z2 has lions, not tigers: lions' second occurrence counts


def test_the_stage_writes_a_run_and_its_provenance_like_bm25(data, tmp_path):
    spec = parse_first_stage({"name": "fast", "method": "pisa", "top_k": 2}).entry
    index = tmp_path / "pisa" / "fast"
    python = [sys.executable, "-m", "longrank"]
    settings = json.dumps(pisa_index.index_settings_of(spec))
    subprocess.run(
        [*python, "pisa_index", "--data", str(data), "--settings", settings, "--out", str(index)], check=True
    )
    outputs = {}
    for name, entry, artifacts in (("fast", spec, [str(index)]), ("bm25", {"name": "bm25", "method": "bm25"}, [])):
        out = tmp_path / "candidates" / f"{name}.run"
        argv = ["candidates", "--data", str(data), "--first-stage", json.dumps(entry), "--out", str(out)]
        subprocess.run([*python, *argv, *(["--artifacts", *artifacts] if artifacts else [])], check=True)
        outputs[name] = out
    lines = outputs["fast"].read_text().splitlines()
    assert [line.split()[:4] for line in lines if line.startswith("zebra ")] == [
        ["zebra", "Q0", "z3", "1"],
        ["zebra", "Q0", "z2", "2"],
    ]  # top_k 2
    assert {len(line.split()) for line in lines} == {6} and all(line.endswith(" fast") for line in lines)
    assert list(read_run(outputs["fast"])["zebra"]) == list(read_run(outputs["bm25"])["zebra"])[:2]
    meta, bm25_meta = read_run_metadata(outputs["fast"]), read_run_metadata(outputs["bm25"])
    spec_keys = {"schema-version", "run-version", "tag", "platform", "implementation", "data", "method"}
    assert set(meta) == set(bm25_meta) == spec_keys | {"longrank"}
    assert meta["method"]["retrieval"] == [{"name": "fast", "method": "pisa", "params": spec}]
    assert "pyterrier_pisa==0.4.9" in meta["platform"]["software"]["retrieval toolkit"]
    stats = read_json(outputs["fast"].with_suffix(".stats.json"))
    assert stats["method"] == "pisa" and stats["index_bytes"] > 0 and stats["documents"] == len(DOCS)


def test_an_index_is_refused_when_half_written_or_built_for_other_settings_or_another_collection(data, tmp_path):
    index = tmp_path / "index"
    pisa_index.build_index(data / "docs.jsonl", PisaSettings(), index)
    with pytest.raises(InputError, match=r"built for .*'stemmer': 'porter2'.*'stemmer': None.*build it again"):
        pisa.retrieve(index, QUERIES, PisaSettings(stemmer=None), depth=10)
    with pytest.raises(InputError, match=r"built for .*'k1': 0\.9.*'k1': 1\.2"):
        pisa.retrieve(index, QUERIES, PisaSettings(k1=1.2), depth=10)
    other = tmp_path / "other.jsonl"
    other.write_text((data / "docs.jsonl").read_text() + '{"doc_id": "new", "text": "zebra"}\n')
    with pytest.raises(InputError, match="the collection changed; build the index again"):
        pisa.retrieve(index, QUERIES, PisaSettings(), depth=10, docs_path=other)
    (index / pisa.MANIFEST).unlink()  # as a build killed before its last step leaves it
    with pytest.raises(InputError, match="not a complete PISA index"):
        pisa.retrieve(index, QUERIES, PisaSettings(), depth=10)


def test_a_rebuild_for_new_settings_replaces_the_index_and_a_failed_one_leaves_it(data, tmp_path):
    index = tmp_path / "index"
    pisa_index.build_index(data / "docs.jsonl", PisaSettings(), index)
    assert list(pisa.retrieve(index, QUERIES, PisaSettings(), depth=10)[0]["run"]) == ["run"]
    pisa_index.build_index(data / "docs.jsonl", PisaSettings(stemmer=None), index)
    assert read_json(index / pisa.MANIFEST)["settings"]["stemmer"] is None
    assert "run" not in pisa.retrieve(index, QUERIES, PisaSettings(stemmer=None), depth=10)[0]  # running != run
    kept = {p.name: p.read_bytes() for p in index.iterdir()}

    broken = tmp_path / "broken.jsonl"
    broken.write_text((data / "docs.jsonl").read_text() + "not json\n")
    with pytest.raises(InputError, match=rf"broken.jsonl:{len(DOCS) + 1}: expected a JSON object"):
        pisa_index.build_index(broken, PisaSettings(), index)
    assert {p.name: p.read_bytes() for p in index.iterdir()} == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.jsonl", "data", "index", "src"]


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"stemmer": "english"}, r"first_stages\[1\]\.stemmer: 'english' is not one of PISA's stemmers"),
        ({"stopwords": "en"}, r"first_stages\[1\]\.stopwords: 'en' is not one of"),
        ({"stemmer": "krovetz"}, r"first_stages\[1\]\.stemmer: krovetz is PISA's own; it needs analyser: pisa"),
    ],
)
def test_a_bad_setting_is_named_when_the_config_is_validated(entry, message):
    from longrank.validation.validate import validate_config

    config = {
        "dataset": {"name": "x", "id": "cranfield"},
        "models": {"knrm": {"type": "knrm"}},
        "first_stages": [{"name": "bm25", "method": "bm25"}, {"name": "fast", "method": "pisa", **entry}],
    }
    with pytest.raises(InputError, match=message):
        validate_config(config, str(SCHEMA))


SCHEMA = next(p for p in (REPO / "workflow/schemas/config.schema.yaml", REPO / "config/schema.yaml") if p.exists())


def test_the_config_resolves_pisa_defaults():
    from longrank.validation.validate import validate_config

    config = validate_config(
        {
            "dataset": {"name": "x", "id": "cranfield"},
            "models": {"knrm": {"type": "knrm"}},
            "first_stages": [{"name": "fast", "method": "pisa"}],
        },
        str(SCHEMA),
    )
    assert config["first_stages"]["fast"] == {
        "name": "fast",
        "method": "pisa",
        "top_k": 100,
        "k1": 0.9,
        "b": 0.4,
        "stemmer": "porter2",
        "stopwords": "lucene",
        "analyser": "bm25s",
    }


# --- the workflow ------------------------------------------------------------------------------------------------
def example_workdir(tmp_path):
    """A working directory laid out as the repository root, for the example collection's config."""
    (tmp_path / "config").symlink_to(REPO / "config")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    return tmp_path


def with_pisa(workdir, name: str = "pisa", **first_stage) -> list[str]:
    """examples/mine.yaml with a pisa first stage in place of its bm25 (an overlay as a user writes one, ``name``.yaml
    in the working directory)."""
    overlay = {"first_stages": [{"name": "fast", "method": "pisa", "top_k": 50, **first_stage}]}
    (workdir / f"{name}.yaml").write_text(yaml.safe_dump(overlay))
    return ["--configfile", "examples/mine.yaml", f"{name}.yaml"]


def planned_jobs(output: str) -> dict[str, int]:
    assert "Exception" not in output and "Error" not in output, output[-4000:]
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", output, re.M)}


def test_the_workflow_plans_the_index_once_before_the_candidates(tmp_path):
    workdir = example_workdir(tmp_path)
    configs = with_pisa(workdir)
    done = snakemake(workdir, "-n", "--printshellcmds", "report", *configs)
    jobs = planned_jobs(done.stdout + done.stderr)
    assert jobs["pisa_index"] == 1 and jobs["candidates"] == 1 and jobs["train"] == 1
    shell = done.stdout
    assert "longrank pisa_index --data results/mine/data" in shell
    assert "--artifacts results/mine/pisa/fast --out results/mine/candidates/fast.run" in shell


@pytest.mark.e2e
def test_the_workflow_rebuilds_the_index_for_new_index_settings_only(tmp_path, ir_datasets_home):
    workdir = example_workdir(tmp_path)
    target = "results/mine/candidates/fast.run"
    snakemake(workdir, target, *with_pisa(workdir, analyser="pisa"))
    run = read_run(workdir / target)
    assert len(run) == 10 and all(0 < len(docs) <= 50 for docs in run.values())
    pisa_analyser = {"analyser": "pisa"}
    index_settings = [{**pisa_analyser, "stemmer": "krovetz"}, {**pisa_analyser, "b": 0.75}, {}]  # {}: bm25s
    changes = {
        "pisa": {"analyser": "pisa"},  # the settings of the run: its own overlay file again
        "query_time": {"analyser": "pisa", "stopwords": "terrier", "top_k": 20},
        **{f"index{i}": setting for i, setting in enumerate(index_settings)},
    }
    # the dry runs of the changed settings over the finished run, in one batch
    dry = snakemake_dry_runs(
        {key: (workdir, [target, *with_pisa(workdir, key, **change)]) for key, change in changes.items()},
        tmp_path / "dry_runs",
    )
    assert all(run.returncode == 0 for run in dry.values()), {k: r.output[-3000:] for k, r in dry.items()}
    assert planned_jobs(dry["pisa"].output) == {}  # all done
    assert planned_jobs(dry["query_time"].output) == {"candidates": 1, "total": 1}
    for i, index_setting in enumerate(index_settings):
        planned = planned_jobs(dry[f"index{i}"].output)
        assert planned == {"pisa_index": 1, "candidates": 1, "total": 2}, index_setting


def test_a_pseudo_query_set_takes_its_bm25_candidates_from_a_pisa_first_stage(data, tmp_path):
    """pseudo_queries.<set>.first_stage: the stage's CLI ranks the pseudo-queries from the pisa first stage's index
    (MS MARCO's 3.2M documents do not fit bm25s's memory), exactly as that index ranks the same queries; a first
    stage of another method is refused by name."""
    spec = parse_first_stage({"name": "fast", "method": "pisa", "top_k": 10}).entry
    index = tmp_path / "pisa" / "fast"
    pisa_index.build_index(data / "docs.jsonl", PisaSettings(), index)
    cfg = {"source": "ict", "count": 6, "query_words": 2, "depth": 3, "first_stage": "fast"}
    out = tmp_path / "pq"
    argv = [sys.executable, "-m", "longrank", "pseudo_queries", "--data", str(data), "--name", "x"]
    argv += ["--config", json.dumps(cfg), "--out", str(out)]
    subprocess.run([*argv, "--first-stage", json.dumps(spec), "--index", str(index)], check=True)
    queries = dict(line.split("\t") for line in (out / "queries.tsv").read_text().splitlines()[1:])
    expected, _ = pisa.retrieve(index, queries, PisaSettings(), depth=3)
    written = read_run(out / "candidates.run")
    assert written.keys() == {q for q in expected if q in queries} and len(written) >= 2
    for q, ranked in written.items():  # the same documents and scores (the run file prints 8 digits)
        assert ranked.keys() == expected[q].keys()
        assert all(score == pytest.approx(expected[q][d], rel=1e-6) for d, score in ranked.items())
    bm25 = json.dumps({"name": "bm25", "method": "bm25"})
    failed = subprocess.run(
        [*argv[:-1], str(tmp_path / "pq2"), "--first-stage", bm25, "--index", str(index)],
        capture_output=True,
        text=True,
    )
    assert failed.returncode != 0 and "pseudo_queries.x.first_stage: 'bm25' is a 'bm25' first stage" in failed.stderr
