"""Stage ``graphs`` spread over shards (``mir_graphs.<set>.shards``, src/longrank/mir_graphs/graph_shards.py): each
shard builds the records of a contiguous range of the collection's documents, and the merge of every shard equals one
job's graph set, byte for byte (``graphs.sqlite``, ``settings.json``) and but the timing (``stats.json``); the set
built for pre-training likewise. The workflow plans one graphs_shard job per shard, and the shard count reaches no
job's settings."""

from __future__ import annotations

import filecmp
import json
import shlex
import shutil
from pathlib import Path

import pytest

from rehearsal import sharded_and_one_shard_commands
from conftest import write_local_collection
from longrank.cli import main
from longrank.config.files import merged
from longrank.data.records import GRAPHS, SETTINGS, GraphStore
from longrank.errors import InputError
from longrank.io.atomic import write_text
from longrank.io.json_yaml import write_json
from longrank.mir_graphs.graph_shards import SIZES
from longrank.plan import build_plan, job_inputs
from longrank.results.file_records import sha256_of
from longrank.train.input_files import directory_files
from longrank.validation.validate import validate_config
from test_mir_determinism import GRAPH_SET, long_collection

TIMING = ("seconds", "construction_seconds_per_document")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """25 documents of about 200 words (not a multiple of 3: the shards differ in size), annotated, with a PRF set
    that is also a pseudo-query set for pre-training; the graph set and the pre-training one built once whole and
    once in 3 shards merged."""
    from longrank.data.data import prepare
    from longrank.io.trec_files import write_run
    from longrank.retrieval.bm25 import bm25_run
    from longrank.data.corpus import Corpus

    root = tmp_path_factory.mktemp("graph_shards")
    dataset = write_local_collection(root / "src", *long_collection(n_queries=5, docs_per_query=5))
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.4, "test": 0.2}, root / "data")
    corpus = Corpus(root / "data")
    assert len(corpus.docs) == 25
    run = bm25_run(corpus.docs, corpus.queries, top_k=10)
    prf = root / "prf"  # PRF words from its queries' BM25 run, and pre-training's queries (overrides, qrels)
    write_run(prf / "candidates.run", run, "bm25")
    write_text(prf / "queries.tsv", "query_id\ttext\n" + "".join(f"{q}\t{t}\n" for q, t in corpus.queries.items()))
    write_text(prf / "qrels.txt", "q0 0 d0_0 1\nq4 0 d4_1 1\n")  # positives in the first and the last shard
    overrides = {"d0_0": "Bread is baked daily in London.", "d4_1": "Ships sail from Bristol at dawn."}
    write_text(
        prf / "overrides.jsonl", "".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in overrides.items())
    )
    write_json(prf / "folds.json", [{"train": ["q0", "q4"], "dev": [], "test": []}])
    main(["annotate", "--data", str(root / "data"), "--out", str(root / "annotations")])
    stages = {}
    for name, extra in (("graphs", []), ("pretrain", ["--pretrain-queries", str(prf)])):
        stage = ["graphs", "--data", str(root / "data"), "--annotations", str(root / "annotations")]
        stages[name] = [*stage, "--prf-queries", str(prf), *extra, "--config", json.dumps(GRAPH_SET)]
        main([*stages[name], "--out", str(root / name / "whole")])
        shards = [root / name / "shards" / str(i) for i in range(3)]
        for i, shard in enumerate(shards):
            main([*stages[name], "--shard", f"{i}/3", "--out", str(shard)])
        main([*stages[name], "--merge", *map(str, shards), "--out", str(root / name / "merged")])
    return root, stages


