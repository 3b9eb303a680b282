"""Provenance beside every run: a stage that writes a run writes ``<run>.meta.yaml`` beside it, in the
shape of ir_metadata (platform, implementation, method, run), and the report names the commit it records."""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import platform
import re
import shlex
import subprocess
import sys
import time
import types
from types import SimpleNamespace

import pytest
import yaml

from conftest import REPO
from longrank.results import run_metadata
from longrank.io.trec_files import read_run
from longrank.report.provenance import code_version
from longrank.retrieval import candidates, sanity

BM25 = {"name": "lexical", "method": "bm25", "k1": 0.9, "b": 0.4, "stemmer": "english", "stopwords": "en", "top_k": 30}


def head_commit() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_the_candidates_stage_writes_its_runs_metadata_with_the_commit_the_entry_and_a_wall_time(tiny_data):
    out = tiny_data / "candidates" / "lexical.run"
    before = time.time()
    candidates.run(
        argparse.Namespace(
            data=str(tiny_data / "data"), first_stage=json.dumps(BM25), dataset="{}", artifacts=[], out=str(out)
        )
    )
    assert read_run(out)
    path = tiny_data / "candidates" / "lexical.run.meta.yaml"
    meta = yaml.safe_load(path.read_text())  # parses as plain YAML
    spec = ["schema-version", "run-version", "tag", "platform", "implementation", "data", "method"]
    assert list(meta) == [*spec, "longrank"]  # the spec's sections in its order, then LongRank's own facts
    assert meta["schema-version"] == "0.1" and meta["tag"] == "lexical"
    assert run_metadata.schema_errors(meta) == []
    # the test collection came from local files (tests/conftest.py's write_local_collection): named as configured
    collection = meta["data"]["test collection"]
    assert collection["source"] == str(tiny_data / "src" / "docs.jsonl") and collection["qrels"].endswith("qrels.txt")
    assert "training data" not in meta["data"]  # BM25 trains on nothing
    files = meta["longrank"]["data"]["files"]
    assert files["collection"]["sha256"] == hashlib.sha256((tiny_data / "data" / "docs.jsonl").read_bytes()).hexdigest()
    assert files["topics"]["file"] == "queries.tsv" and files["qrels"]["file"] == "qrels.txt"
    folds = json.loads((tiny_data / "data" / "folds.json").read_text())
    split = meta["longrank"]["data"]["split"]
    assert [fold["test"]["ids"] for fold in split] == [sorted(fold["test"]) for fold in folds]
    implementation = meta["implementation"]
    assert implementation["source"]["commit"] == head_commit() and implementation["source"]["lang"] == ["python"]
    assert meta["longrank"]["implementation"]["dirty"] in (True, False)
    # called in-process (not through longrank.cli): the command is this process's own
    assert (
        implementation["executable"]["cmd"] == shlex.join(["python", *sys.argv])
        or sys.argv[0] in (implementation["executable"]["cmd"])
    )
    assert meta["method"] == {
        "automatic": True,
        "score ties": "by document id, ascending",
        "retrieval": [{"name": "lexical", "method": "bm25", "params": BM25}],
    }
    assert meta["longrank"]["run"]["file"] == "lexical.run"
    # measured from this process's start (a stage is one process; here the test runner's, which may have run for
    # an hour under a loaded CI): between the time to the call and the time to now
    started = run_metadata.process_started()
    assert before - started - 1 <= meta["longrank"]["run"]["wall_time_s"] <= time.time() - started + 1
    hardware = meta["platform"]["hardware"]
    assert hardware["cpu"]["number of cores"] >= 1 and hardware["cpu"]["model"] and hardware["cpu"]["architecture"]
    assert re.fullmatch(r"\d+\.\d GB", hardware["ram"]) and meta["longrank"]["platform"]["memory_bytes"] > 0
    assert meta["platform"]["operating system"]["kernel"] and meta["platform"]["operating system"]["distribution"]
    software = meta["platform"]["software"]
    libraries = dict(line.split("==") for line in software["libraries"]["python"])
    assert libraries["bm25s"] == importlib.metadata.version("bm25s") and "bm25s==" in software["retrieval toolkit"][0]
    # torch with its build (+cpu, +cu130): the installed distribution's version where the stage did not load it
    assert libraries["torch"] == importlib.metadata.version("torch") and "+" in libraries["torch"]
    assert meta["longrank"]["platform"]["python"] == platform.python_version()
    assert not list((tiny_data / "candidates").glob(".*.tmp"))  # written atomically: no temporary left
    assert run_metadata.read_run_metadata(out) == meta


