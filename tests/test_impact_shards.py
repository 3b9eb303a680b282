"""An NDRM impact index spread over shards (``impact_index.shards``, src/longrank/models/ndrm_impact_shards.py): each
shard scores a range of the collection's documents cut at the scoring batch, and the merge of every shard equals one
job's index, ``impact.npz`` byte for byte and ``impact.json`` but its timing, pruned or not. The workflow plans one
artifacts_shard job per shard of each NDRM fold index, and the shard count reaches no other job's settings."""

from __future__ import annotations

import filecmp
import json
import shlex
import shutil
from pathlib import Path

import pytest

from rehearsal import sharded_and_one_shard_commands
from longrank import artifacts
from longrank.config.files import merged
from longrank.errors import InputError
from longrank.io.json_yaml import write_json
from longrank.models.checkpoint import save_weights
from longrank.models.ndrm_impact_shards import ROWS, SHARD
from longrank.plan import build_plan, job_inputs
from longrank.validation.validate import validate_config
from test_ndrm import SMALL, corpus, trained_a_little  # noqa: F401 (corpus: the module's fixture)

BATCH = 5  # 31 documents in 7 batches of 5: 3 shards of 10, 10 and 11 documents
CASES = {"ndrm1": {"variant": "ndrm1"}, "ndrm3_top3": {"variant": "ndrm3", "impact_depth": 3}}


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture(scope="module")
def built(corpus, tmp_path_factory):  # noqa: F811
    """Each case's fold index built once whole and once in 3 shards merged, from the same checkpoint."""
    root = tmp_path_factory.mktemp("impact_shards")
    out = {}
    for name, extra in CASES.items():
        cfg = {**SMALL, **extra}
        model = trained_a_little(corpus, extra["variant"], **{k: v for k, v in extra.items() if k != "variant"})
        checkpoint = root / name / "model.safetensors"
        save_weights(model, checkpoint)
        build = dict(model_cfg=cfg, corpus=corpus, scope="fold", checkpoint=checkpoint, batch_size=BATCH)
        artifacts.build(**build, out=root / name / "whole")
        shards = [root / name / "shards" / str(i) for i in range(3)]
        for i, shard in enumerate(shards):
            artifacts.build(**build, out=shard, part=artifacts.Part(shard=(i, 3)))
        artifacts.build(**build, out=root / name / "merged", part=artifacts.Part(merge=shards))
        out[name] = (root / name, build)
    return out


@pytest.mark.stage  # NDRM scores the collection
@pytest.mark.parametrize("name", list(CASES))
def test_three_shards_merged_are_the_unsharded_index_byte_for_byte(built, corpus, name):  # noqa: F811
    root, _ = built[name]
    whole, merged_dir = root / "whole", root / "merged"
    assert _files(whole) == _files(merged_dir) == ["impact.json", "impact.npz"]
    assert filecmp.cmp(whole / "impact.npz", merged_dir / "impact.npz", shallow=False)
    one, many = (json.loads((d / "impact.json").read_text()) for d in (whole, merged_dir))
    assert {k: v for k, v in one.items() if k != "build_seconds"} == {
        k: v for k, v in many.items() if k != "build_seconds"
    }
    assert list(one) == list(many) and one["doc_ids"] == sorted(corpus.docs) and len(one["doc_ids"]) == 31
    records = [json.loads((root / "shards" / str(i) / SHARD).read_text()) for i in range(3)]
    assert [(r["shard"]["start"], r["shard"]["stop"]) for r in records] == [(0, 10), (10, 20), (20, 31)]


def _refused(build: dict, copies: list[Path], out: Path) -> str:
    with pytest.raises(InputError) as err:
        artifacts.build(**build, out=out, part=artifacts.Part(merge=copies))
    return str(err.value)


@pytest.mark.stage
def test_a_missing_incomplete_or_other_shard_is_never_merged(built, tmp_path):
    root, build = built["ndrm1"]
    out, copies = tmp_path / "out", [tmp_path / str(i) for i in range(3)]
    for i, copy in enumerate(copies):
        shutil.copytree(root / "shards" / str(i), copy)
    (copies[1] / SHARD).unlink()  # a shard whose job did not finish never got its record
    assert f"shard 1 of 3 ({copies[1]}) is missing" in _refused(build, copies, out)
    shutil.copy(root / "shards" / "1" / SHARD, copies[1])
    record = json.loads((copies[2] / SHARD).read_text())
    write_json(copies[2] / SHARD, {**record, "documents": 10})
    assert f"shard 2 of 3 ({copies[2]}) is incomplete" in _refused(build, copies, out)
    write_json(copies[2] / SHARD, {**record, "checkpoint": "0" * 64})
    assert f"shard 2 of 3 ({copies[2]}) was built from another checkpoint" in _refused(build, copies, out)
    write_json(copies[2] / SHARD, {**record, "model": {**record["model"], "hidden_dim": 8}})
    assert f"shard 2 of 3 ({copies[2]}) was built from another model entry" in _refused(build, copies, out)
    write_json(copies[2] / SHARD, record)
    shutil.copy(root / "shards" / "0" / ROWS, copies[2] / ROWS)  # another range's rows under shard 2's record
    (copies[0] / ROWS).unlink()
    assert f"shard 0 of 3 ({copies[0]}) is missing" in _refused(build, copies, out)
    assert "shard 0 of 2" in _refused(build, copies[1:], out)  # shard 1 of 3's range is not 0 of 2's
    assert not out.exists()


