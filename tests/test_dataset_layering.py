"""Every collection is judged by its own qrels: a config that names another collection, or writes its own
``dataset:`` block, gets none of Cranfield's keys (its reversed grade map above all). The resolved ``dataset`` block
of every shipped config and documented combination is asserted, and a user's own collection written over the
shipped configs, both as the config is validated and as Snakemake itself resolves it (``config.json``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import REPO, snakemake
from longrank.validation.validate import validate_config
from longrank.config.schema import SCHEMA_PATH
from longrank.errors import InputError
from longrank.config.files import configfiles
from test_config_matrix import COMBINATIONS, CONFIG, combo_id, merged_config

SCHEMA = str(SCHEMA_PATH)
TREC_DL_2019 = configfiles("config/trec-dl-2019.yaml")  # the year over the two years' base, config/trec-dl.yaml
SCHEMA_DEFAULTS = {
    k: v["default"]
    for k, v in yaml.safe_load(Path(SCHEMA).read_text())["properties"]["dataset"]["properties"].items()
    if "default" in v
}
# a user's own collection as the README tells them to write it
MINE = {
    "name": "mine",
    "source": "local",
    "docs": "mine/docs.jsonl",
    "queries": "mine/queries.tsv",
    "qrels": "mine/qrels.txt",
}


def _update(base: dict, new: dict) -> None:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _update(base[key], value)
        else:
            base[key] = value


def inline_block(combo: tuple[str, ...]) -> dict | None:
    """The dataset block a config of ``combo`` writes itself (the last one), if any (config/studies/learnability.yaml)."""
    blocks = [yaml.safe_load((REPO / f).read_text()).get("dataset") for f in combo]
    return next((dict(b) for b in reversed(blocks) if isinstance(b, dict)), None)


def described(name: str, combo: tuple[str, ...] = ()) -> dict:
    """The description the run's ``dataset`` resolves to: a shipped one by name, or the block a config writes."""
    path = CONFIG / "datasets" / f"{name}.yaml"
    return yaml.safe_load(path.read_text()) if path.exists() else inline_block(combo)


@pytest.mark.parametrize("combo", COMBINATIONS, ids=combo_id)
def test_each_combination_resolves_to_exactly_its_collections_description(combo):
    dataset = validate_config(merged_config(combo), SCHEMA)["dataset"]
    own = described(dataset["name"], combo)
    own["gains"] = {str(g): v for g, v in (own.get("gains") or {}).items()}
    assert dataset == {**SCHEMA_DEFAULTS, **own}, (
        f"{combo}: keys from elsewhere: {set(dataset) - set(own) - set(SCHEMA_DEFAULTS)}"
    )


# a TREC DL run names its year or the Dev run (config/trec-dl.yaml and an overlay over it alone put their settings on
# Cranfield)
@pytest.mark.parametrize(
    "combo",
    [
        c
        for c in COMBINATIONS
        if c[:1] == ("config/trec-dl.yaml",) and any("trec-dl-20" in f or "trec-dl-dev" in f for f in c)
    ],
    ids=combo_id,
)
def test_trec_dl_keeps_nists_grades(combo):
    dataset = validate_config(merged_config(combo), SCHEMA)["dataset"]
    assert dataset["gains"] == {} and dataset["exclude_grades"] == [] and dataset["reverses_grades"] is False
    assert dataset["doc_fields"] == ["title", "body"] and dataset["id"].startswith("msmarco-document/")


@pytest.mark.parametrize("combo", [c for c in COMBINATIONS if c and c[0] == "config/irled.yaml"], ids=combo_id)
def test_irled_has_its_own_keys_only(combo):
    dataset = validate_config(merged_config(combo), SCHEMA)["dataset"]
    assert {k for k, v in dataset.items() if SCHEMA_DEFAULTS.get(k, object()) != v} == {
        "name",
        "source",
        "docs",
        "queries",
        "qrels",
    }


@pytest.mark.parametrize(
    "combo",
    [
        c
        for c in COMBINATIONS
        if not c
        or (
            c[0] not in ("config/irled.yaml", "config/trec-dl.yaml", "config/trec-dl-passage.yaml")
            and not inline_block(c)
        )
    ],
    ids=combo_id,
)
def test_cranfield_keeps_its_reversed_map_on_purpose(combo):
    dataset = validate_config(merged_config(combo), SCHEMA)["dataset"]
    assert dataset["name"] == "cranfield"
    assert (
        dataset["gains"] == {"1": 4, "2": 3, "3": 2, "4": 1}
        and dataset["reverses_grades"] is True
        and dataset["exclude_grades"] == [-1]
    )


@pytest.mark.parametrize(
    "base", [(), ("config/irled.yaml",), TREC_DL_2019, ("config/irled.yaml", "config/studies/mir.yaml")], ids=combo_id
)
def test_a_users_own_collection_gets_none_of_the_base_configs_dataset_keys(base):
    # Over TREC DL's models the collection has MS MARCO's fields: NDRM's entries read a url field before them
    # (models.<ndrm>.doc_fields); a collection without title and body is refused by that key (the test below).
    mine = {**MINE, "doc_fields": ["title", "body"]} if base == TREC_DL_2019 else MINE
    config = merged_config(base)
    _update(config, {"dataset": dict(mine)})
    assert validate_config(config, SCHEMA)["dataset"] == {**SCHEMA_DEFAULTS, **mine}


def test_trec_dl_over_a_collection_of_other_fields_names_ndrms_key():
    config = merged_config(TREC_DL_2019)
    _update(config, {"dataset": {**MINE, "doc_fields": ["title", "text"]}})
    with pytest.raises(InputError, match=r"models\.ndrm\d\.doc_fields: \['url', 'title', 'body'\] must hold"):
        validate_config(config, SCHEMA)


def test_a_description_file_of_the_users_own_is_read_whole(tmp_path, monkeypatch):
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({**MINE, "gains": {"0": 0, "1": 1, "2": 3, "3": 7}}))
    monkeypatch.chdir(tmp_path)  # relative to the working directory, as Snakemake's
    config = merged_config(("config/irled.yaml",))
    config["dataset"] = "mine.yaml"
    assert validate_config(config, SCHEMA)["dataset"] == {
        **SCHEMA_DEFAULTS,
        **MINE,
        "gains": {"0": 0, "1": 1, "2": 3, "3": 7},
    }


def snakemake_resolves(tmp_path: Path, *configfiles: Path) -> dict:
    """``config.json`` as the workflow writes it (rule resolved_config): Snakemake's own merge of the files."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "config").symlink_to(CONFIG)
    dataset = yaml.safe_load(configfiles[-1].read_text())["dataset"]  # the results folder is named after it
    target = f"results/{dataset['name'] if isinstance(dataset, dict) else described(dataset)['name']}/config.json"
    snakemake(tmp_path, target, "--configfile", *map(str, configfiles))
    return json.loads((tmp_path / target).read_text())


@pytest.mark.stage
def test_snakemake_resolves_trec_dl_and_a_users_collection_without_cranfields_keys(tmp_path):
    trec = snakemake_resolves(tmp_path / "trec", *(REPO / path for path in TREC_DL_2019))["dataset"]
    assert trec == {**SCHEMA_DEFAULTS, **described("trec-dl-2019"), "gains": {}}
    (tmp_path / "mine").mkdir()
    for key in ("docs", "queries", "qrels"):
        (tmp_path / "mine" / MINE[key]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "mine" / MINE[key]).touch()
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"dataset": MINE}))
    assert snakemake_resolves(tmp_path / "mine", tmp_path / "mine.yaml")["dataset"] == {**SCHEMA_DEFAULTS, **MINE}
