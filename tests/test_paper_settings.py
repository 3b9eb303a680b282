"""docs/paper-settings.md: the papers' stated hyper-parameters (docs/paper_settings.yaml) against what the full-scale
configs resolve to. Fails when a resolved entry disagrees with a row, or when the page is not what the generator
(docs/paper_settings.py) writes from the table and the configs."""

from __future__ import annotations

import copy
import importlib.util

import pytest

from conftest import REPO


def generator():
    spec = importlib.util.spec_from_file_location("paper_settings", REPO / "docs" / "paper_settings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def paper_settings():
    return generator()


def test_every_full_scale_config_ships_the_papers_settings(paper_settings):
    table = paper_settings.load_table()
    assert set(table["configs"]) == {"trec-dl-2019.yaml", "trec-dl-2020.yaml"}
    assert paper_settings.disagreements(table) == []


def test_a_row_the_config_does_not_follow_is_reported(paper_settings):
    """The check can fail: TKL at the CPU default's learning rate, and a key no entry carries, are both named."""
    table = copy.deepcopy(paper_settings.load_table())
    tkl_rows = table["papers"][0]["settings"]
    lr = next(row for row in tkl_rows if row["key"] == "train.lr" and "tkl" in row["models"])
    lr["value"] = 0.001
    tkl_rows.append({"stated": "a key nobody sets", "models": ["tkl"], "key": "no_such_key", "value": 1, "source": "-"})
    table["configs"] = table["configs"][:1]
    problems = paper_settings.disagreements(table)
    assert any("tkl train.lr is 0.0001" in p and "says 0.001" in p for p in problems)
    assert any("tkl no_such_key is not configured" in p for p in problems)


def test_the_page_is_up_to_date(paper_settings):
    page = (REPO / "docs" / "paper-settings.md").read_text()
    assert page == paper_settings.render(paper_settings.load_table()) + "\n", "run: python docs/paper_settings.py"


def test_every_row_is_live(paper_settings):
    """Each row's value, flipped, changes what a stage reads for each of its models (or the config's)."""
    assert paper_settings.dead_rows(paper_settings.load_table()) == []


def test_a_dead_row_is_reported(paper_settings, monkeypatch):
    """The liveness check can fail: TK takes no overlap (a TKL key), and PRF settings of a graph set without PRF
    queries are read by no stage (the token graph then links entities only): both rows are named dead."""
    table = copy.deepcopy(paper_settings.load_table())
    table["configs"] = table["configs"][:1]
    mir = table["papers"][3]["settings"]
    table["papers"] = [
        {
            "paper": "x",
            "settings": [
                {"stated": "an overlap", "models": ["tk"], "key": "overlap", "value": 10, "source": "-"},
                next(row for row in mir if row["key"] == "mir_graphs.mir.prf_terms"),
                next(row for row in mir if row["key"] == "mir_graphs.mir.window"),
            ],
        }
    ]
    merged = paper_settings.merged_config

    def without_prf(name):
        config = merged(name)
        config["mir_graphs"]["mir"]["prf_queries"] = None
        return config

    monkeypatch.setattr(paper_settings, "merged_config", without_prf)
    dead = paper_settings.dead_rows(table)
    assert len(dead) == 2, dead
    assert "tk overlap is dead: 10 -> 21" in dead[0]
    assert "(config) mir_graphs.mir.prf_terms is dead" in dead[1]  # the window row stays live


def _dotted(entry: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in entry.items():
        out.update(_dotted(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return out


@pytest.mark.parametrize(
    "files",
    [("trec-dl.yaml", "trec-dl-2019.yaml"), ("trec-dl.yaml", "trec-dl-2020.yaml"), ("trec-dl-passage.yaml",)],
)
def test_no_key_of_a_cpu_entry_reaches_a_full_scale_entry_of_the_same_name(files):
    """The full-scale configs lay themselves over config/config.yaml, whose entries of the same names are CPU recipes:
    a key the full-scale entry leaves out would silently take the CPU value (config.yaml's ndrm3 once gave the
    full-scale NDRM3 its window scorer's CPU rate, 0.05, beside the authors' 1e-4; its bert_firstp and mores their CPU
    rerank depth of 20 beside MORES's 1,000). Every key of a resolved full-scale entry must be set in the full-scale
    config itself; a model default is the constructor's, never the CPU entry's."""
    import yaml

    from longrank.config.files import merged

    resolved = merged(tuple(f"config/{name}" for name in files))["models"]
    own = {}
    for name in files:
        own.update((yaml.safe_load((REPO / "config" / name).read_text()) or {}).get("models", {}))
    leaked = {
        name: sorted(set(_dotted(entry)) - set(_dotted(own.get(name, {}))))
        for name, entry in resolved.items()
        if entry.get("enabled", True)
    }
    assert not {name: keys for name, keys in leaked.items() if keys}, "keys a CPU entry gave a full-scale one"