@pytest.mark.stage  # runs the annotate and graphs stages (spaCy, the tokenizer)
@pytest.mark.parametrize("name", ["graphs", "pretrain"])
def test_three_shards_merged_are_the_unsharded_graph_set_byte_for_byte(built, name):
    root, _ = built
    whole, merged_dir = root / name / "whole", root / name / "merged"
    for file in (GRAPHS, SETTINGS):
        assert filecmp.cmp(whole / file, merged_dir / file, shallow=False), file
    assert sorted(p.name for p in merged_dir.iterdir()) == sorted(p.name for p in whole.iterdir())
    one, many = (json.loads((d / "stats.json").read_text()) for d in (whole, merged_dir))
    assert {k: v for k, v in one.items() if k not in TIMING} == {k: v for k, v in many.items() if k not in TIMING}
    assert list(one) == list(many) and one["documents"] == 25 and one["prf_documents"] > 0
    # each shard its range of the collection's order, sizes a document apart
    shards = [root / name / "shards" / str(i) for i in range(3)]
    ranges = [json.loads((s / "stats.json").read_text())["shard"] for s in shards]
    assert [(r["start"], r["stop"]) for r in ranges] == [(0, 8), (8, 16), (16, 25)]
    assert [len(GraphStore(s)) for s in shards] == [8, 8, 9]
    # a training digests a graph set by its files but stats.json (input_files.RUN_RECORDS): the merge and one job
    # give the same digest, so changing only the shard count retrains nothing
    digests = [[(f.label, sha256_of(f.path)) for f in directory_files(d, ".")] for d in (whole, merged_dir)]
    assert digests[0] == digests[1] and {label for label, _ in digests[0]} == {f"./{GRAPHS}", f"./{SETTINGS}"}


@pytest.mark.stage
def test_the_pretraining_shards_read_the_positives_without_their_query_text(built):
    root, _ = built
    whole, pretrain = GraphStore(root / "graphs" / "merged"), GraphStore(root / "pretrain" / "merged")
    assert whole["d0_0"] != pretrain["d0_0"] and whole["d4_1"] != pretrain["d4_1"]  # annotated afresh in shards 0, 2
    assert "e:london" in pretrain["d0_0"]["token_keys"] and "e:bristol" in pretrain["d4_1"]["token_keys"]
    assert whole["d2_0"] == pretrain["d2_0"]  # not a positive: the collection's record


def _copies(shards: list[Path], tmp_path: Path) -> list[Path]:
    copies = [tmp_path / str(i) for i in range(len(shards))]
    for shard, copy in zip(shards, copies):
        shutil.copytree(shard, copy)
    return copies


def _refused(stage: list[str], copies: list[Path], out: Path, capsys) -> str:
    with pytest.raises(SystemExit):
        main([*stage, "--merge", *map(str, copies), "--out", str(out)])
    return capsys.readouterr().err


@pytest.mark.stage
def test_a_missing_incomplete_or_other_shard_is_never_merged(built, tmp_path, capsys):
    root, stages = built
    stage, out = stages["graphs"], tmp_path / "out"
    copies = _copies([root / "graphs" / "shards" / str(i) for i in range(3)], tmp_path)
    (copies[1] / SIZES).unlink()
    assert f"shard 1 of 3 ({copies[1]}) is missing" in _refused(stage, copies, out, capsys)
    shutil.rmtree(copies[1])
    shutil.copytree(root / "graphs" / "shards" / "1", copies[1])
    stats = json.loads((copies[2] / "stats.json").read_text())
    # shard 1's range where shard 2's belongs, a record short of its count, a shard of a pre-training set
    wrong_range = {**stats["shard"], "index": 1, "start": 8, "stop": 16}
    pretrain = {**stats["shard"], "pretrain_queries": "results/x/pseudo_queries/titles"}
    for bad in ({**stats, "shard": wrong_range}, {**stats, "documents": 8}, {**stats, "shard": pretrain}):
        write_json(copies[2] / "stats.json", bad)
        assert f"shard 2 of 3 ({copies[2]}) is incomplete" in _refused(stage, copies, out, capsys)
    # built with other settings, or from other annotations
    write_json(copies[2] / "stats.json", {**stats, "annotations": "elsewhere"})
    assert f"shard 2 of 3 ({copies[2]}) was built with the settings" in _refused(stage, copies, out, capsys)
    write_json(copies[2] / "stats.json", stats)
    settings = json.loads((copies[0] / SETTINGS).read_text())
    write_json(copies[0] / SETTINGS, {**settings, "p2p_top_k": 1})
    assert f"shard 0 of 3 ({copies[0]}) was built with the settings" in _refused(stage, copies, out, capsys)
    write_json(copies[0] / SETTINGS, {**settings, "vocab_size": 1})
    assert f"shard 1 of 3 ({copies[1]}) was cut by another tokenizer" in _refused(stage, copies, out, capsys)
    # two shards where the set has three: shard 1 of 2 is not the range shard 1 of 3 built
    assert "shard 0 of 2" in _refused(stage, copies[1:], out, capsys)
    assert not out.exists()


