"""Stage ``annotate`` spread over shards (``annotations.shards``, src/longrank/mir_graphs/annotate.py): each shard
annotates a contiguous range of the collection's documents, and the merge of every shard equals one job's
annotation of the whole collection, byte for byte (``annotations.sqlite``) and but the timing (``stats.json``)."""

from __future__ import annotations

import filecmp
import json
import shutil

import pytest

from conftest import synthetic_collection
from longrank.cli import main
from longrank.data.docstore import write_docs
from longrank.errors import InputError
from longrank.config.files import merged
from longrank.mir_graphs.annotate import ANNOTATIONS, Annotations, shard_range
from longrank.results.file_records import sha256_of
from longrank.train.input_files import directory_files
from longrank.plan import build_plan, job_inputs
from longrank.validation.validate import validate_config

TIMING = ("seconds", "docs_per_second")
CONFIG = json.dumps({"max_words": 30, "batch_size": 4, "n_process": 1})


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    """37 documents (not a multiple of 3: the shards differ in size), a few with named entities, annotated once
    whole and once in 3 shards merged."""
    root = tmp_path_factory.mktemp("shards")
    docs, _, _ = synthetic_collection(n_queries=4, docs_per_query=8)
    docs |= {
        "e1": "Alice moved to Paris in 1999. Bob stayed in London with Carol.",
        "e2": "Mary visited Berlin last week and then flew home to Rome yesterday.",
        "e3": "The Boeing wing was tested by NASA at Langley. Results follow.",
        "e4": "Germany and France signed the treaty in Geneva on Monday.",
        "e5": "Tokyo hosted the Olympics.\n\nMillions watched on television.",
    }
    ordered = dict(sorted(docs.items(), key=lambda item: item[0][::-1]))  # entities spread over the shards
    assert len(ordered) == 37
    write_docs(root / "data" / "docs.jsonl", iter(ordered.items()))
    stage = ["annotate", "--data", str(root / "data"), "--config", CONFIG]
    main([*stage, "--out", str(root / "whole")])
    shards = [root / "annotations_shards" / str(i) for i in range(3)]
    for i, shard in enumerate(shards):
        main([*stage, "--shard", f"{i}/3", "--out", str(shard)])
    main([*stage, "--merge", *map(str, shards), "--out", str(root / "merged")])
    return root, stage, shards


@pytest.mark.stage  # runs the annotate stage (spaCy)
def test_three_shards_merged_are_the_unsharded_annotations_byte_for_byte(collection):
    root, _, shards = collection
    whole, merged_dir = root / "whole", root / "merged"
    assert filecmp.cmp(whole / ANNOTATIONS, merged_dir / ANNOTATIONS, shallow=False)
    one, many = (json.loads((d / "stats.json").read_text()) for d in (whole, merged_dir))
    assert {k: v for k, v in one.items() if k not in TIMING} == {k: v for k, v in many.items() if k not in TIMING}
    assert one["documents"] == 37 and one["entity_labels"] and "shards" not in one["settings"]
    # each shard its range of the collection's order, sizes a document apart
    ranges = [json.loads((s / "stats.json").read_text())["shard"] for s in shards]
    assert [(r["start"], r["stop"]) for r in ranges] == [(0, 12), (12, 24), (24, 37)]
    assert [shard_range(i, 3, 37) for i in range(3)] == [(0, 12), (12, 24), (24, 37)]
    assert sum(len(Annotations(s)) for s in shards) == len(Annotations(merged_dir)) == 37
    # a training's fingerprint digests a directory by its files' content, not stats.json (input_files.RUN_RECORDS):
    # the merge and the single job give the same digest, so changing only annotations.shards retrains nothing
    digests = [[(f.label, sha256_of(f.path)) for f in directory_files(d, ".")] for d in (whole, merged_dir)]
    assert digests[0] == digests[1] and [label for label, _ in digests[0]] == [f"./{ANNOTATIONS}"]


