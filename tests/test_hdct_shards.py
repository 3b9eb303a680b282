"""Stage ``hdct`` spread over shards (``first_stages[].shards``, src/longrank/train/hdct_shards.py): the encoder trained
in a job of its own, each shard weighting a range of the collection's documents cut at the weighting chunk, and the
merge of every shard equal to one job's output, byte for byte (``model.safetensors``, ``index/``) and but the timing
(``stats.json``). The workflow plans one hdct_shard job per shard, and the shard count reaches no other job's
settings."""

from __future__ import annotations

import filecmp
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from rehearsal import sharded_and_one_shard_commands
from conftest import REPO, synthetic_collection, write_local_collection
from longrank.cli import main
from longrank.config.files import merged
from longrank.data.corpus import Corpus
from longrank.errors import InputError
from longrank.io.json_yaml import write_json
from longrank.plan import build_plan, job_inputs
from longrank.train import hdct_build as hdct
from longrank.train import hdct_shards
from longrank.validation.validate import validate_config

SPEC = {"name": "hdct", "method": "hdct", "steps": 3, "batch_size": 4, "passage_words": 30, "max_passages": 2}
TIMING = ("train_seconds", "weight_seconds", "index_seconds", "docs_per_second")
CHUNK = 7  # 120 documents in 18 chunks of 7: 3 shards of 42, 42 and 36 documents


def _files(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """120 short documents with titles; the stage run once whole and once as an encoder, 3 shards and their merge,
    at a weighting chunk of 7 documents (so that the shards' ranges are whole chunks, as at 256 on a collection)."""
    from longrank.data.data import prepare

    root = tmp_path_factory.mktemp("hdct_shards")
    dataset = write_local_collection(root / "src", *synthetic_collection())
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.25, "test": 0.25}, root / "data")
    corpus = Corpus(root / "data")
    titles = {d: " ".join(corpus.docs[d].split()[:2]) for d in list(corpus.docs)[:40]}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hdct, "CHUNK", CHUNK)
        hdct.build(SPEC, corpus, root / "whole", titles=titles, device="cpu")
        hdct_shards.train_only(SPEC, corpus, root / "encoder", titles, None, "cpu")
        shards = [root / "shards" / str(i) for i in range(3)]
        stage = ["hdct", "--data", str(root / "data"), "--first-stage", json.dumps(SPEC), "--device", "cpu"]
        stage += ["--encoder", str(root / "encoder")]  # the workflow's commands (workflow/rules/hdct.smk)
        for i, shard in enumerate(shards):
            main([*stage, "--shard", f"{i}/3", "--out", str(shard)])
        main([*stage, "--merge", *map(str, shards), "--out", str(root / "merged")])
    return root, corpus


@pytest.mark.stage  # trains and runs the encoder
def test_three_shards_merged_are_the_unsharded_index_byte_for_byte(built):
    root, corpus = built
    whole, merged_dir = root / "whole", root / "merged"
    assert _files(whole) == _files(merged_dir) and "model.safetensors" in _files(whole)
    for name in _files(whole):
        if name != hdct.STATS:
            assert filecmp.cmp(whole / name, merged_dir / name, shallow=False), name
    one, many = (json.loads((d / hdct.STATS).read_text()) for d in (whole, merged_dir))
    assert {k: v for k, v in one.items() if k not in TIMING} == {k: v for k, v in many.items() if k not in TIMING}
    assert list(one) == list(many) and one["documents"] == len(corpus.docs) == 120
    records = [json.loads((root / "shards" / str(i) / hdct_shards.SHARD).read_text()) for i in range(3)]
    assert [(r["shard"]["start"], r["shard"]["stop"]) for r in records] == [(0, 42), (42, 84), (84, 120)]


def _refused(corpus, encoder: Path, copies: list[Path], out: Path) -> str:
    with pytest.MonkeyPatch.context() as patch, pytest.raises(InputError) as err:
        patch.setattr(hdct, "CHUNK", CHUNK)
        hdct_shards.merge(SPEC, corpus, encoder, copies, out)
    return str(err.value)