def test_the_sanity_stage_writes_metadata_and_the_report_names_its_commit(tiny_data):
    out = tiny_data / "runs" / "query_term_matches.run"
    sanity.run(
        argparse.Namespace(
            data=str(tiny_data / "data"),
            candidates=str(tiny_data / "bm25.run"),
            rerank_depth=10,
            read_words=None,  # the whole document: query_term_matches itself
            out=str(out),
        )
    )
    meta = run_metadata.read_run_metadata(out)
    assert run_metadata.schema_errors(meta) == []
    # a two-stage pipeline: the first stage's run has no record here (tiny_data's bm25.run), so it is named by file
    first, own = meta["method"]["retrieval"]
    assert first == {"name": "bm25", "method": "a given run", "params": {"file": str(tiny_data / "bm25.run")}}
    assert own["reranks"] == "bm25" and own["method"] == "query_term_matches"
    assert own["params"] == {"method": "query_term_matches", "rerank_depth": 10}
    assert meta["method"]["score ties"] == "by document id, ascending"  # the sanity run is written without them
    manifest = SimpleNamespace(candidates={"bm25": str(tiny_data / "bm25.run")}, runs={"query_term_matches": str(out)})
    text = code_version(SimpleNamespace(manifest=manifest))  # bm25.run has none: the first with one is read
    assert head_commit() in text and "query_term_matches.run.meta.yaml" in text
    # whether tracked files differed, from the record's longrank section (the spec has no key for it)
    dirty = meta["longrank"]["implementation"]["dirty"]
    assert {True: "with uncommitted changes to tracked files", False: "a clean tree"}[dirty] in text


def test_the_given_start_gives_the_wall_time_and_outside_a_checkout_the_source_is_unknown(tmp_path, monkeypatch):
    path = run_metadata.write_run_metadata(tmp_path / "x.run", {"type": "knrm"}, started=time.time() - 5)
    meta = yaml.safe_load(path.read_text())
    assert path.name == "x.run.meta.yaml" and 5 <= meta["longrank"]["run"]["wall_time_s"] < 60
    run_metadata.source.cache_clear()
    monkeypatch.setattr(run_metadata, "SOURCE", tmp_path)  # no git checkout here
    try:
        assert run_metadata.source() == {"commit": "unknown", "dirty": "unknown"}
        manifest = SimpleNamespace(candidates={}, runs={})
        assert "commit unknown" in code_version(SimpleNamespace(manifest=manifest))
    finally:
        run_metadata.source.cache_clear()


# ir_metadata's own examples (docs/metadata/platform.md, implementation.md and method.md of irgroup/ir_metadata,
# shortened): the schema transcribed from its checklists accepts them
SPEC_EXAMPLE = """
schema-version: 0.1
run-version: 1.0
tag: h2oloo.ccrf.04.core17.ax_e3_0.6
platform:
  hardware:
    cpu: {model: Intel(R) Xeon(R) Gold 6144 CPU @ 3.50GHz, architecture: x86_64, operation mode: 64-bit,
          number of cores: 16}
    ram: 32 GB
  operating system: {kernel: GNU/Linux 4.15.0-166-generic, distribution: Ubuntu 18.04.5 LTS}
  software:
    libraries: {python: [numpy==1.15.4, scipy==1.1.0], java: [lucene==7.6]}
    retrieval toolkit: [anserini==0.3.0]
implementation:
  executable: {cmd: python src/main/python/ecir2019_ccrf/generate_runs.py --config ccrf.json}
  source: {lang: [python], repository: https://github.com/castorini/anserini, commit: 9548cd6}
method:
  automatic: true
  retrieval:
  - {name: bm25, method: org.apache.lucene.search.similarities.Similarity.BM25Similarity, b: 0.4, k1: 0.9}
  - {name: lr reranker, method: sklearn.linear_model.LogisticRegression, reranks: bm25}
  - {name: interpolation, weight: 0.6, interpolates: [bm25, lr reranker]}
data:
  test collection: {name: The New York Times Annotated Corpus, ir_datasets: https://ir-datasets.com/nyt}
  training data: [{name: TREC disks 4 and 5, source: https://trec.nist.gov/data/cd45/index.html}]
  other: [{name: GloVe embeddings, source: https://nlp.stanford.edu/projects/glove/}]
"""


def test_the_records_stages_write_follow_ir_metadatas_checklists_and_the_old_layout_does_not(tiny_data):
    """The JSON Schema (results/ir_metadata.schema.json) accepts the spec's own example and the record the candidates
    stage writes, and refuses what the record was before it followed the spec's keys (libraries as a name -> version
    map, lang as a mapping, no run-version)."""
    assert run_metadata.schema_errors(yaml.safe_load(SPEC_EXAMPLE)) == []
    out = tiny_data / "candidates" / "lexical.run"
    candidates.run(
        argparse.Namespace(
            data=str(tiny_data / "data"), first_stage=json.dumps(BM25), dataset="{}", artifacts=[], out=str(out)
        )
    )
    meta = run_metadata.read_run_metadata(out)
    assert run_metadata.schema_errors(meta) == []
    old = json.loads(json.dumps(meta))
    old["platform"]["software"]["libraries"] = {"bm25s": "0.3.16"}
    old["implementation"]["source"]["lang"] = {"python": "3.11.7"}
    del old["run-version"]
    errors = run_metadata.schema_errors(old)
    assert len(errors) == 3, errors
    assert any(e.startswith("platform.software.libraries.bm25s: ") for e in errors)
    assert any(e.startswith("implementation.source.lang: ") for e in errors)
    assert any("'run-version' is a required property" in e for e in errors)