@pytest.mark.stage
def test_more_shards_than_documents_are_refused_naming_the_key(built, tmp_path, capsys):
    _, stages = built
    with pytest.raises(SystemExit):
        main([*stages["graphs"], "--shard", "0/26", "--out", str(tmp_path / "out")])
    assert "config key mir_graphs.<set>.shards: 26 shards for 25 documents" in capsys.readouterr().err
    for bad in ("3/3", "1-3", "-1/3"):
        with pytest.raises(SystemExit):
            main([*stages["graphs"], f"--shard={bad}", "--out", str(tmp_path / "out")])
        assert "expected i/N" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("shards", [0, -1, 2.5, "3", True])
def test_a_bad_shard_count_is_refused_at_config_load_naming_the_key(shards):
    config = merged(())
    config["mir_graphs"]["mir"]["shards"] = shards
    with pytest.raises(InputError, match="config key mir_graphs.mir.shards"):
        validate_config(config)


def test_one_shard_plans_no_shard_job_and_the_count_reaches_no_jobs_settings():
    def plan(shards: int | None):
        config = merged(())
        if shards is not None:
            config["mir_graphs"]["mir"]["shards"] = shards
        return build_plan(validate_config(config), "results/x")

    default, one, three = plan(None), plan(1), plan(3)
    assert job_inputs.graph_set_shards(default, "mir") == job_inputs.graph_set_shards(one, "mir") == []
    assert job_inputs.graph_set_shards(three, "mir") == [f"results/x/graphs_shards/mir/{i}" for i in range(3)]
    assert job_inputs.graph_set_shards(three, "mir", "titles") == [
        f"results/x/graphs_pretrain_shards/titles/mir/{i}" for i in range(3)
    ]
    assert job_inputs.graph_shard(three, "mir", "2") == "2/3"
    # the graph jobs' (and mir_speed's) settings are the same with any shard count, and the default's as before
    settings = job_inputs.graph_set_settings(three, "mir")
    assert settings == job_inputs.graph_set_settings(one, "mir") and "shards" not in json.loads(settings)
    assert json.loads(settings) == {
        k: v for k, v in validate_config(merged(()))["mir_graphs"]["mir"].items() if k not in ("prf_queries", "shards")
    }


@pytest.mark.stage  # two dry runs of the TREC DL rehearsal's DAG (about a minute each)
def test_the_rehearsal_plans_graph_shards_and_the_count_changes_no_training(tmp_path):
    """config/studies/trec-dl-rehearsal.yaml sets the graph set's 3 shards: its dry run plans 3 graphs_shard jobs and a
    graphs job merging them; the same run with one shard plans none, and every job but the graph set's own and the
    config's record has the same command (the same params: Snakemake reruns a job whose params changed), the
    trainings' among them."""
    one = tmp_path / "one_shard.yaml"
    one.write_text("mir_graphs: {mir: {shards: 1}}\n")
    three, single = sharded_and_one_shard_commands(tmp_path, one)
    assert [rule for rule, _ in three].count("graphs_shard") == 3
    assert "graphs_shard" not in [rule for rule, _ in single] and [r for r, _ in single].count("graphs") == 1
    # the merge reads the shards in order, with the settings one job is passed
    merge, whole = (shlex.split(next(c for r, c in jobs if r == "graphs")) for jobs in (three, single))
    shards = [f"results/trec-dl-2019/graphs_shards/mir/{i}" for i in range(3)]
    assert merge[merge.index("--merge") + 1 : merge.index("--out")] == shards and "--merge" not in whole
    assert merge[merge.index("--config") + 1] == whole[whole.index("--config") + 1]
    # resolved_config writes the run's whole config for the report, this key too (as annotations.shards)
    own = ("graphs", "graphs_shard", "resolved_config")
    assert any(rule == "train" for rule, _ in single)
    assert sorted(job for job in three if job[0] not in own) == sorted(job for job in single if job[0] not in own)