@pytest.mark.stage
def test_a_missing_incomplete_or_other_shard_is_never_merged(built, tmp_path):
    root, corpus = built
    encoder, out = root / "encoder", tmp_path / "out"
    copies = [tmp_path / str(i) for i in range(3)]
    for i, copy in enumerate(copies):
        shutil.copytree(root / "shards" / str(i), copy)
    (copies[1] / hdct_shards.SHARD).unlink()  # a shard whose job did not finish writes none
    assert f"shard 1 of 3 ({copies[1]}) is missing" in _refused(corpus, encoder, copies, out)
    shutil.copy(root / "shards" / "1" / hdct_shards.SHARD, copies[1])
    lines = (copies[2] / hdct_shards.FREQUENCIES).read_text().splitlines(keepends=True)
    (copies[2] / hdct_shards.FREQUENCIES).write_text("".join(lines[:-1]))
    assert f"shard 2 of 3 ({copies[2]}) is incomplete" in _refused(corpus, encoder, copies, out)
    shutil.copy(root / "shards" / "2" / hdct_shards.FREQUENCIES, copies[2])
    record = json.loads((copies[2] / hdct_shards.SHARD).read_text())
    write_json(copies[2] / hdct_shards.SHARD, {**record, "settings": {**record["settings"], "m": 50}})
    assert f"shard 2 of 3 ({copies[2]}) was weighted with the settings" in _refused(corpus, encoder, copies, out)
    write_json(copies[2] / hdct_shards.SHARD, {**record, "encoder": "0" * 64})
    assert f"shard 2 of 3 ({copies[2]}) was weighted by another encoder" in _refused(corpus, encoder, copies, out)
    write_json(copies[2] / hdct_shards.SHARD, record)
    assert "shard 0 of 2" in _refused(corpus, encoder, copies[1:], out)  # shard 1 of 3's range is not 0 of 2's
    assert not out.exists()


@pytest.mark.stage
def test_more_shards_than_weighting_chunks_are_refused_naming_the_key(built, tmp_path, capsys):
    root, corpus = built
    with pytest.raises(InputError, match=r"config key first_stages.hdct.shards: 2 shards for 120 documents"):
        hdct_shards.weigh_shard(SPEC, corpus, root / "encoder", 0, 2, tmp_path / "out", "cpu")  # one chunk of 256
    with pytest.MonkeyPatch.context() as patch, pytest.raises(InputError, match=r"19 shards for 120 documents"):
        patch.setattr(hdct, "CHUNK", CHUNK)
        hdct_shards.weigh_shard(SPEC, corpus, root / "encoder", 0, 19, tmp_path / "out", "cpu")
    stage = ["hdct", "--data", str(root / "data"), "--first-stage", json.dumps(SPEC), "--out", str(tmp_path / "out")]
    for bad in ("3/3", "1-3", "-1/3"):
        with pytest.raises(SystemExit):
            main([*stage, f"--shard={bad}", "--encoder", str(root / "encoder")])
        assert "expected i/N" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*stage, "--shard", "0/3"])
    assert "--shard and --merge read the trained encoder; give --encoder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _config(shards=None) -> dict:
    config = merged(())
    stage = {**SPEC, **({} if shards is None else {"shards": shards})}
    config["first_stages"] = [*config["first_stages"], stage]
    return config


@pytest.mark.parametrize("shards", [0, -1, 2.5, "3", True])
def test_a_bad_shard_count_is_refused_at_config_load_naming_the_key(shards):
    with pytest.raises(InputError, match=r"config key first_stages\.\d+\.shards"):
        validate_config(_config(shards))


def test_shards_is_a_key_of_hdct_only():
    config = merged(())
    config["first_stages"] = [{"name": "bm25", "method": "bm25", "shards": 2}]
    with pytest.raises(InputError, match="first_stages.0.shards: a key of method 'hdct'"):
        validate_config(config)