def repro_eval_metadata(monkeypatch):
    """repro_eval's reference reader of annotated runs. repro_eval 0.5.0's metadata module imports pkg_resources
    (setuptools) at the top for its run-annotating side, and LongRank's environment has no setuptools; the two readers
    used here never touch it, so an empty module stands in where it is missing."""
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        monkeypatch.setitem(sys.modules, "pkg_resources", types.ModuleType("pkg_resources"))
    monkeypatch.delitem(sys.modules, "repro_eval.metadata", raising=False)
    from repro_eval.metadata import MetadataHandler

    return MetadataHandler


def test_annotate_run_writes_the_in_run_form_that_repro_eval_reads_and_the_plain_run_stays(
    tiny_data, capsys, monkeypatch
):
    """``longrank annotate_run``: the record as ir_metadata's comment header of a copy of the run; repro_eval's
    reader gets the record back, and the ranking after stripping the header is the plain run's."""
    import ir_measures

    MetadataHandler = repro_eval_metadata(monkeypatch)

    from longrank.cli import main

    out = tiny_data / "candidates" / "lexical.run"
    main(["candidates", "--data", str(tiny_data / "data"), "--first-stage", json.dumps(BM25), "--out", str(out)])
    record = run_metadata.read_run_metadata(out)
    # through longrank.cli: the command is the stage's own, as a Snakemake rule runs it
    assert record["implementation"]["executable"]["cmd"] == shlex.join(
        ["python", "-m", "longrank", "candidates", "--data", str(tiny_data / "data"), "--first-stage"]
        + [json.dumps(BM25), "--out", str(out)]
    )
    annotated = tiny_data / "lexical.annotated.run"
    main(["annotate_run", "--run", str(out), "--out", str(annotated)])
    lines = annotated.read_text().splitlines()
    assert lines[0] == "# ir_metadata.start" and all(
        line.startswith("# ") for line in lines[: lines.index("# ir_metadata.end")]
    )
    assert MetadataHandler.read_metadata(str(annotated)) == record
    # the ranking is the plain run's, through repro_eval's stripping and through ir-measures after it (ir-measures
    # itself refuses the comment lines: a run's header is for readers that expect it)
    stripped = MetadataHandler.strip_metadata(str(annotated))
    assert {q: dict(d) for q, d in stripped.items()} == {q: dict(d) for q, d in read_run(out).items()}
    body = "".join(line + "\n" for line in lines if not line.startswith("#"))
    assert body == out.read_text()
    assert list(ir_measures.read_trec_run(body)) == list(ir_measures.read_trec_run(str(out)))
    with pytest.raises(ValueError):
        list(ir_measures.read_trec_run(str(annotated)))
    # the run itself is never annotated in place, and a run without a record is refused by name
    for argv, said in (
        (["--run", str(out), "--out", str(out)], "is the run itself"),
        (["--run", str(tiny_data / "bm25.run"), "--out", str(tiny_data / "x.run")], "no record beside it"),
    ):
        with pytest.raises(SystemExit):
            main(["annotate_run", *argv])
        assert said in capsys.readouterr().err


def test_a_collection_from_ir_datasets_is_named_by_its_id_and_page(ir_datasets_home, tmp_path):
    """The data stage records where the collection came from (stats.json's ``source``); a run's ``test collection``
    then gives its ir_datasets id and the page that documents it (topics and qrels come from the same place)."""
    from longrank.data.data import prepare

    dataset = {"name": "cranfield", "source": "ir_datasets", "id": "cranfield", "doc_fields": ["title", "text"]}
    prepare(dataset, {"method": "full"}, {"method": "holdout"}, tmp_path / "cranfield" / "data")
    out = tmp_path / "cranfield" / "candidates" / "lexical.run"
    candidates.run(
        argparse.Namespace(
            data=str(tmp_path / "cranfield" / "data"),
            first_stage=json.dumps(BM25),
            dataset=json.dumps(dataset),
            artifacts=[],
            out=str(out),
        )
    )
    meta = run_metadata.read_run_metadata(out)
    page = "https://ir-datasets.com/cranfield.html#cranfield"
    assert meta["data"]["test collection"] == {
        "name": "cranfield",
        "source": page,
        "qrels": page,
        "topics": page,
        "ir_datasets": "cranfield",
    }
    assert run_metadata.schema_errors(meta) == []