@pytest.mark.stage
def test_a_missing_or_incomplete_shard_is_never_merged(collection, tmp_path, capsys):
    root, stage, shards = collection
    copies = [tmp_path / str(i) for i in range(3)]
    for shard, copy in zip(shards, copies):
        shutil.copytree(shard, copy)
    shutil.rmtree(copies[1])
    with pytest.raises(SystemExit):
        main([*stage, "--merge", *map(str, copies), "--out", str(tmp_path / "out")])
    assert f"shard 1 of 3 ({copies[1]}) is missing" in capsys.readouterr().err
    # a shard of another range (shard 1 of 3 given where shard 2 of 3 belongs) or with a record short of its count
    shutil.copytree(shards[1], copies[1])
    stats = json.loads((copies[2] / "stats.json").read_text())
    for bad in ({**stats, "shard": {"index": 1, "shards": 3, "start": 12, "stop": 24}}, {**stats, "documents": 12}):
        (copies[2] / "stats.json").write_text(json.dumps(bad))
        with pytest.raises(SystemExit):
            main([*stage, "--merge", *map(str, copies), "--out", str(tmp_path / "out")])
        assert f"shard 2 of 3 ({copies[2]}) is incomplete" in capsys.readouterr().err
    # a shard of another spaCy: one job would have run one pipeline over the whole collection
    (copies[2] / "stats.json").write_text(json.dumps({**stats, "spacy": "0.0"}))
    with pytest.raises(SystemExit):
        main([*stage, "--merge", *map(str, copies), "--out", str(tmp_path / "out")])
    assert f"shard 2 of 3 ({copies[2]}) was annotated by" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.stage  # its collection fixture runs the annotate stage (spaCy) five times: not the quick tier's 16 s
def test_more_shards_than_documents_are_refused_naming_the_key(collection, tmp_path, capsys):
    _, stage, _ = collection
    with pytest.raises(SystemExit):
        main([*stage, "--shard", "0/38", "--out", str(tmp_path / "out")])
    assert "config key annotations.shards: 38 shards for 37 documents" in capsys.readouterr().err
    for bad in ("3/3", "1-3", "-1/3"):
        with pytest.raises(SystemExit):
            main([*stage, f"--shard={bad}", "--out", str(tmp_path / "out")])
        assert "expected i/N" in capsys.readouterr().err


@pytest.mark.parametrize("shards", [0, 2.5, "3", True])
def test_a_bad_shard_count_is_refused_at_config_load_naming_the_key(shards):
    config = merged(())
    config["annotations"] = {"shards": shards}
    with pytest.raises(InputError, match="config key annotations.shards"):
        validate_config(config)


def test_one_shard_plans_no_shard_job_and_more_plan_one_each_merged_on_one_thread():
    def plan(annotations: dict):
        config = merged(())
        config["annotations"] = annotations
        config = validate_config(config)
        return build_plan(config, "results/x")

    one = plan({"n_process": 4})
    assert job_inputs.annotation_shards(one) == [] and job_inputs.annotate_threads(one) == 4
    three = plan({"n_process": 4, "shards": 3})
    assert job_inputs.annotation_shards(three) == [f"results/x/annotations_shards/{i}" for i in range(3)]
    assert job_inputs.annotate_threads(three) == 1  # the merge copies records: spaCy runs in the shard jobs
    # the stage's settings are the same with any shard count: changing it alone changes no job's settings
    assert job_inputs.annotate_settings(one) == job_inputs.annotate_settings(three)
    assert "shards" not in json.loads(job_inputs.annotate_settings(three))


def test_every_stage_passed_annotation_settings_gets_ones_it_accepts():
    """annotate and mir_speed read the annotation settings (annotate.settings refuses an unknown key): each rule passes
    them through job_inputs.annotate_settings, never the config's whole block, whose ``shards`` no stage reads (the
    rehearsal's mir_speed once failed on it)."""
    import re

    from conftest import REPO
    from longrank.mir_graphs.annotate import settings

    config = merged(())
    config["annotations"] = {"shards": 3}
    assert settings(json.loads(job_inputs.annotate_settings(build_plan(validate_config(config), "results/x"))))
    whole_block = re.compile(r"""config\[["']annotations["']\](?!\s*\[)""")
    passed_whole = [p.name for p in (REPO / "workflow" / "rules").glob("*.smk") if whole_block.search(p.read_text())]
    assert not passed_whole, passed_whole