def test_one_shard_plans_no_shard_job_and_the_count_reaches_no_jobs_settings():
    default, one, three = (build_plan(validate_config(_config(n)), "results/x") for n in (None, 1, 3))
    assert job_inputs.hdct_shards(default, "hdct") == job_inputs.hdct_shards(one, "hdct") == []
    assert job_inputs.hdct_encoder(one, "hdct") == []
    assert job_inputs.hdct_shards(three, "hdct") == [f"results/x/hdct_shards/hdct/{i}" for i in range(3)]
    assert job_inputs.hdct_encoder(three, "hdct") == ["results/x/hdct_encoder/hdct"]
    assert job_inputs.hdct_shard(three, "hdct", "2") == "2/3"
    # every job reading the first stage's entry (hdct's, candidates', a model's history) is passed it without shards
    spec = job_inputs.first_stage_spec(three, "hdct")
    assert spec == job_inputs.first_stage_spec(one, "hdct") == job_inputs.first_stage_spec(default, "hdct")
    assert json.loads(spec) == {**SPEC, "top_k": 100}


@pytest.mark.stage  # two dry runs of the TREC DL rehearsal's DAG
def test_the_rehearsal_plans_hdct_shards_and_the_count_changes_no_other_job(tmp_path):
    """config/studies/trec-dl-rehearsal.yaml sets HDCT's 3 shards: its dry run plans an hdct_encoder job, 3 hdct_shard
    jobs and an hdct job merging them; the same run with one shard plans neither, and every job but HDCT's own and the
    config's record has the same command (the same params: Snakemake reruns a job whose params changed), the
    candidates', the trainings' and the histories' among them."""
    rehearsal = REPO / "config" / "studies" / "trec-dl-rehearsal.yaml"
    stages = yaml.safe_load(rehearsal.read_text())["first_stages"]
    assert [s.get("shards") for s in stages if s["method"] == "hdct"] == [3]
    one = tmp_path / "one_shard.yaml"  # a list is replaced whole: the rehearsal's first stages, HDCT's at 1 shard
    one.write_text(yaml.safe_dump({"first_stages": [{**s, "shards": 1} if "shards" in s else s for s in stages]}))
    three, single = sharded_and_one_shard_commands(tmp_path, one)
    rules = [rule for rule, _ in three]
    assert rules.count("hdct_shard") == 3 and rules.count("hdct_encoder") == rules.count("hdct") == 1
    assert not {"hdct_shard", "hdct_encoder"} & {rule for rule, _ in single}
    # the merge reads the encoder and the shards in order, with the entry one job is passed
    merge, whole = (shlex.split(next(c for r, c in jobs if r == "hdct")) for jobs in (three, single))
    shards = [f"results/trec-dl-2019/hdct_shards/hdct/{i}" for i in range(3)]
    assert merge[merge.index("--merge") + 1 : merge.index("--out")] == shards and "--merge" not in whole
    assert merge[merge.index("--encoder") + 1] == "results/trec-dl-2019/hdct_encoder/hdct"
    assert merge[merge.index("--first-stage") + 1] == whole[whole.index("--first-stage") + 1]
    assert "shards" not in json.loads(whole[whole.index("--first-stage") + 1])
    own = ("hdct", "hdct_encoder", "hdct_shard", "resolved_config")
    assert any(rule == "train" for rule, _ in single) and any(rule == "history" for rule, _ in single)
    assert sorted(job for job in three if job[0] not in own) == sorted(job for job in single if job[0] not in own)


HASH_SEEDED_INDEX = """
import sys
from collections import Counter
from pathlib import Path
from longrank.retrieval.hdct_index import build_index
tfs = [Counter({"wing": 3, "flow": 1}), Counter({"shock": 2, "wave": 2, "flow": 1}), Counter({"lift": 1, "drag": 4})]
build_index(["d1", "d2", "d3"], tfs, 0.9, 0.4, Path(sys.argv[1]))
"""


def test_an_hdct_index_has_the_same_bytes_whatever_the_hash_seed(tmp_path):
    """bm25s numbers a token list's terms in set order; the index numbers them sorted, so two processes with other
    string hash seeds (two runs, or one job and a sharded run's merge) write the same files."""
    import subprocess

    from conftest import REPO

    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO / "src")}
        subprocess.run(
            [sys.executable, "-c", HASH_SEEDED_INDEX, str(tmp_path / seed)], env=env, check=True, timeout=300
        )
    files = sorted(p.name for p in (tmp_path / "1").iterdir())
    assert "vocab.index.json" in files and files == sorted(p.name for p in (tmp_path / "2").iterdir())
    assert all((tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes() for name in files)