@pytest.mark.stage
def test_more_shards_than_batches_or_a_model_without_an_impact_index_are_refused(built, corpus, tmp_path):  # noqa: F811
    _, build = built["ndrm1"]
    with pytest.raises(InputError, match=r"config key impact_index.shards: 8 shards for 31 documents"):
        artifacts.build(**build, out=tmp_path / "out", part=artifacts.Part(shard=(0, 8)))
    mores = {**build, "model_cfg": {"type": "knrm"}, "scope": "collection", "checkpoint": None}
    with pytest.raises(InputError):
        artifacts.build(**mores, out=tmp_path / "out", part=artifacts.Part(shard=(0, 2)))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("shards", [0, -1, 2.5, "3", True])
def test_a_bad_shard_count_is_refused_at_config_load_naming_the_key(shards):
    config = merged(())
    config["impact_index"] = {"shards": shards}
    with pytest.raises(InputError, match="config key impact_index.shards"):
        validate_config(config)


def test_one_shard_plans_no_shard_job_and_only_ndrm_fold_indexes_are_sharded():
    def plan(shards: int | None):
        config = merged(())
        if shards is not None:
            config["impact_index"] = {"shards": shards}
        return build_plan(validate_config(config), "results/x")

    default, one, three = plan(None), plan(1), plan(3)
    ndrm = next(m for m, e in three.config["models"].items() if e["type"] == "ndrm" and e.get("variant") != "ndrm2")
    assert job_inputs.artifact_shards(default, ndrm, "fold0") == job_inputs.artifact_shards(one, ndrm, "fold0") == []
    assert job_inputs.artifact_shards(three, ndrm, "fold0") == [
        f"results/x/artifacts_shards/{ndrm}/fold0/{i}" for i in range(3)
    ]
    assert job_inputs.artifact_shard(three, "2") == "2/3"
    others = [m for m, e in three.config["models"].items() if e["type"] != "ndrm"]
    assert others and all(job_inputs.artifact_shards(three, m, "fold0") == [] for m in others)
    assert all(job_inputs.artifact_shards(three, m, "collection") == [] for m in three.config["models"])


@pytest.mark.stage  # two dry runs of the TREC DL rehearsal's DAG
def test_the_rehearsal_plans_impact_shards_and_the_count_changes_no_other_job(tmp_path):
    """config/studies/trec-dl-rehearsal.yaml (as config/trec-dl.yaml) sets 3 shards: its dry run plans 3
    artifacts_shard jobs per NDRM fold index and an artifacts job merging them; the same run with one shard plans
    none, and every job but the indexes' own and the config's record has the same command (the trainings', the
    rerankings' and the fullrank candidates' among them)."""
    one = tmp_path / "one_shard.yaml"
    one.write_text("impact_index: {shards: 1}\n")
    three, single = sharded_and_one_shard_commands(tmp_path, one)
    merges = [shlex.split(c) for r, c in three if r == "artifacts"]
    assert len(merges) == 3 and [r for r, _ in three].count("artifacts_shard") == 9
    assert "artifacts_shard" not in [r for r, _ in single]
    for merge in merges:  # each index merges its own three shards, in order
        out = merge[merge.index("--out") + 1].replace("/artifacts/", "/artifacts_shards/")
        assert merge[merge.index("--merge") + 1 : merge.index("--out")] == [f"{out}/{i}" for i in range(3)]
    own = ("artifacts", "artifacts_shard", "resolved_config")
    assert any(rule == "train" for rule, _ in single) and any(rule == "candidates" for rule, _ in single)
    assert sorted(job for job in three if job[0] not in own) == sorted(job for job in single if job[0] not in own)
    # the merge is one job's command with the shards added: the entry, checkpoint and data one job is passed
    whole = sorted(shlex.split(c) for r, c in single if r == "artifacts")
    assert whole == sorted(m[: m.index("--merge")] + m[m.index("--out") :] for m in merges)
