"""Stages are found by their name: stage ``X`` of ``python -m longrank X`` runs
``src/longrank/X.py`` or ``src/longrank/<package>/X.py`` (``longrank.cli``'s docstring), with no table of exceptions;
``longrank rerank --ranker`` is an explicit alias of stage ``rerank_run``."""

from __future__ import annotations

import ast
import re

import pytest
import yaml

from longrank.cli import ALIASES, STAGES, main, stage_module, stage_of

from conftest import REPO

SRC = REPO / "src"


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_stages_module_is_named_as_the_stage(stage):
    module = stage_module(stage)
    parts = module.split(".")
    assert parts[0] == "longrank" and len(parts) in (2, 3) and parts[-1] == stage, (
        f"stage {stage!r} runs {module}: name its module longrank.{stage} or longrank.<package>.{stage}"
    )
    path = SRC.joinpath(*parts).with_suffix(".py")
    assert path.is_file(), path
    defined = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}
    assert {"add_arguments", "run"} <= defined, f"{path.relative_to(REPO)} lacks add_arguments / run"


def test_each_stage_name_is_one_module():
    """``src/longrank/**/<stage>.py`` is one file: the grep for a stage's ``def run`` finds it alone."""
    for stage in STAGES:
        found = [p for p in (SRC / "longrank").rglob(f"{stage}.py") if "def run(" in p.read_text()]
        assert found == [SRC.joinpath(*stage_module(stage).split(".")).with_suffix(".py")], stage


def test_the_alias_runs_the_stage_it_names(tmp_path, capsys):
    assert ALIASES == {"rerank": ("--ranker", "rerank_run")} and "rerank_run" in STAGES
    assert stage_of("rerank", ["--model", "tk"]) == "rerank" and stage_of("rerank", ["--ranker=x"]) == "rerank_run"
    assert stage_of("rerank", ["--ranker", "x"]) == "rerank_run" and stage_of("rerank_run", []) == "rerank_run"
    # the same stage and arguments either way; messages name the stage as typed (a directory as --run: refused
    # before any model is read)
    given = ["--ranker", "x", "--run", str(tmp_path), "--queries", "q", "--docs", "d", "--out", "o"]
    for typed in ("rerank", "rerank_run"):
        with pytest.raises(SystemExit) as stopped:
            main([typed, *given])
        assert stopped.value.code == 2
        assert (
            capsys.readouterr().err == f"longrank {typed}: error: --run: {tmp_path} is a directory; expected a file\n"
        )


def rule_stages() -> dict[str, list[str]]:
    """Each rule of the Snakefile and workflow/rules/*.smk -> the stages its command runs (``python -m longrank X``);
    a rule made by ``use rule A as B`` runs A's."""
    found: dict[str, list[str]] = {}
    uses = []
    for path in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]:
        text = path.read_text()
        for block in re.split(r"^(?=rule |checkpoint )", text, flags=re.M)[1:]:
            name = re.match(r"(?:rule|checkpoint) (\w+):", block).group(1)
            body = re.split(r"^\S", block.split("\n", 1)[1], maxsplit=1, flags=re.M)[0]  # up to the next top level
            found[name] = re.findall(r"python -m longrank (\w+)", body)
        uses += re.findall(r"^use rule (\w+) as (\w+)", text, flags=re.M)
    return found | {new: found[base] for base, new in uses}


def test_a_rule_is_named_as_the_stage_it_runs():
    """Rule ``X`` runs stage ``X``; a stage that more rules run names the others ``X_<what>`` (``compare_floors``,
    ``train_pretrain``); ``all`` is the one rule that runs none (the default target; ``snakemake report`` targets
    rule report itself)."""
    rules = rule_stages()
    assert {"data", "train", "train_pretrain", "report", "compare", "compare_floors", "all"} <= set(rules)
    assert {name for name, stages in rules.items() if not stages} == {"all"}
    for name, stages in rules.items():
        assert all(stage in STAGES for stage in stages), (name, stages)
        assert len(stages) <= 1 and all(name == s or name.startswith(f"{s}_") for s in stages), (
            f"rule {name} runs stage {stages}: name it as its stage"
        )


def test_the_profiles_key_resources_by_rules_that_exist():
    """A renamed rule leaves no resources behind under its old name (Snakemake would apply them to nothing)."""
    rules = set(rule_stages())
    for profile in sorted((REPO / "profiles").glob("*/config.yaml")):
        settings = yaml.safe_load(profile.read_text())
        for key in ("set-resources", "set-threads"):
            assert set(settings.get(key) or {}) <= rules, (profile, key, set(settings.get(key) or {}) - rules)
